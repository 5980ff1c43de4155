//! The environment's webhook secrets: one per provider, derived (HMAC-SHA256) from a secret
//! that lives only in the sidecar's configuration (the admin token), so `af up` and
//! `af webhook trigger` compute the same ones and nothing new is stored anywhere.

use std::fmt;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;

use super::Provider;
use super::sign::hmac_sha256;
use crate::plan::short_digest;
use crate::secret::hex;

/// One secret per provider, in the form that provider's libraries expect.
#[derive(Clone, PartialEq, Eq)]
pub struct WebhookSecrets {
    stripe: String,
    github: String,
    svix: String,
}

impl fmt::Debug for WebhookSecrets {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("WebhookSecrets(..)")
    }
}

impl WebhookSecrets {
    /// The secrets derived from `env_secret`: Stripe `whsec_<64 hex>`, GitHub `<64 hex>`, Svix
    /// `whsec_<base64 of 24 bytes>`.
    pub fn derive(env_secret: &str) -> WebhookSecrets {
        let raw = |p: Provider| {
            hmac_sha256(
                env_secret.as_bytes(),
                &[b"af webhook secret\0", p.name().as_bytes()],
            )
        };
        WebhookSecrets {
            stripe: format!("whsec_{}", hex(&raw(Provider::Stripe))),
            github: hex(&raw(Provider::Github)),
            svix: format!("whsec_{}", STANDARD.encode(&raw(Provider::Svix)[..24])),
        }
    }

    /// The secret of `provider`, exactly as its variable holds it.
    pub fn get(&self, provider: Provider) -> &str {
        match provider {
            Provider::Stripe => &self.stripe,
            Provider::Github => &self.github,
            Provider::Svix => &self.svix,
        }
    }

    /// Each service's variables: `STRIPE_WEBHOOK_SECRET=…` and `AF_WEBHOOK_SECRET_STRIPE=…`
    /// for every provider.
    pub fn variables(&self) -> Vec<String> {
        Provider::ALL
            .into_iter()
            .flat_map(|p| {
                let upper = p.name().to_ascii_uppercase();
                let secret = self.get(p);
                [
                    format!("{upper}_WEBHOOK_SECRET={secret}"),
                    format!("AF_WEBHOOK_SECRET_{upper}={secret}"),
                ]
            })
            .collect()
    }

    /// A digest of the secrets: a service made with other secrets is replaced.
    pub fn digest(&self) -> String {
        short_digest(self.variables().join("\n").as_bytes())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TOKEN: &str = "0123456789abcdef0123456789abcdef";

    #[test]
    fn secrets_have_each_providers_form_and_are_stable_for_one_environment() {
        let s = WebhookSecrets::derive(TOKEN);
        assert_eq!(s, WebhookSecrets::derive(TOKEN));
        let stripe = s.get(Provider::Stripe);
        assert!(
            stripe.starts_with("whsec_") && stripe.len() == 6 + 64,
            "{stripe}"
        );
        let github = s.get(Provider::Github);
        assert!(github.len() == 64 && github.bytes().all(|b| b.is_ascii_hexdigit()));
        let svix = s.get(Provider::Svix);
        let key = STANDARD
            .decode(svix.trim_start_matches("whsec_"))
            .expect("base64");
        assert_eq!(key.len(), 24);
        let other = WebhookSecrets::derive("another-environment-token");
        for p in Provider::ALL {
            assert_ne!(s.get(p), other.get(p), "{p}");
        }
        assert_ne!(s.digest(), other.digest());
        assert_ne!(
            stripe.trim_start_matches("whsec_"),
            github,
            "providers differ"
        );
    }

    #[test]
    fn every_provider_has_both_variable_forms() {
        let s = WebhookSecrets::derive(TOKEN);
        let vars = s.variables();
        for p in Provider::ALL {
            let upper = p.name().to_ascii_uppercase();
            assert!(vars.contains(&format!("{upper}_WEBHOOK_SECRET={}", s.get(p))));
            assert!(vars.contains(&format!("AF_WEBHOOK_SECRET_{upper}={}", s.get(p))));
        }
        assert_eq!(vars.len(), 6);
        assert!(!format!("{s:?}").contains(s.get(Provider::Github)));
    }
}
