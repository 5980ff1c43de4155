//! The project's static binaries, the ones an image `FROM scratch` can run: where each is
//! looked for, and whether a file is one.

use std::path::{Path, PathBuf};

use crate::runtime::RuntimeError;

/// The static target triple the project's image binaries are built for.
pub const STATIC_TARGET: &str = "x86_64-unknown-linux-gnu";

/// The sidecar binary's file name.
pub const PROXY_BINARY: &str = "af-proxy";
/// The forwarder's file name (built with the sidecar, shipped in the same image).
pub const FORWARD_BINARY: &str = "af-forward";

/// Find the static `af-proxy`: `AF_PROXY_BINARY` (given as `explicit`), next to the running
/// `af`, then `$CARGO_TARGET_DIR` or the workspace's `target/`, under the static target.
pub fn find_proxy_binary(explicit: Option<&Path>) -> Result<PathBuf, RuntimeError> {
    find_static_binary(PROXY_BINARY, "af-proxy", "sidecar", explicit)
}

/// Find the static binary `file` of cargo package `package`, for the image of `what`:
/// `explicit` when given, else next to the running `af`, then `$CARGO_TARGET_DIR` or the
/// workspace's `target/`, under the static target.
pub fn find_static_binary(
    file: &str,
    package: &str,
    what: &str,
    explicit: Option<&Path>,
) -> Result<PathBuf, RuntimeError> {
    let mut tried = Vec::new();
    let mut candidates: Vec<PathBuf> = Vec::new();
    if let Some(p) = explicit {
        candidates.push(p.to_owned());
    } else {
        if let Ok(exe) = std::env::current_exe()
            && let Some(dir) = exe.parent()
        {
            candidates.push(dir.join(file));
        }
        if let Some(dir) = std::env::var_os("CARGO_TARGET_DIR") {
            candidates.push(
                Path::new(&dir)
                    .join(STATIC_TARGET)
                    .join("release")
                    .join(file),
            );
        }
        let workspace = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        candidates.push(
            workspace
                .join("target")
                .join(STATIC_TARGET)
                .join("release")
                .join(file),
        );
    }
    for c in candidates {
        match is_static_elf(&c) {
            Ok(true) => return Ok(c),
            Ok(false) => tried.push(format!("{} (not statically linked)", c.display())),
            Err(_) => tried.push(format!("{} (missing)", c.display())),
        }
    }
    Err(RuntimeError::ImageBuild {
        service: what.to_owned(),
        message: format!(
            "no static {file} binary was found; tried {}",
            tried.join(", ")
        ),
        tail: vec![format!(
            "build it with: RUSTFLAGS='-C target-feature=+crt-static' cargo build --release --target {STATIC_TARGET} -p {package}"
        )],
    })
}

/// The bytes of a file read for its ELF header and program headers, which a linker puts at
/// the start (a table further in makes the file read as not static).
const ELF_HEADERS_READ: u64 = 64 * 1024;

/// Whether `path` is an ELF executable with no program interpreter (so it runs `FROM scratch`).
pub fn is_static_elf(path: &Path) -> std::io::Result<bool> {
    let mut head = Vec::new();
    std::io::Read::read_to_end(
        &mut std::io::Read::take(std::fs::File::open(path)?, ELF_HEADERS_READ),
        &mut head,
    )?;
    Ok(elf_is_static(&head))
}

fn elf_is_static(b: &[u8]) -> bool {
    // 64-bit little-endian ELF only (the static target is x86_64).
    if b.len() < 64 || &b[..4] != b"\x7fELF" || b[4] != 2 || b[5] != 1 {
        return false;
    }
    let u16_at = |o: usize| b.get(o..o + 2).map(|s| u16::from_le_bytes([s[0], s[1]]));
    let u64_at = |o: usize| {
        b.get(o..o + 8)
            .and_then(|s| <[u8; 8]>::try_from(s).ok())
            .map(u64::from_le_bytes)
    };
    let (Some(phoff), Some(phentsize), Some(phnum)) = (u64_at(0x20), u16_at(0x36), u16_at(0x38))
    else {
        return false;
    };
    const PT_INTERP: u32 = 3;
    for i in 0..usize::from(phnum) {
        let Some(off) = usize::try_from(phoff)
            .ok()
            .and_then(|p| p.checked_add(i * usize::from(phentsize)))
        else {
            return false;
        };
        let Some(kind) = b.get(off..off + 4) else {
            return false;
        };
        if u32::from_le_bytes([kind[0], kind[1], kind[2], kind[3]]) == PT_INTERP {
            return false;
        }
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_test_binary_is_dynamic_or_static_and_garbage_is_neither() {
        assert!(!elf_is_static(
            b"not an elf at all, long enough to look at the header fields ok"
        ));
        assert!(!elf_is_static(&[]));
        // /bin/sh on the build machine is dynamically linked.
        if let Ok(false) = is_static_elf(Path::new("/bin/sh")) {
        } else {
            panic!("/bin/sh should read as dynamic");
        }
    }

    /// A 64-bit little-endian ELF header with one program header of type `kind` after it.
    fn elf_with_program_header(kind: u32) -> Vec<u8> {
        let mut b = vec![0u8; 64 + 56];
        b[..6].copy_from_slice(b"\x7fELF\x02\x01");
        b[0x20..0x28].copy_from_slice(&64u64.to_le_bytes());
        b[0x36..0x38].copy_from_slice(&56u16.to_le_bytes());
        b[0x38..0x3a].copy_from_slice(&1u16.to_le_bytes());
        b[64..68].copy_from_slice(&kind.to_le_bytes());
        b
    }

    #[test]
    fn a_large_file_is_judged_by_its_headers_alone() {
        const PT_LOAD: u32 = 1;
        const PT_INTERP: u32 = 3;
        let dir = tempfile::tempdir().expect("temp dir");
        for (kind, is_static) in [(PT_LOAD, true), (PT_INTERP, false)] {
            let mut bytes = elf_with_program_header(kind);
            assert_eq!(elf_is_static(&bytes), is_static, "{kind}");
            // A binary's size is mostly code and debug information after the headers.
            bytes.resize(8 << 20, 0xcc);
            let path = dir.path().join(format!("binary-{kind}"));
            std::fs::write(&path, &bytes).expect("write");
            assert_eq!(is_static_elf(&path).expect("read"), is_static, "{kind}");
        }
    }
}
