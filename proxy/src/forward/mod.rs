//! Forwarding an allowed request: pooled HTTP through the guard, or a byte tunnel.

pub mod connector;
pub mod http;
pub mod tunnel;

use ::http::StatusCode;
use af_policy::error::codes;

use crate::answer::Refusal;
use crate::guard::DialError;

/// How a failed dial is answered: a guard refusal is its own code (AF-NET-011), anything
/// else is an upstream failure (AF-NET-013).
pub enum DialOutcome {
    /// The guard refused every address: nothing was dialled.
    Refused(Refusal),
    /// Resolution or connection failed.
    Failed { reason: &'static str, error: String },
}

impl DialOutcome {
    /// Classify a dial error.
    pub fn from_error(e: &DialError) -> Self {
        match e {
            DialError::Refused { refusal, .. } => DialOutcome::Refused(Refusal::new(
                StatusCode::FORBIDDEN,
                &codes::NET_GUARD,
                format!("guard:{}", refusal.as_str()),
                format!("{e}."),
            )),
            DialError::Resolve { .. } => DialOutcome::Failed {
                reason: "resolve",
                error: e.to_string(),
            },
            DialError::Connect { .. } => DialOutcome::Failed {
                reason: "connect",
                error: e.to_string(),
            },
        }
    }
}

/// The answer for a failed upstream.
/// The catalogue allowed it, so the decision header says `allow`; the code says what failed.
pub fn upstream_refusal(reason: &str, error: &str) -> Refusal {
    Refusal {
        decision: "allow",
        ..Refusal::new(
            StatusCode::BAD_GATEWAY,
            &codes::NET_UPSTREAM,
            reason.to_owned(),
            format!("{error}."),
        )
    }
}
