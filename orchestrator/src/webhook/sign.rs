//! Each provider's signature scheme, as its own libraries verify it:
//!
//! - Stripe: `Stripe-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256(secret, "<t>.<body>")>`,
//!   keyed with the whole `whsec_…` string.
//! - GitHub: `X-Hub-Signature-256: sha256=<hex HMAC-SHA256(secret, body)>`.
//! - Svix: `svix-signature: v1,<base64 HMAC-SHA256(base64-decoded secret after "whsec_",
//!   "<svix-id>.<svix-timestamp>.<body>")>`.

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use hmac::{Hmac, Mac};
use sha2::Sha256;

use super::{Ids, Provider, WebhookError};
use crate::secret::hex;

/// HMAC-SHA256 of the concatenated `parts` under `key`.
pub fn hmac_sha256(key: &[u8], parts: &[&[u8]]) -> [u8; 32] {
    let Ok(mut mac) = <Hmac<Sha256> as Mac>::new_from_slice(key) else {
        unreachable!("HMAC accepts keys of any length");
    };
    for part in parts {
        mac.update(part);
    }
    mac.finalize().into_bytes().into()
}

/// The `Stripe-Signature` header value.
pub fn stripe(secret: &str, timestamp: u64, body: &str) -> String {
    let t = timestamp.to_string();
    let mac = hmac_sha256(secret.as_bytes(), &[t.as_bytes(), b".", body.as_bytes()]);
    format!("t={t},v1={}", hex(&mac))
}

/// The `X-Hub-Signature-256` header value.
pub fn github(secret: &str, body: &str) -> String {
    format!(
        "sha256={}",
        hex(&hmac_sha256(secret.as_bytes(), &[body.as_bytes()]))
    )
}

/// The `svix-signature` header value; the secret must be `whsec_` and base64.
pub fn svix(secret: &str, id: &str, timestamp: u64, body: &str) -> Result<String, WebhookError> {
    let key = STANDARD
        .decode(secret.trim_start_matches("whsec_"))
        .map_err(|e| {
            WebhookError::target(
                format!("the Svix secret is not base64: {e}"),
                "Pass the whsec_ secret the service verifies with, as `af up` gave it.",
            )
        })?;
    let t = timestamp.to_string();
    let mac = hmac_sha256(
        &key,
        &[id.as_bytes(), b".", t.as_bytes(), b".", body.as_bytes()],
    );
    Ok(format!("v1,{}", STANDARD.encode(mac)))
}

/// Every header the provider sends with `body` for `event`, signed with `secret` at
/// `timestamp` (unix seconds).
pub fn headers(
    provider: Provider,
    event: &str,
    secret: &str,
    timestamp: u64,
    body: &str,
    ids: &Ids,
) -> Result<Vec<(String, String)>, WebhookError> {
    let mut headers = vec![("content-type".to_owned(), "application/json".to_owned())];
    let mut add = |k: &str, v: String| headers.push((k.to_owned(), v));
    match provider {
        Provider::Stripe => {
            add(
                "user-agent",
                "Stripe/1.0 (+https://stripe.com/docs/webhooks)".to_owned(),
            );
            add("stripe-signature", stripe(secret, timestamp, body));
        }
        Provider::Github => {
            add("user-agent", "GitHub-Hookshot/af".to_owned());
            add(
                "x-github-event",
                super::payload::github_event_name(event).to_owned(),
            );
            add("x-github-delivery", ids.uuid("delivery"));
            add("x-github-hook-id", "1".to_owned());
            add("x-hub-signature-256", github(secret, body));
        }
        Provider::Svix => {
            let id = ids.id("msg");
            add("svix-signature", svix(secret, &id, timestamp, body)?);
            add("svix-id", id);
            add("svix-timestamp", timestamp.to_string());
        }
    }
    Ok(headers)
}

#[cfg(test)]
mod tests {
    use super::*;

    // Vectors computed independently of the code above, with Python's hmac module, as the
    // providers' own libraries compute them:
    //   hmac.new(key, msg, hashlib.sha256).hexdigest() / base64.b64encode(...digest()).

    #[test]
    fn stripe_signs_timestamp_dot_body_with_the_whole_secret() {
        let got = stripe("whsec_test_secret", 1_700_000_000, r#"{"id":"evt_1"}"#);
        assert_eq!(
            got,
            "t=1700000000,v1=248a374f50f943a28b0f6ab50faf9a7e7e29b710fa26df9fb1618b9bf8ea9c9a"
        );
    }

    #[test]
    fn github_signs_the_body() {
        let got = github("It's a Secret to Everybody", "Hello, World!");
        // GitHub's own documented example.
        assert_eq!(
            got,
            "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17"
        );
    }

    #[test]
    fn svix_signs_id_timestamp_body_with_the_decoded_secret() {
        // Svix's own documented example.
        let got = svix(
            "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
            "msg_p5jXN8AQM9LWM0D4loKWxJek",
            1614265330,
            r#"{"test": 2432232314}"#,
        )
        .expect("sign");
        assert_eq!(got, "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=");
    }

    #[test]
    fn each_provider_gets_its_headers() {
        let ids = Ids::from_nonce([7; 16]);
        let names = |p, event| -> Vec<String> {
            headers(
                p,
                event,
                "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
                1,
                "{}",
                &ids,
            )
            .expect("headers")
            .into_iter()
            .map(|(k, _)| k)
            .collect()
        };
        assert!(names(Provider::Stripe, "invoice.paid").contains(&"stripe-signature".to_owned()));
        let gh = headers(Provider::Github, "pull_request.closed", "s", 1, "{}", &ids).expect("gh");
        let get = |k: &str| gh.iter().find(|(n, _)| n == k).map(|(_, v)| v.as_str());
        assert_eq!(get("x-github-event"), Some("pull_request"));
        assert_eq!(get("x-hub-signature-256"), Some(github("s", "{}").as_str()));
        let delivery = get("x-github-delivery").expect("delivery id");
        assert_eq!(delivery.len(), 36);
        assert_eq!(
            delivery.as_bytes()[14],
            b'4',
            "a version 4 UUID: {delivery}"
        );
        let svix_names = names(Provider::Svix, "user.created");
        for h in [
            "svix-id",
            "svix-timestamp",
            "svix-signature",
            "content-type",
        ] {
            assert!(svix_names.contains(&h.to_owned()), "{h}: {svix_names:?}");
        }
    }
}
