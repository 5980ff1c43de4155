//! Host names as the catalogue compares them: lower case, no trailing dot, IDN in punycode.

use std::borrow::Cow;
use std::net::IpAddr;

use thiserror::Error;

/// The longest host name DNS can carry, in its text form without the trailing dot.
pub const MAX_HOST_LEN: usize = 253;

/// Why a host cannot be compared.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum HostError {
    /// The host is empty.
    #[error("the host is empty")]
    Empty,
    /// The host is longer than DNS allows.
    #[error("the host is longer than {MAX_HOST_LEN} characters")]
    TooLong,
    /// The host is not a valid internationalised domain name.
    #[error("the host {0:?} is not a valid domain name")]
    Invalid(String),
}

/// A host in the catalogue's canonical form, borrowed when the input already was canonical.
///
/// ASCII input with upper case is lower-cased into a stack buffer, so the proxy's hot path (HTTP
/// `Host` and TLS SNI are ASCII on the wire) never allocates; only a Unicode host goes through
/// IDNA.
#[allow(clippy::large_enum_variant)] // The buffer lives on the stack on purpose: no allocation.
pub(crate) enum CanonicalHost<'a> {
    /// The input was already canonical.
    Borrowed(&'a str),
    /// ASCII input lower-cased on the stack.
    Lowered(LoweredHost),
    /// A Unicode host converted to punycode.
    Converted(String),
}

/// An ASCII host lower-cased into a fixed buffer.
pub(crate) struct LoweredHost {
    buf: [u8; MAX_HOST_LEN],
    len: usize,
}

impl LoweredHost {
    fn new(host: &[u8]) -> Self {
        let mut lowered = LoweredHost {
            buf: [0; MAX_HOST_LEN],
            len: host.len(),
        };
        for (dst, src) in lowered.buf.iter_mut().zip(host) {
            *dst = src.to_ascii_lowercase();
        }
        lowered
    }

    fn as_str(&self) -> &str {
        // Only ASCII bytes are ever copied into `buf`.
        std::str::from_utf8(&self.buf[..self.len]).unwrap_or_default()
    }
}

impl CanonicalHost<'_> {
    /// The canonical text.
    pub(crate) fn as_str(&self) -> &str {
        match self {
            CanonicalHost::Borrowed(s) => s,
            CanonicalHost::Lowered(host) => host.as_str(),
            CanonicalHost::Converted(s) => s,
        }
    }
}

/// Bring `host` to canonical form without allocating when it is ASCII.
pub(crate) fn canonicalize(host: &str) -> Result<CanonicalHost<'_>, HostError> {
    let host = host.strip_suffix('.').unwrap_or(host);
    if host.is_empty() {
        return Err(HostError::Empty);
    }
    if !host.is_ascii() {
        return idna::domain_to_ascii(host)
            .map(CanonicalHost::Converted)
            .map_err(|_| HostError::Invalid(host.to_owned()));
    }
    if host.len() > MAX_HOST_LEN {
        return Err(HostError::TooLong);
    }
    if host.bytes().any(|b| b.is_ascii_uppercase()) {
        Ok(CanonicalHost::Lowered(LoweredHost::new(host.as_bytes())))
    } else {
        Ok(CanonicalHost::Borrowed(host))
    }
}

/// The canonical form of a host: lower case, no trailing dot, IDN as punycode.
///
/// ```
/// use af_policy::egress::normalize_host;
/// assert_eq!(normalize_host("API.Example.COM.").unwrap(), "api.example.com");
/// assert_eq!(normalize_host("bücher.example").unwrap(), "xn--bcher-kva.example");
/// ```
pub fn normalize_host(host: &str) -> Result<Cow<'_, str>, HostError> {
    Ok(match canonicalize(host)? {
        CanonicalHost::Borrowed(s) => Cow::Borrowed(s),
        CanonicalHost::Lowered(lowered) => Cow::Owned(lowered.as_str().to_owned()),
        CanonicalHost::Converted(s) => Cow::Owned(s),
    })
}

/// The address a host names when it is an IP literal (`203.0.113.7`, `::1` or `[::1]`).
pub(crate) fn ip_literal(host: &str) -> Option<IpAddr> {
    // Names are the common case: only text that can start an address is parsed.
    let first = *host.as_bytes().first()?;
    if !(first.is_ascii_hexdigit() || first == b'[' || first == b':') {
        return None;
    }
    let inner = host
        .strip_prefix('[')
        .and_then(|h| h.strip_suffix(']'))
        .unwrap_or(host);
    inner.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn canonical_ascii_input_is_borrowed() {
        assert!(matches!(
            normalize_host("api.example.com"),
            Ok(Cow::Borrowed(_))
        ));
    }

    #[test]
    fn upper_case_and_trailing_dot_are_normalised() {
        assert_eq!(
            normalize_host("API.Example.com.").unwrap(),
            "api.example.com"
        );
    }

    #[test]
    fn unicode_host_becomes_punycode() {
        assert_eq!(
            normalize_host("Bücher.example").unwrap(),
            "xn--bcher-kva.example"
        );
    }

    #[test]
    fn empty_and_oversize_hosts_are_refused() {
        assert_eq!(normalize_host("."), Err(HostError::Empty));
        assert_eq!(normalize_host(&"a".repeat(254)), Err(HostError::TooLong));
    }

    #[test]
    fn ip_literals_are_recognised_with_and_without_brackets() {
        assert_eq!(ip_literal("[::1]"), Some("::1".parse().unwrap()));
        assert_eq!(
            ip_literal("203.0.113.7"),
            Some("203.0.113.7".parse().unwrap())
        );
        assert_eq!(ip_literal("example.com"), None);
    }
}
