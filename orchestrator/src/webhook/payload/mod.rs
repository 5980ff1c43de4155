//! The body each provider sends for an event, with made-up but well-formed data a handler can
//! act on; `--set` (see [`super::set`]) changes any field of it.

pub mod github;
pub mod stripe;
pub mod svix;

use serde_json::Value;
use sha2::{Digest, Sha256};

use super::{Provider, WebhookError};
use crate::secret::{hex, random};

pub use github::event_name as github_event_name;

/// The ids of one trigger (event, objects, delivery), all derived from one random nonce: unique
/// per trigger, consistent within it (the customer an invoice names is the customer), fixed
/// in tests.
#[derive(Debug, Clone)]
pub struct Ids {
    nonce: [u8; 16],
}

impl Ids {
    /// Ids from a fresh nonce.
    pub fn random() -> Result<Ids, WebhookError> {
        Ok(Ids::from_nonce(random::<16>()?))
    }

    /// Ids from a given nonce (tests).
    pub fn from_nonce(nonce: [u8; 16]) -> Ids {
        Ids { nonce }
    }

    fn digest(&self, role: &str) -> [u8; 32] {
        Sha256::new()
            .chain_update(self.nonce)
            .chain_update(role.as_bytes())
            .finalize()
            .into()
    }

    /// `<prefix>_<24 hex digits>`, the same for the same prefix within one trigger.
    pub fn id(&self, prefix: &str) -> String {
        format!("{prefix}_{}", &hex(&self.digest(prefix))[..24])
    }

    /// 40 hex digits (a git object id) for `role`.
    pub fn sha(&self, role: &str) -> String {
        hex(&self.digest(role))[..40].to_owned()
    }

    /// A version 4 UUID for `role`.
    pub fn uuid(&self, role: &str) -> String {
        let mut b = self.digest(role);
        b[6] = (b[6] & 0x0f) | 0x40;
        b[8] = (b[8] & 0x3f) | 0x80;
        let h = hex(&b[..16]);
        format!(
            "{}-{}-{}-{}-{}",
            &h[..8],
            &h[8..12],
            &h[12..16],
            &h[16..20],
            &h[20..32]
        )
    }
}

/// The body `provider` sends for `event`, created at `created` (unix seconds).
pub fn build(provider: Provider, event: &str, ids: &Ids, created: u64) -> Value {
    match provider {
        Provider::Stripe => stripe::event(event, ids, created),
        Provider::Github => github::event(event, ids, created),
        Provider::Svix => svix::event(event, ids),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_stable_per_nonce_and_role_and_differ_otherwise() {
        let a = Ids::from_nonce([1; 16]);
        let b = Ids::from_nonce([2; 16]);
        assert_eq!(a.id("cus"), a.id("cus"));
        assert_ne!(a.id("cus"), a.id("evt").replace("evt", "cus"));
        assert_ne!(a.id("cus"), b.id("cus"));
        assert!(a.id("evt").starts_with("evt_") && a.id("evt").len() == 28);
        assert_eq!(a.sha("after").len(), 40);
        let uuid = a.uuid("delivery");
        let parts: Vec<usize> = uuid.split('-').map(str::len).collect();
        assert_eq!(parts, [8, 4, 4, 4, 12], "{uuid}");
        assert!(
            matches!(uuid.as_bytes()[19], b'8' | b'9' | b'a' | b'b'),
            "{uuid}"
        );
    }
}
