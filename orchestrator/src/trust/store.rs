//! The image's own system store, with the environment CA appended: written over the image's
//! file, so a client that reads only its system store (Go, `requests` with `trust_env=False`,
//! anything linked against OpenSSL that ignores the variables) trusts intercepted hosts too
//! and keeps every root the image trusted.

/// Where images keep their system CA store (PEM), in the order they are looked for: Debian,
/// Ubuntu and Alpine; then RHEL and Fedora, whose `/etc/pki/tls/certs/ca-bundle.crt` is a link
/// to the extracted bundle (a link is left alone: the file it names gets the CA).
pub const SYSTEM_STORES: [&str; 3] = [
    "/etc/ssl/certs/ca-certificates.crt",
    "/etc/pki/ca-trust/extracted/pem/tls-ca-bundle.pem",
    "/etc/pki/tls/certs/ca-bundle.crt",
];

/// The largest store read from an image: Mozilla's roots as PEM are about 220 KiB, so a file
/// past this is not a store and is left as it is.
pub const MAX_STORE_BYTES: usize = 4 * 1024 * 1024;

/// `roots_pem` followed by `ca_pem`, one certificate per block, newline-terminated.
pub fn with_ca(roots_pem: &str, ca_pem: &str) -> String {
    let mut out = roots_pem.trim_end().to_owned();
    if !out.is_empty() {
        out.push('\n');
    }
    out.push_str(ca_pem.trim_end());
    out.push('\n');
    out
}

/// What one of [`SYSTEM_STORES`] is in an image.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ImageFile {
    /// A regular file and its text.
    File(String),
    /// Absent, a link, not text, or larger than [`MAX_STORE_BYTES`]: left as it is.
    Leave,
}

/// The files to write over the image's stores: each store the image has as a regular file,
/// with the CA appended, by path.
pub fn replacements<'a>(
    found: impl IntoIterator<Item = (&'a str, ImageFile)>,
    ca_pem: &str,
) -> Vec<(&'a str, String)> {
    found
        .into_iter()
        .filter_map(|(path, file)| match file {
            ImageFile::File(text) => Some((path, with_ca(&text, ca_pem))),
            ImageFile::Leave => None,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const ROOT: &str = "-----BEGIN CERTIFICATE-----\nUk9PVA==\n-----END CERTIFICATE-----\n";
    const CA: &str = "-----BEGIN CERTIFICATE-----\nQ0E=\n-----END CERTIFICATE-----\n";

    #[test]
    fn the_image_store_keeps_its_roots_and_gains_the_ca_last() {
        let combined = with_ca(ROOT, CA);
        assert_eq!(combined, format!("{ROOT}{CA}"));
        assert_eq!(with_ca("", CA), CA, "an empty store still gets the CA");
        assert_eq!(
            with_ca(&format!("{ROOT}\n\n"), CA),
            format!("{ROOT}{CA}"),
            "no blank lines between"
        );
    }

    #[test]
    fn only_stores_the_image_has_as_files_are_replaced() {
        let found = [
            (SYSTEM_STORES[0], ImageFile::File(ROOT.to_owned())),
            (SYSTEM_STORES[1], ImageFile::Leave),
            (SYSTEM_STORES[2], ImageFile::Leave),
        ];
        let written = replacements(found, CA);
        assert_eq!(
            written,
            [(SYSTEM_STORES[0], format!("{ROOT}{CA}"))],
            "a Debian-style image: its one store"
        );
        let rhel = [
            (SYSTEM_STORES[0], ImageFile::Leave),
            (SYSTEM_STORES[1], ImageFile::File(ROOT.to_owned())),
            (SYSTEM_STORES[2], ImageFile::Leave),
        ];
        assert_eq!(replacements(rhel, CA)[0].0, SYSTEM_STORES[1]);
        let scratch = SYSTEM_STORES.map(|p| (p, ImageFile::Leave));
        assert!(
            replacements(scratch, CA).is_empty(),
            "an image without a store"
        );
    }
}
