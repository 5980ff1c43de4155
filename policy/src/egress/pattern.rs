//! The parts of a rule that match a request: host pattern and port, path prefixes, methods.

use std::net::IpAddr;

use super::host::{MAX_HOST_LEN, canonicalize, ip_literal};

/// A parsed `host` field: the pattern and the port it is limited to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct HostPort {
    pub(crate) pattern: HostPattern,
    pub(crate) port: Option<u16>,
}

/// Which hosts a rule names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum HostPattern {
    /// `*`: every host, names and addresses alike.
    Any,
    /// One host name, canonical.
    Exact(Box<str>),
    /// One IP address; never a name that resolves to it.
    Ip(IpAddr),
    /// `*.example.com`: one or more labels in front of the suffix, never the suffix itself.
    Suffix(Box<str>),
    /// A pattern with a star in the middle (`api.*.example.com`): each star is exactly one label.
    /// A leading `*.` still stands for one or more labels.
    Labels {
        /// True when the pattern starts with `*.` (one or more labels).
        open_start: bool,
        /// The remaining labels; `None` is a star.
        labels: Box<[Option<Box<str>>]>,
    },
}

impl HostPattern {
    /// The labels written literally, which rank wildcards against each other.
    pub(crate) fn literal_labels(&self) -> u8 {
        let count = match self {
            HostPattern::Any => 0,
            HostPattern::Exact(h) | HostPattern::Suffix(h) => h.split('.').count(),
            HostPattern::Ip(_) => 4,
            HostPattern::Labels { labels, .. } => labels.iter().flatten().count(),
        };
        u8::try_from(count).unwrap_or(u8::MAX)
    }

    /// Whether `host` (canonical, not an IP literal) matches this pattern.
    pub(crate) fn matches_name(&self, host: &str) -> bool {
        match self {
            HostPattern::Any => true,
            HostPattern::Exact(h) => **h == *host,
            HostPattern::Ip(_) => false,
            HostPattern::Suffix(suffix) => is_proper_subdomain(host, suffix),
            HostPattern::Labels { open_start, labels } => matches_labels(host, *open_start, labels),
        }
    }

    /// Whether the IP literal `ip` matches this pattern.
    pub(crate) fn matches_ip(&self, ip: IpAddr) -> bool {
        match self {
            HostPattern::Any => true,
            HostPattern::Ip(own) => *own == ip,
            _ => false,
        }
    }
}

/// `host` ends in `.suffix` with at least one label in front.
pub(crate) fn is_proper_subdomain(host: &str, suffix: &str) -> bool {
    host.len() > suffix.len() + 1
        && host.ends_with(suffix)
        && host.as_bytes()[host.len() - suffix.len() - 1] == b'.'
}

fn matches_labels(host: &str, open_start: bool, labels: &[Option<Box<str>>]) -> bool {
    let mut host_labels = host.rsplit('.');
    for want in labels.iter().rev() {
        match (host_labels.next(), want) {
            (None, _) => return false,
            (Some(""), _) => return false,
            (Some(_), None) => {}
            (Some(got), Some(want)) if got == &**want => {}
            (Some(_), Some(_)) => return false,
        }
    }
    let rest = host_labels.next();
    if open_start {
        rest.is_some_and(|label| !label.is_empty())
    } else {
        rest.is_none()
    }
}

/// Parse a rule's `host` field.
pub(crate) fn parse_host_port(field: &str) -> Result<HostPort, String> {
    let field = field.trim();
    if field.is_empty() {
        return Err("the host is empty".into());
    }
    let (host, port) = split_port(field)?;
    if let Some(ip) = ip_literal(host) {
        return Ok(HostPort {
            pattern: HostPattern::Ip(ip),
            port,
        });
    }
    Ok(HostPort {
        pattern: parse_name_pattern(host)?,
        port,
    })
}

fn split_port(field: &str) -> Result<(&str, Option<u16>), String> {
    if let Some(rest) = field.strip_prefix('[') {
        let (inside, after) = rest
            .split_once(']')
            .ok_or_else(|| format!("{field:?} opens '[' without closing it"))?;
        return match after {
            "" => Ok((inside, None)),
            _ => match after.strip_prefix(':') {
                Some(port) => Ok((inside, Some(parse_port(port)?))),
                None => Err(format!("{field:?} has text after ']' that is not a port")),
            },
        };
    }
    if field.matches(':').count() > 1 {
        // A bare IPv6 literal: no port can be attached without brackets.
        return Ok((field, None));
    }
    match field.split_once(':') {
        Some((host, port)) => Ok((host, Some(parse_port(port)?))),
        None => Ok((field, None)),
    }
}

