//! Random bytes from the kernel and the hex text secrets and ids are written in.

use std::io::Read;

/// `N` bytes from the kernel's random source.
pub fn random<const N: usize>() -> std::io::Result<[u8; N]> {
    let mut bytes = [0u8; N];
    std::fs::File::open("/dev/urandom")?.read_exact(&mut bytes)?;
    Ok(bytes)
}

/// Lower-case hex text of `bytes`.
pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hex_is_two_lower_case_digits_per_byte() {
        assert_eq!(hex(&[0x00, 0x0f, 0xa0, 0xff]), "000fa0ff");
    }

    #[test]
    fn random_bytes_differ_between_draws() {
        let a = random::<16>().expect("urandom");
        let b = random::<16>().expect("urandom");
        assert_ne!(a, b);
    }
}
