//! Sandbox mode: the request is forwarded for real, with the provider's test credential put in
//! place of whatever the service sent, in the provider's own header convention. Without a
//! configured credential the request is refused: the service's own key is never forwarded,
//! neither in a credential header nor in a credential query parameter (`?key=`).

use base64::Engine;
use http::Uri;
use http::header::{AUTHORIZATION, HeaderMap, HeaderName, HeaderValue};
use http::uri::PathAndQuery;

use crate::decide::tripwire;

/// How a provider expects its credential.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Convention {
    /// `Authorization: Bearer <credential>` (Stripe, SendGrid, Resend, GitHub, OpenAI, most).
    Bearer,
    /// A provider header holding the credential alone (Postmark's server token).
    Header(&'static str),
    /// HTTP Basic: the credential is `user:password` (Twilio `AccountSid:AuthToken`), or a key
    /// that goes after a fixed user (Mailgun's `api:<key>`).
    Basic { user: Option<&'static str> },
}

/// The convention of the provider serving `host` (Bearer unless the provider is known to
/// differ).
pub(crate) fn convention(host: &str) -> Convention {
    let under = |domain: &str| host == domain || host.ends_with(&format!(".{domain}"));
    if under("postmarkapp.com") {
        Convention::Header("x-postmark-server-token")
    } else if under("twilio.com") {
        Convention::Basic { user: None }
    } else if under("mailgun.net") {
        Convention::Basic { user: Some("api") }
    } else {
        Convention::Bearer
    }
}

/// Why a credential could not be put in place.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub(crate) enum SwapError {
    /// A Basic provider's credential is not `user:password`.
    #[error(
        "the credential for {0} must be written as user:password (for Twilio, AccountSid:AuthToken)"
    )]
    NotUserPassword(String),
    /// The credential has characters a header cannot carry.
    #[error("the credential for {0} has characters an HTTP header cannot carry")]
    NotHeaderSafe(String),
}

/// Headers that carry API credentials in the conventions of common providers; every one the
/// service sent is removed before the test credential is put in place.
const CREDENTIAL_HEADERS: [&str; 8] = [
    "authorization",
    "x-api-key",
    "api-key",
    "x-auth-token",
    "x-goog-api-key",
    "x-postmark-server-token",
    "x-postmark-account-token",
    "x-twilio-signature",
];

/// Remove every credential the service sent and put `credential` in `host`'s convention.
pub(crate) fn swap(headers: &mut HeaderMap, host: &str, credential: &str) -> Result<(), SwapError> {
    let convention = convention(host);
    let (name, value) = match convention {
        Convention::Bearer => (AUTHORIZATION, format!("Bearer {credential}")),
        Convention::Header(name) => (HeaderName::from_static(name), credential.to_owned()),
        Convention::Basic { user } => {
            let pair = match user {
                Some(user) => format!("{user}:{credential}"),
                None if credential.contains(':') => credential.to_owned(),
                None => return Err(SwapError::NotUserPassword(host.to_owned())),
            };
            let encoded = base64::engine::general_purpose::STANDARD.encode(pair);
            (AUTHORIZATION, format!("Basic {encoded}"))
        }
    };
    let mut value =
        HeaderValue::from_str(&value).map_err(|_| SwapError::NotHeaderSafe(host.to_owned()))?;
    value.set_sensitive(true);
    for sent in CREDENTIAL_HEADERS {
        headers.remove(sent);
    }
    headers.insert(name, value);
    Ok(())
}

/// `uri` without the query parameters that carry credentials; every other parameter is kept
/// byte for byte, in order.
pub(crate) fn without_query_credentials(uri: &Uri) -> Uri {
    let Some(query) = uri.query() else {
        return uri.clone();
    };
    if !query.split('&').any(tripwire::is_credential_parameter) {
        return uri.clone();
    }
    let kept: Vec<&str> = tripwire::non_credential_pairs(query).collect();
    let path_and_query = if kept.is_empty() {
        uri.path().to_owned()
    } else {
        format!("{}?{}", uri.path(), kept.join("&"))
    };
    let mut parts = uri.clone().into_parts();
    // Built from a valid URI's own path and a subset of its query: always valid.
    parts.path_and_query = PathAndQuery::try_from(path_and_query).ok();
    Uri::from_parts(parts).unwrap_or_else(|_| uri.clone())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sent(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.append(*k, HeaderValue::from_static(v));
        }
        h
    }

    #[test]
    fn bearer_providers_get_only_the_test_key() {
        let mut h = sent(&[
            ("authorization", "Bearer sk_test_service_own"),
            ("accept", "*/*"),
        ]);
        swap(&mut h, "api.stripe.com", "sk_test_sandbox").expect("swapped");
        let all: Vec<_> = h.get_all(AUTHORIZATION).iter().collect();
        assert_eq!(all, ["Bearer sk_test_sandbox"]);
        assert!(
            h.get("x-api-key").is_none(),
            "no other credential is forwarded"
        );
        assert_eq!(
            h.get("accept").map(HeaderValue::as_bytes),
            Some(&b"*/*"[..])
        );
    }

    #[test]
    fn postmark_twilio_and_mailgun_use_their_own_conventions() {
        let mut h = sent(&[("x-postmark-server-token", "service-token")]);
        swap(&mut h, "api.postmarkapp.com", "POSTMARK_API_TEST").expect("swapped");
        assert_eq!(
            h.get("x-postmark-server-token").map(HeaderValue::as_bytes),
            Some(&b"POSTMARK_API_TEST"[..])
        );
        assert!(h.get(AUTHORIZATION).is_none());

        let mut h = sent(&[("authorization", "Basic c2VydmljZTpvd24=")]);
        swap(&mut h, "api.twilio.com", "ACtest:authtoken").expect("swapped");
        let expected = format!(
            "Basic {}",
            base64::engine::general_purpose::STANDARD.encode("ACtest:authtoken")
        );
        assert_eq!(
            h.get(AUTHORIZATION).map(HeaderValue::as_bytes),
            Some(expected.as_bytes())
        );
        assert_eq!(
            swap(&mut h, "api.twilio.com", "no-colon"),
            Err(SwapError::NotUserPassword("api.twilio.com".into()))
        );

        let mut h = HeaderMap::new();
        swap(&mut h, "api.eu.mailgun.net", "key-123").expect("swapped");
        let expected = format!(
            "Basic {}",
            base64::engine::general_purpose::STANDARD.encode("api:key-123")
        );
        assert_eq!(
            h.get(AUTHORIZATION).map(HeaderValue::as_bytes),
            Some(expected.as_bytes())
        );
    }

    #[test]
    fn credentials_in_the_query_are_dropped_and_the_rest_kept_as_sent() {
        let uri: Uri =
            "https://maps.googleapis.test/geo?address=a%20b&KEY=live-own&x=1&access_token=t"
                .parse()
                .expect("uri");
        assert_eq!(
            without_query_credentials(&uri).to_string(),
            "https://maps.googleapis.test/geo?address=a%20b&x=1"
        );
        let only: Uri = "/v1/things?key=own".parse().expect("uri");
        assert_eq!(without_query_credentials(&only).to_string(), "/v1/things");
        let clean: Uri = "/v1/things?keyword=kept&monkey=1".parse().expect("uri");
        assert_eq!(without_query_credentials(&clean), clean);
    }
}