fn parse_port(port: &str) -> Result<u16, String> {
    match port.parse::<u16>() {
        Ok(0) | Err(_) => Err(format!("{port:?} is not a port between 1 and 65535")),
        Ok(port) => Ok(port),
    }
}

fn parse_name_pattern(host: &str) -> Result<HostPattern, String> {
    if host == "*" {
        return Ok(HostPattern::Any);
    }
    let (open_start, rest) = match host.strip_prefix("*.") {
        Some(rest) => (true, rest),
        None => (false, host),
    };
    let mut buf = None;
    let rest = canonicalize(rest, &mut buf)
        .map_err(|e| format!("{host:?}: {e}"))?
        .text
        .into_owned();
    if rest.len() > MAX_HOST_LEN {
        return Err(format!("{host:?} is longer than {MAX_HOST_LEN} characters"));
    }
    let mut labels = Vec::new();
    for label in rest.split('.') {
        labels.push(parse_label(host, label)?);
    }
    let has_inner_star = labels.iter().any(Option::is_none);
    if has_inner_star && labels.last().is_some_and(Option::is_none) {
        return Err(format!(
            "{host:?} ends in a star; a star may stand for a leading or a middle label only"
        ));
    }
    Ok(match (open_start, has_inner_star) {
        (false, false) => HostPattern::Exact(rest.into()),
        (true, false) => HostPattern::Suffix(rest.into()),
        (open_start, true) => HostPattern::Labels {
            open_start,
            labels: labels.into_iter().map(|l| l.map(Into::into)).collect(),
        },
    })
}

fn parse_label<'a>(host: &str, label: &'a str) -> Result<Option<&'a str>, String> {
    if label == "*" {
        return Ok(None);
    }
    if label.is_empty() {
        return Err(format!("{host:?} has an empty label"));
    }
    if label.len() > 63 {
        return Err(format!("{host:?} has a label longer than 63 characters"));
    }
    if label.contains('*') {
        return Err(format!(
            "{host:?}: a star must stand for a whole label, as in *.example.com"
        ));
    }
    let valid = label
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
    if !valid || label.starts_with('-') || label.ends_with('-') {
        return Err(format!(
            "{host:?}: {label:?} is not a valid label (letters, digits, hyphens)"
        ));
    }
    Ok(Some(label))
}

/// Parse a `paths` entry: it must be absolute.
pub(crate) fn parse_path(path: &str) -> Result<Box<str>, String> {
    if !path.starts_with('/') {
        return Err(format!("the path {path:?} must start with '/'"));
    }
    if path.contains(['?', '#']) {
        return Err(format!(
            "the path {path:?} holds a query or fragment; paths match the path only"
        ));
    }
    if !is_canonical_path(path) {
        return Err(format!(
            "the path {path:?} has '.', '..', '//' segments or percent-encoded characters that are \
             not needed"
        ));
    }
    Ok(path.into())
}

/// Parse a `methods` entry: an HTTP token, compared upper case.
pub(crate) fn parse_method(method: &str) -> Result<Box<str>, String> {
    let valid = !method.is_empty()
        && method
            .bytes()
            .all(|b| b.is_ascii_alphabetic() || b == b'-' || b == b'_');
    if !valid {
        return Err(format!("{method:?} is not an HTTP method"));
    }
    Ok(method.to_ascii_uppercase().into())
}

/// `path` (a request target, possibly with a query) falls under `prefix` on a segment boundary.
pub(crate) fn path_has_prefix(path: &str, prefix: &str) -> bool {
    let Some(rest) = path.strip_prefix(prefix) else {
        return false;
    };
    prefix.ends_with('/') || matches!(rest.as_bytes().first(), None | Some(b'/' | b'?' | b'#'))
}

/// The path part of a request target: everything before `?` or `#`.
pub(crate) fn path_only(path: &str) -> &str {
    match path.bytes().position(|b| b == b'?' || b == b'#') {
        Some(end) => &path[..end],
        None => path,
    }
}

