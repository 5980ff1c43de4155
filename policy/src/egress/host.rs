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

/// A host in the catalogue's canonical form, and how many labels it has.
pub(crate) struct CanonicalHost<'a> {
    /// The canonical text: the input itself, the input lower-cased into the caller's buffer, or
    /// (for a Unicode host only) a punycode conversion.
    pub(crate) text: Cow<'a, str>,
    /// Number of labels (dots plus one).
    pub(crate) labels: usize,
    /// Whether the text can be an IP literal (it starts with a digit or `[`, or has a colon).
    pub(crate) maybe_ip: bool,
}

impl CanonicalHost<'_> {
    /// The canonical text.
    pub(crate) fn as_str(&self) -> &str {
        &self.text
    }
}

/// A caller's stack slot for a lower-cased host. It starts as `None` and is filled only for a
/// host with upper-case letters: zeroing 253 bytes cost 17 instructions a decision.
pub(crate) type HostBuf = Option<[u8; MAX_HOST_LEN]>;

/// Bring `host` to canonical form in one pass over its bytes. ASCII input is borrowed or
/// lower-cased into `buf`, so the proxy's hot path (HTTP `Host` and TLS SNI are ASCII on the
/// wire) never allocates; only a Unicode host goes through IDNA. Inlined: as a call, saving
/// registers and passing the result through memory cost ten instructions a decision.
#[inline(always)]
pub(crate) fn canonicalize<'a>(
    host: &'a str,
    buf: &'a mut HostBuf,
) -> Result<CanonicalHost<'a>, HostError> {
    let host = host.strip_suffix('.').unwrap_or(host);
    if host.is_empty() {
        return Err(HostError::Empty);
    }
    if host.len() > MAX_HOST_LEN {
        return match host.is_ascii() {
            true => Err(HostError::TooLong),
            false => to_punycode(host),
        };
    }
    let shape = ByteShape::of(host.as_bytes());
    if !shape.ascii {
        return to_punycode(host);
    }
    let text = if shape.upper {
        lower_into(host, buf)?
    } else {
        host
    };
    let first = host.as_bytes()[0];
    Ok(CanonicalHost {
        text: Cow::Borrowed(text),
        labels: shape.dots + 1,
        maybe_ip: shape.colon || first.is_ascii_digit() || first == b'[',
    })
}

/// `host` (ASCII, at most [`MAX_HOST_LEN`] bytes) lower-cased into `buf`.
fn lower_into<'a>(host: &str, buf: &'a mut HostBuf) -> Result<&'a str, HostError> {
    let lowered = &mut buf.insert([0; MAX_HOST_LEN])[..host.len()];
    lowered.copy_from_slice(host.as_bytes());
    lowered.make_ascii_lowercase();
    let lowered: &'a [u8] = lowered;
    // Lower-casing ASCII keeps it ASCII, so this never fails.
    std::str::from_utf8(lowered).map_err(|_| HostError::Invalid(host.to_owned()))
}

/// What one pass over a host's bytes tells: eight bytes at a time, since this runs for every
/// request the sidecar decides.
#[derive(Debug, PartialEq, Eq)]
struct ByteShape {
    ascii: bool,
    upper: bool,
    colon: bool,
    dots: usize,
}

/// The running state of [`ByteShape::of`]: masks and per-byte counts folded over the words,
/// tested once at the end rather than word by word.
struct Lanes {
    /// Every word or-ed together: a high bit set means a non-ASCII byte.
    any: u64,
    /// High bit of a byte set where some word had a byte from `:` to `Z` there: upper case, a
    /// colon, or punctuation no host name has. One range test instead of two; the rare host
    /// with such a byte is read again byte by byte.
    rare: u64,
    /// Per byte, how many words had a dot in that byte.
    dots: u64,
}

impl ByteShape {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGH: u64 = 0x8080_8080_8080_8080;

