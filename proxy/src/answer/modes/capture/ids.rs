//! Provider-shaped ids cut from a hash of the request, so a request always gets the same ids.

use std::fmt::Write as _;

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use sha2::{Digest as _, Sha256};

/// SHA-256 of a request body, a label (what the id is for) and an index (which message).
pub(super) struct Digest([u8; 32]);

impl Digest {
    /// The digest for the `index`th id labelled `label` of a request with `body`.
    pub(super) fn of(body: &[u8], label: &str, index: usize) -> Self {
        let mut hash = Sha256::new();
        hash.update(label.as_bytes());
        hash.update(index.to_le_bytes());
        hash.update(body);
        Self(hash.finalize().into())
    }

    /// The first `len` lower-case hex digits (at most 64).
    pub(super) fn hex(&self, len: usize) -> String {
        let mut hex = String::with_capacity(64);
        for byte in self.0 {
            // Writing to a String cannot fail.
            let _ = write!(hex, "{byte:02x}");
        }
        hex.truncate(len);
        hex
    }

    /// A version 4 UUID (`8-4-4-4-12` hex).
    pub(super) fn uuid(&self) -> String {
        let mut bytes = [0u8; 16];
        bytes.copy_from_slice(&self.0[..16]);
        uuid::Builder::from_random_bytes(bytes)
            .into_uuid()
            .hyphenated()
            .to_string()
    }

    /// The first `bytes` bytes (at most 32) in URL-safe base64 without padding.
    pub(super) fn base64url(&self, bytes: usize) -> String {
        URL_SAFE_NO_PAD.encode(&self.0[..bytes.min(32)])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_stable_per_body_label_and_index() {
        let a = Digest::of(b"body", "message", 0);
        assert_eq!(a.hex(64), Digest::of(b"body", "message", 0).hex(64));
        assert_ne!(a.hex(64), Digest::of(b"body", "message", 1).hex(64));
        assert_ne!(a.hex(64), Digest::of(b"body", "request", 0).hex(64));
        assert_ne!(a.hex(64), Digest::of(b"other", "message", 0).hex(64));
    }

    #[test]
    fn uuid_has_the_version_4_shape() {
        let uuid = Digest::of(b"body", "message", 0).uuid();
        let groups: Vec<&str> = uuid.split('-').collect();
        assert_eq!(
            groups.iter().map(|g| g.len()).collect::<Vec<_>>(),
            [8, 4, 4, 4, 12]
        );
        assert!(groups[2].starts_with('4'));
        assert!(matches!(groups[3].as_bytes()[0], b'8' | b'9' | b'a' | b'b'));
        assert!(uuid.bytes().all(|b| b == b'-' || b.is_ascii_hexdigit()));
    }

    #[test]
    fn base64url_has_no_padding_or_unsafe_characters() {
        let id = Digest::of(b"body", "message", 0).base64url(16);
        assert_eq!(id.len(), 22);
        assert!(
            id.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
        );
    }
}
