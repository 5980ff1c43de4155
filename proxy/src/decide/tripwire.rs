//! The live-credential tripwire: a request carrying a live-looking secret (`sk_live_…`,
//! `rk_live_…`, …) is refused on every path, whatever its mode, and the secret is never echoed:
//! not in the answer, not in the journal (the recorded path is redacted).
//!
//! The head (URL and headers, including a Basic credential's decoded user and password) is
//! checked for every request; the body is checked where the sidecar reads it anyway (mock,
//! capture, synth). A streamed body (allow, sandbox) is not buffered for this.
//!
//! Any credential a URL carries in a query parameter (`?key=`, `?access_token=`, live or not),
//! or in the path of a known provider's webhook URL ([`super::path_secrets`]), is kept out of
//! the journal and refusals too: [`redact_path`] replaces it.

use std::borrow::Cow;
use std::sync::LazyLock;

use aho_corasick::AhoCorasick;
use base64::Engine;
use http::HeaderMap;

use super::path_secrets;

/// Prefixes of live secrets, and how a refusal names them.
const LIVE_PREFIXES: [(&str, &str); 5] = [
    ("sk_live_", "a live Stripe secret key (sk_live_…)"),
    ("rk_live_", "a live Stripe restricted key (rk_live_…)"),
    ("rzp_live_", "a live Razorpay key (rzp_live_…)"),
    ("pdl_live_", "a live Paddle key (pdl_live_…)"),
    (
        "access_token$production$",
        "a Braintree production access token",
    ),
];

/// Characters after the prefix before a match counts as a secret (so prose that merely
/// mentions `sk_live_` is not refused).
const MIN_SECRET_TAIL: usize = 10;

/// What is put in place of a secret's tail in the journal.
const REDACTED: &str = "[redacted]";

static PREFIXES: LazyLock<AhoCorasick> = LazyLock::new(|| {
    AhoCorasick::new(LIVE_PREFIXES.iter().map(|(p, _)| p)).unwrap_or_else(|e| {
        // The patterns are constants; this cannot fail.
        unreachable!("tripwire patterns do not compile: {e}")
    })
});

/// A live-looking secret found in a request: what kind, and where (never the value).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Hit {
    /// What was found, e.g. "a live Stripe secret key (sk_live_…)".
    pub what: &'static str,
    /// Where: "the URL", "the Authorization header", "the body".
    pub place: String,
}

impl Hit {
    /// One sentence for the refusal.
    pub(crate) fn statement(&self) -> String {
        format!(
            "The request carried {} in {}, so it was refused and the value was not recorded",
            self.what, self.place
        )
    }
}

/// The first live secret in `bytes`: its kind and where its tail ends.
fn find(bytes: &[u8]) -> Option<(usize, usize, &'static str)> {
    PREFIXES.find_iter(bytes).find_map(|m| {
        let tail = bytes[m.end()..]
            .iter()
            .take_while(|b| b.is_ascii_alphanumeric() || **b == b'_' || **b == b'-')
            .count();
        (tail >= MIN_SECRET_TAIL).then(|| {
            (
                m.start(),
                m.end() + tail,
                LIVE_PREFIXES[m.pattern().as_usize()].1,
            )
        })
    })
}

/// Check a request head: the path and query, every header value, and the decoded user and
/// password of a Basic credential.
pub(crate) fn scan_head(path: &str, headers: &HeaderMap) -> Option<Hit> {
    if let Some((_, _, what)) = find(path.as_bytes()) {
        return Some(Hit {
            what,
            place: "the URL".into(),
        });
    }
    for (name, value) in headers {
        let found = find(value.as_bytes()).map(|(_, _, what)| what).or_else(|| {
            let basic = value.to_str().ok()?.strip_prefix("Basic ")?;
            let decoded = base64::engine::general_purpose::STANDARD
                .decode(basic.trim())
                .ok()?;
            find(&decoded).map(|(_, _, what)| what)
        });
        if let Some(what) = found {
            return Some(Hit {
                what,
                place: format!("the {name} header"),
            });
        }
    }
    None
}

/// Check a buffered body.
pub(crate) fn scan_body(body: &[u8]) -> Option<Hit> {
    find(body).map(|(_, _, what)| Hit {
        what,
        place: "the body".into(),
    })
}

/// The path with every live secret's tail replaced, for the journal.
pub(crate) fn redact(path: &str) -> Cow<'_, str> {
    let Some(first) = find(path.as_bytes()) else {
        return Cow::Borrowed(path);
    };
    let mut out = String::with_capacity(path.len());
    let mut rest = path;
    let mut next = Some(first);
    while let Some((start, end, _)) = next {
        let prefix_end = start
            + LIVE_PREFIXES
                .iter()
                .map(|(p, _)| p)
                .find(|p| rest[start..].starts_with(**p))
                .map_or(0, |p| p.len());
        out.push_str(&rest[..prefix_end]);
        out.push_str(REDACTED);
        rest = &rest[end..];
        next = find(rest.as_bytes());
    }
    out.push_str(rest);
    Cow::Owned(out)
}

/// Query parameters that carry API credentials or stand for one (Google's `key`, OAuth's
/// `access_token`, AWS pre-signed URLs, Azure SAS `sig`, ...); compared without regard to case,
/// after percent-decoding the name (a server decodes `ke%79` to `key`).
const CREDENTIAL_PARAMETERS: [&str; 17] = [
    "key",
    "api_key",
    "apikey",
    "api-key",
    "access_token",
    "auth_token",
    "token",
    "refresh_token",
    "id_token",
    "client_secret",
    "secret",
    "password",
    "sig",
    "signature",
    "x-amz-signature",
    "x-amz-security-token",
    "x-amz-credential",
];