    /// The shape of `bytes`, at most 255 of them (so the dot counts cannot overflow a byte).
    /// Inlined into [`canonicalize`]: as a call it saved six registers and loaded its seven
    /// constants anew, twelve instructions a decision.
    #[inline(always)]
    fn of(bytes: &[u8]) -> ByteShape {
        debug_assert!(bytes.len() <= 255);
        let (chunks, tail) = bytes.as_chunks::<8>();
        let mut lanes = Lanes {
            any: 0,
            rare: 0,
            dots: 0,
        };
        for chunk in chunks {
            lanes.add(u64::from_le_bytes(*chunk));
        }
        lanes.add(Self::tail_word(bytes, tail.len()));
        lanes.shape(bytes)
    }

    /// The last `len` (< 8) bytes of `bytes` as a word, zero above them. Zero bytes change no
    /// field, so the tail is read like any other word: with one load of the final eight bytes
    /// when there are that many (the bytes already read shifted out), else byte by byte. A
    /// copy into a padded buffer cost a `memcpy` call per decision.
    fn tail_word(bytes: &[u8], len: usize) -> u64 {
        if len == 0 {
            return 0;
        }
        match bytes.last_chunk::<8>() {
            Some(last) => u64::from_le_bytes(*last) >> (8 * (8 - len)),
            None => bytes
                .iter()
                .rev()
                .fold(0, |word, &b| (word << 8) | u64::from(b)),
        }
    }

    /// Each byte of `word` that equals `byte` has its high bit clear, whatever the bytes.
    fn differs(word: u64, byte: u8) -> u64 {
        let diff = word ^ (Self::ONES * u64::from(byte));
        // A byte is zero exactly when neither its high bit nor the carry out of adding 0x7f
        // to its low seven bits is set; that sum never carries into the next byte.
        ((diff & !Self::HIGH) + Self::ONES * 0x7f) | diff
    }
}

/// The position of the last `.` in `bytes`, read eight bytes at a time from the end: the suffix
/// walk looks for one per label, and a byte loop cost seven instructions a byte.
/// `memchr::memrchr` was measured in its place: its dispatch and short-input path cost 40 more
/// instructions a label on host names this short.
pub(crate) fn last_dot(bytes: &[u8]) -> Option<usize> {
    let mut end = bytes.len();
    while let Some(chunk) = bytes[..end].last_chunk::<8>() {
        // Big-endian, so the last byte is the lowest and the last dot the lowest bit set.
        let dots = !ByteShape::differs(u64::from_be_bytes(*chunk), b'.') & ByteShape::HIGH;
        if dots != 0 {
            return Some(end - 1 - dots.trailing_zeros() as usize / 8);
        }
        end -= 8;
    }
    bytes[..end].iter().rposition(|&b| b == b'.')
}

impl Lanes {
    /// Fold in one word. Wrapping adds: on ASCII bytes nothing carries from one byte into the
    /// next; on other bytes the result is discarded.
    fn add(&mut self, word: u64) {
        const ONES: u64 = ByteShape::ONES;
        self.any |= word;
        // For bytes below 0x80, adding (0x80 - c) sets a byte's high bit exactly when the
        // byte is at least c.
        let at_least_colon = word.wrapping_add(ONES * (0x80 - u64::from(b':')));
        let past_z = word.wrapping_add(ONES * (0x80 - u64::from(b'Z') - 1));
        self.rare |= at_least_colon & !past_z;
        self.dots += (!ByteShape::differs(word, b'.') & ByteShape::HIGH) >> 7;
    }

    /// The shape of `bytes`, the bytes folded in.
    fn shape(&self, bytes: &[u8]) -> ByteShape {
        let high = ByteShape::HIGH;
        let rare = self.rare & high != 0;
        ByteShape {
            ascii: self.any & high == 0,
            upper: rare && bytes.iter().any(u8::is_ascii_uppercase),
            colon: rare && bytes.contains(&b':'),
            // The multiply sums the eight per-byte counts into the top byte. `count_ones`
            // compiles to a software population count on the baseline x86-64 target.
            dots: (self.dots.wrapping_mul(ByteShape::ONES) >> 56) as usize,
        }
    }
}

