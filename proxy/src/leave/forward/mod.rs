//! Forwarding an allowed request: pooled HTTP through the guard, or a byte tunnel.

pub(crate) mod client;
pub(crate) mod connector;
pub(crate) mod http;
mod sides;
#[cfg(target_os = "linux")]
mod splice;
pub(crate) mod tunnel;
pub(crate) mod upgrade;

use ::http::StatusCode;
use af_policy::error::{ErrorCode, codes};

use crate::answer::refusal::Refusal;
use crate::decide::Ticket;
use crate::leave::guard::DialError;

/// Journal a failed dial on `ticket` and return what the client is answered. `answered` is
/// false where the client is closed instead (the transparent TLS listener).
///
/// The sidecar's own refusals (the guard, AF-NET-011; the upstream cap, AF-NET-018) are
/// journaled as refused: nothing was dialled. A failed resolution or connection (AF-NET-013)
/// and the dial deadline (AF-NET-019) are upstream failures of an allowed request.
pub(crate) fn dial_failed(e: &DialError, ticket: Ticket, answered: bool) -> Refusal {
    let refused =
        |status, code, reason: String| (Refusal::new(status, code, reason, format!("{e}.")), true);
    let failed =
        |status, code, reason: &str| (allowed_failure(status, code, reason, &e.to_string()), false);
    let (refusal, by_the_sidecar) = match e {
        DialError::Refused { refusal, .. } => refused(
            StatusCode::FORBIDDEN,
            &codes::NET_GUARD,
            format!("guard:{}", refusal.as_str()),
        ),
        DialError::Limit { .. } => refused(
            StatusCode::SERVICE_UNAVAILABLE,
            &codes::NET_UPSTREAM_LIMIT,
            "upstream_limit".to_owned(),
        ),
        DialError::Resolve { .. } => {
            failed(StatusCode::BAD_GATEWAY, &codes::NET_UPSTREAM, "resolve")
        }
        DialError::Connect { .. } => {
            failed(StatusCode::BAD_GATEWAY, &codes::NET_UPSTREAM, "connect")
        }
        DialError::Deadline { .. } => failed(
            StatusCode::GATEWAY_TIMEOUT,
            &codes::NET_DIAL_DEADLINE,
            "dial_deadline",
        ),
    };
    if by_the_sidecar {
        ticket.refused(&refusal);
    } else {
        let status = answered.then_some(refusal.status.as_u16());
        ticket.upstream_failed(
            status,
            refusal.code,
            refusal.reason.clone(),
            e.to_string(),
            0,
            0,
        );
    }
    refusal
}

/// The answer for a failed upstream (502 AF-NET-013).
pub(crate) fn upstream_refusal(reason: &str, error: &str) -> Refusal {
    allowed_failure(StatusCode::BAD_GATEWAY, &codes::NET_UPSTREAM, reason, error)
}

/// The catalogue allowed it, so the decision header says `allow`; the code says what failed.
fn allowed_failure(
    status: StatusCode,
    code: &'static ErrorCode,
    reason: &str,
    error: &str,
) -> Refusal {
    Refusal {
        decision: "allow",
        ..Refusal::new(status, code, reason.to_owned(), format!("{error}."))
    }
}