/// Whether a query's `name=value` pair (or bare `name`) carries a credential.
pub(crate) fn is_credential_parameter(pair: &str) -> bool {
    let raw = pair.split_once('=').map_or(pair, |(name, _)| name);
    let name = percent_encoding::percent_decode_str(raw).decode_utf8_lossy();
    CREDENTIAL_PARAMETERS
        .iter()
        .any(|c| c.eq_ignore_ascii_case(&name))
}

/// The pairs of `query` that carry no credential, as sent and in order (empty pairs skipped).
pub(crate) fn non_credential_pairs(query: &str) -> impl Iterator<Item = &str> {
    query
        .split('&')
        .filter(|pair| !pair.is_empty() && !is_credential_parameter(pair))
}

/// A request path (with query) for `host` as records and refusals show it: the segments of a
/// known provider's webhook URL that carry its secret ([`path_secrets`]), [`redact`], and the
/// value of every credential query parameter replaced. The one place a URL is redacted.
pub(crate) fn redact_path<'a>(host: &str, path: &'a str) -> Cow<'a, str> {
    let live = match path_secrets::redact(host, path) {
        Cow::Borrowed(path) => redact(path),
        Cow::Owned(hooked) => Cow::Owned(redact(&hooked).into_owned()),
    };
    let Some((head, query)) = live.split_once('?') else {
        return live;
    };
    let carries = |pair: &&str| is_credential_parameter(pair) && !pair.ends_with('=');
    if !query.split('&').any(|pair| carries(&pair)) {
        return live;
    }
    let pairs: Vec<Cow<'_, str>> = query
        .split('&')
        .map(|pair| match pair.split_once('=') {
            Some((name, _)) if carries(&pair) => Cow::Owned(format!("{name}={REDACTED}")),
            _ => Cow::Borrowed(pair),
        })
        .collect();
    Cow::Owned(format!("{head}?{}", pairs.join("&")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::HeaderValue;

    const KEY: &str = "sk_live_51HxYzAbCdEfGhIjKlMn";

    #[test]
    fn a_live_key_is_found_in_the_url_headers_basic_auth_and_body() {
        let hit = scan_head(&format!("/v1/charges?key={KEY}"), &HeaderMap::new());
        assert_eq!(hit.map(|h| h.place), Some("the URL".to_owned()));

        let mut headers = HeaderMap::new();
        headers.insert(
            "authorization",
            HeaderValue::from_str(&format!("Bearer {KEY}")).expect("header"),
        );
        let hit = scan_head("/v1/charges", &headers).expect("found");
        assert_eq!(hit.place, "the authorization header");
        assert!(hit.what.contains("Stripe secret key"));
        assert!(!hit.statement().contains(KEY));

        let mut headers = HeaderMap::new();
        let basic = base64::engine::general_purpose::STANDARD.encode(format!("{KEY}:"));
        headers.insert(
            "authorization",
            HeaderValue::from_str(&format!("Basic {basic}")).expect("header"),
        );
        assert!(scan_head("/", &headers).is_some());

        let body = format!("{{\"api_key\":\"rk_live_{}\"}}", "a".repeat(24));
        assert!(scan_body(body.as_bytes()).is_some_and(|h| h.what.contains("restricted")));
    }

    #[test]
    fn credential_parameters_are_redacted_from_paths_and_the_rest_is_kept() {
        assert_eq!(
            redact_path(
                "api.example.test",
                "/geo?address=a%20b&KEY=AIzaOwnKey&x=1&access_token=t&token="
            ),
            "/geo?address=a%20b&KEY=[redacted]&x=1&access_token=[redacted]&token="
        );
        assert_eq!(
            redact_path("api.example.test", &format!("/v1?monkey=1&q={KEY}")),
            "/v1?monkey=1&q=sk_live_[redacted]"
        );
        assert_eq!(
            redact_path(
                "api.example.test",
                "/o?ke%79=own&api%5Fkey=own&X-Amz-Signature=abc&sig=s"
            ),
            "/o?ke%79=[redacted]&api%5Fkey=[redacted]&X-Amz-Signature=[redacted]&sig=[redacted]"
        );
        assert!(matches!(
            redact_path("api.example.test", "/v1/x?keyword=k"),
            Cow::Borrowed(_)
        ));
        assert!(matches!(
            redact_path("api.example.test", "/v1/x"),
            Cow::Borrowed(_)
        ));
    }

    #[test]
    fn test_keys_and_mere_mentions_pass() {
        let mut headers = HeaderMap::new();
        headers.insert(
            "authorization",
            HeaderValue::from_static("Bearer sk_test_51HxYzAbCdEfGhIjKlMn"),
        );
        assert_eq!(scan_head("/docs/sk_live_?x=1", &headers), None);
        assert_eq!(scan_body(b"keys look like sk_live_ followed by text"), None);
    }

    #[test]
    fn redaction_removes_every_secret_tail_and_keeps_the_rest() {
        let path = format!("/a?k={KEY}&b=2&r=rk_live_{}", "Z".repeat(12));
        let redacted = redact(&path);
        assert_eq!(redacted, "/a?k=sk_live_[redacted]&b=2&r=rk_live_[redacted]");
        assert!(matches!(redact("/plain?x=1"), Cow::Borrowed(_)));
    }
}