fn to_punycode(host: &str) -> Result<CanonicalHost<'static>, HostError> {
    let converted = idna::domain_to_ascii(host).map_err(|_| HostError::Invalid(host.to_owned()))?;
    if converted.len() > MAX_HOST_LEN {
        return Err(HostError::TooLong);
    }
    let labels = converted.bytes().filter(|&b| b == b'.').count() + 1;
    // IDNA maps full-width digits to ASCII ones, so a converted name can be an address.
    let maybe_ip = converted.starts_with(|c: char| c.is_ascii_digit());
    Ok(CanonicalHost {
        text: Cow::Owned(converted),
        labels,
        maybe_ip,
    })
}

/// The canonical form of a host: lower case, no trailing dot, IDN as punycode.
///
/// ```
/// use af_policy::egress::normalize_host;
/// assert_eq!(normalize_host("API.Example.COM.").unwrap(), "api.example.com");
/// assert_eq!(normalize_host("bücher.example").unwrap(), "xn--bcher-kva.example");
/// ```
pub fn normalize_host(host: &str) -> Result<Cow<'_, str>, HostError> {
    let trimmed = host.strip_suffix('.').unwrap_or(host);
    let mut buf = None;
    Ok(match canonicalize(host, &mut buf)?.text {
        Cow::Borrowed(text) if text == trimmed => Cow::Borrowed(trimmed),
        text => Cow::Owned(text.into_owned()),
    })
}

/// The address a host names when it is an IP literal (`203.0.113.7`, `::1` or `[::1]`), in
/// canonical form: an IPv4-mapped IPv6 literal is the IPv4 address it maps, so a rule for
/// `203.0.113.7` also decides `[::ffff:203.0.113.7]`, which is where it would be dialled.
pub(crate) fn ip_literal(host: &str) -> Option<IpAddr> {
    let inner = host
        .strip_prefix('[')
        .and_then(|h| h.strip_suffix(']'))
        .unwrap_or(host);
    inner.parse::<IpAddr>().ok().map(|ip| ip.to_canonical())
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
    fn byte_shape_matches_a_byte_by_byte_reading() {
        for host in [
            "a",
            "api.example.com",
            "API.EXAMPLE.COM",
            "z.Z.a.A.@.[.`.{",
            "[2001:db8::1]",
            "a.b.c.d.e.f.g.h.i.j.k",
            "bücher.example",
            "exactly8",
            "sixteen.bytes.xx",
        ] {
            let bytes = host.as_bytes();
            let expected = ByteShape {
                ascii: host.is_ascii(),
                upper: host.is_ascii() && bytes.iter().any(u8::is_ascii_uppercase),
                colon: host.is_ascii() && host.contains(':'),
                dots: host.matches('.').count(),
            };
            let shape = ByteShape::of(bytes);
            if shape.ascii {
                assert_eq!(shape, expected, "{host}");
            } else {
                // The other fields mean nothing for a non-ASCII host; IDNA takes over.
                assert!(!expected.ascii, "{host}");
            }
        }
    }

    proptest::proptest! {
        #[test]
        fn byte_shape_agrees_with_the_obvious_reading(host in "[ -~]{0,80}") {
            let shape = ByteShape::of(host.as_bytes());
            proptest::prop_assert!(shape.ascii);
            proptest::prop_assert_eq!(shape.upper, host.bytes().any(|b| b.is_ascii_uppercase()));
            proptest::prop_assert_eq!(shape.colon, host.contains(':'));
            proptest::prop_assert_eq!(shape.dots, host.matches('.').count());
        }
    }

    proptest::proptest! {
        #[test]
        fn last_dot_agrees_with_rposition(host in "[a-z.\u{80}-\u{10ffff}]{0,40}") {
            let bytes = host.as_bytes();
            proptest::prop_assert_eq!(last_dot(bytes), bytes.iter().rposition(|&b| b == b'.'));
        }
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
