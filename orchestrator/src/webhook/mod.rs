//! `af webhook trigger`: a provider's webhook, built and signed the way the provider does it,
//! with the environment's webhook secrets (which every service also gets), for the sidecar to
//! deliver to a service.
//!
//! Pure: the lifecycle command (`lifecycle::webhook`) finds the secrets and delivers.

pub mod payload;
pub mod secrets;
pub mod set;
pub mod sign;
pub mod target;

use std::fmt;
use std::str::FromStr;

use af_policy::error::{Report, codes};

pub use payload::Ids;
pub use secrets::WebhookSecrets;
pub use target::Target;

/// A webhook sender af can imitate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Provider {
    /// Stripe: `Stripe-Signature: t=…,v1=…`.
    Stripe,
    /// GitHub: `X-Hub-Signature-256: sha256=…`.
    Github,
    /// Svix (and the providers sending through it): `svix-signature: v1,…`.
    Svix,
}

impl Provider {
    /// Every provider, in the order help text lists them.
    pub const ALL: [Provider; 3] = [Provider::Stripe, Provider::Github, Provider::Svix];

    /// The name on the command line and in variable names (lower-case).
    pub fn name(self) -> &'static str {
        match self {
            Provider::Stripe => "stripe",
            Provider::Github => "github",
            Provider::Svix => "svix",
        }
    }

    /// The provider's domain: an egress rule for a host in it may name the webhook path.
    pub fn domain(self) -> &'static str {
        match self {
            Provider::Stripe => "stripe.com",
            Provider::Github => "github.com",
            Provider::Svix => "svix.com",
        }
    }
}

impl fmt::Display for Provider {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Provider {
    type Err = WebhookError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Provider::ALL
            .into_iter()
            .find(|p| p.name().eq_ignore_ascii_case(s))
            .ok_or_else(|| WebhookError::UnknownProvider(s.to_owned()))
    }
}

/// The exact body of a trigger: `provider`'s payload for `event`, created at `created` (unix
/// seconds), with every `path=value` of `sets` applied in order.
pub fn body(
    provider: Provider,
    event: &str,
    sets: &[String],
    ids: &Ids,
    created: u64,
) -> Result<String, WebhookError> {
    let mut payload = payload::build(provider, event, ids, created);
    for assignment in sets {
        set::apply(&mut payload, assignment)?;
    }
    Ok(payload.to_string())
}

/// Why a webhook could not be built or was not accepted.
#[derive(Debug, thiserror::Error)]
pub enum WebhookError {
    /// Not one of [`Provider::ALL`].
    #[error("af does not know the webhook provider {0:?}; it knows stripe, github and svix")]
    UnknownProvider(String),
    /// A `--set` that is not `a.b.c=value` or cannot be applied.
    #[error("--set {assignment}: {why}")]
    BadSet {
        /// The assignment as given.
        assignment: String,
        /// What is wrong with it.
        why: String,
    },
    /// The service to deliver to could not be chosen.
    #[error("{problem}")]
    Target {
        /// What is wrong, in one sentence.
        problem: String,
        /// The step that fixes it: a target problem is never about `--set`.
        next: &'static str,
    },
    /// The kernel's random source could not be read (event and delivery ids).
    #[error("random ids could not be made: {0}")]
    Random(#[from] std::io::Error),
    /// The service answered with a status other than 2xx.
    #[error("{target} answered {status}")]
    Rejected {
        /// `service:port/path`.
        target: String,
        /// The HTTP status.
        status: u16,
        /// The first lines of the answer's body.
        body: String,
    },
}

impl WebhookError {
    fn target(problem: String, next: &'static str) -> WebhookError {
        WebhookError::Target { problem, next }
    }

    /// The coded refusal (AF-RUN-051) the user reads.
    pub fn report(&self) -> Report {
        let report = Report::new(&codes::RUN_WEBHOOK, format!("{self}."));
        match self {
            WebhookError::UnknownProvider(_) => {
                report.with_next("Use stripe, github or svix: `af webhook trigger stripe payment_intent.succeeded`.")
            }
            WebhookError::BadSet { .. } => report.with_next(
                "Write --set path.to.field=value; numbers, true, false and null are JSON, anything else is a string.",
            ),
            WebhookError::Target { next, .. } => report.with_next(*next),
            WebhookError::Random(_) => report.with_next("Check that /dev/urandom is readable."),
            WebhookError::Rejected {
                target,
                status,
                body,
            } => Report::new(
                &codes::RUN_WEBHOOK,
                format!(
                    "{target} answered the webhook with {status}.{}",
                    indented(body)
                ),
            )
            .with_next(
                "Read the service's answer above and `af logs SERVICE`; check that it verifies with the secret in its environment.",
            ),
        }
    }
}

/// `body` as indented lines after a heading, or nothing when empty.
fn indented(body: &str) -> String {
    if body.trim().is_empty() {
        return String::new();
    }
    let mut out = String::from(" It said:");
    for line in body.lines() {
        out.push_str("\n    ");
        out.push_str(line);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn providers_parse_case_insensitively_and_others_are_refused() {
        assert_eq!("Stripe".parse::<Provider>().ok(), Some(Provider::Stripe));
        assert_eq!("github".parse::<Provider>().ok(), Some(Provider::Github));
        assert_eq!("svix".parse::<Provider>().ok(), Some(Provider::Svix));
        let err = "paypal".parse::<Provider>().expect_err("unknown");
        assert_eq!(err.report().code.code, "AF-RUN-051");
        assert!(err.to_string().contains("\"paypal\""), "{err}");
    }

    #[test]
    fn the_body_is_the_payload_with_every_set_applied_in_order() {
        let ids = Ids::from_nonce([1; 16]);
        let sets = [
            "data.object.amount=5000".to_owned(),
            "data.object.metadata.order=42".to_owned(),
            "data.object.amount=7000".to_owned(),
        ];
        let text =
            body(Provider::Stripe, "payment_intent.succeeded", &sets, &ids, 9).expect("body");
        let doc: serde_json::Value = serde_json::from_str(&text).expect("JSON");
        assert_eq!(doc["data"]["object"]["amount"], 7000);
        assert_eq!(doc["data"]["object"]["metadata"]["order"], 42);
        assert_eq!(doc["created"], 9);
        let bad = body(Provider::Github, "push", &["ref.x=1".to_owned()], &ids, 9);
        assert!(matches!(bad, Err(WebhookError::BadSet { .. })));
    }

    #[test]
    fn a_rejected_delivery_shows_the_answer() {
        let err = WebhookError::Rejected {
            target: "web:8080/webhooks/stripe".to_owned(),
            status: 400,
            body: "bad signature\nsee docs".to_owned(),
        };
        let report = err.report();
        assert_eq!(report.code.code, "AF-RUN-051");
        assert!(
            report.statement.contains("answered the webhook with 400")
                && report
                    .statement
                    .contains("\n    bad signature\n    see docs"),
            "{report}"
        );
    }
}