/// Whether a path can be compared as written: no dot segments, no empty segments, no `;`
/// (path parameters, which Tomcat and Spring strip) or `\` (a separator to IIS), and no
/// percent-encoding of a character that needs none or of those two. A server may read a
/// non-canonical path as another path than the one a prefix rule saw, so such a path never
/// matches by prefix.
pub(crate) fn is_canonical_path(path: &str) -> bool {
    let bytes = path.as_bytes();
    for (i, b) in bytes.iter().enumerate() {
        match *b {
            b';' | b'\\' => return false,
            b'%' => {
                let decoded = bytes
                    .get(i + 1..i + 3)
                    .and_then(|hex| std::str::from_utf8(hex).ok())
                    .and_then(|hex| u8::from_str_radix(hex, 16).ok());
                match decoded {
                    Some(c) if c.is_ascii_alphanumeric() || b"-._~/;\\".contains(&c) => {
                        return false;
                    }
                    Some(_) => {}
                    None => return false,
                }
            }
            _ => {}
        }
    }
    path.split('/')
        .skip(1)
        .enumerate()
        .all(|(i, segment)| match segment {
            "." | ".." => false,
            // An empty segment is only allowed as the trailing slash.
            "" => i + 2 == path.split('/').count(),
            _ => true,
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pattern(host: &str) -> HostPattern {
        parse_host_port(host).unwrap().pattern
    }

    #[test]
    fn suffix_pattern_needs_a_label_in_front() {
        let p = pattern("*.example.com");
        assert!(p.matches_name("a.example.com"));
        assert!(p.matches_name("a.b.example.com"));
        assert!(!p.matches_name("example.com"));
        assert!(!p.matches_name("notexample.com"));
        assert!(!p.matches_name(".example.com"));
    }

    #[test]
    fn middle_star_is_exactly_one_label() {
        let p = pattern("api.*.example.com");
        assert!(p.matches_name("api.eu.example.com"));
        assert!(!p.matches_name("api.example.com"));
        assert!(!p.matches_name("api.a.b.example.com"));
        assert!(!p.matches_name("x.api.eu.example.com"));
    }

    #[test]
    fn leading_and_middle_star_combine() {
        let p = pattern("*.s3.*.amazonaws.com");
        assert!(p.matches_name("bucket.s3.eu-west-1.amazonaws.com"));
        assert!(p.matches_name("a.b.s3.eu-west-1.amazonaws.com"));
        assert!(!p.matches_name("s3.eu-west-1.amazonaws.com"));
    }

    #[test]
    fn ports_and_ipv6_literals_parse() {
        assert_eq!(
            parse_host_port("example.com:8443").unwrap().port,
            Some(8443)
        );
        assert_eq!(
            parse_host_port("[2001:db8::1]:443").unwrap(),
            HostPort {
                pattern: HostPattern::Ip("2001:db8::1".parse().unwrap()),
                port: Some(443)
            }
        );
        assert_eq!(
            parse_host_port("2001:db8::1").unwrap().pattern,
            HostPattern::Ip("2001:db8::1".parse().unwrap())
        );
    }

    #[test]
    fn malformed_patterns_are_refused() {
        for bad in [
            "",
            "exa*mple.com",
            "example.*",
            "a..b",
            "example.com:0",
            "example.com:http",
            "-bad.com",
            "[::1",
        ] {
            assert!(parse_host_port(bad).is_err(), "{bad:?} should be refused");
        }
    }

    #[test]
    fn path_prefixes_stop_at_segment_boundaries() {
        assert!(path_has_prefix("/admin", "/admin"));
        assert!(path_has_prefix("/admin/users", "/admin"));
        assert!(!path_has_prefix("/administrator", "/admin"));
        assert!(path_has_prefix("/v1/x", "/v1/"));
        assert!(path_has_prefix("/anything", "/"));
        assert!(path_has_prefix("/admin?x=1", "/admin"));
        assert!(!path_has_prefix("/admin-x?y", "/admin"));
        assert!(!path_has_prefix("/v1?/admin", "/admin"));
    }

    #[test]
    fn non_canonical_paths_are_recognised() {
        for path in [
            "/a/../admin",
            "/./admin",
            "//admin",
            "/%61dmin",
            "/a%2fb",
            "/%zz",
            "/public/..;/admin",
            "/admin;x",
            "/x/..\\admin",
            "/a%3bb",
            "/a%5cb",
        ] {
            assert!(!is_canonical_path(path), "{path}");
        }
        for path in ["/", "/admin/", "/a%20b", "/v1/users"] {
            assert!(is_canonical_path(path), "{path}");
        }
    }
}
