//! A client connection that ended with no request read, and what the sidecar says about it.
//!
//! A head hyper could not read is refused `400` `AF-NET-017`, one too large (bytes or header
//! fields) `431` `AF-NET-004`, one not sent whole within the header timeout `408` `AF-NET-005`:
//! a coded answer and a record, like every refusal (the record within the journal's budget for
//! refusals made before deciding, see [`crate::decide::refuse_undecided`]). A connection that
//! sends nothing (more) in time, or stops in the middle of a head, is closed without an answer
//! and counted.

use std::sync::Arc;

use af_policy::error::codes;
use http::StatusCode;

use super::gate::Gate;
use crate::answer::refusal::Refusal;
use crate::answer::request::Origin;
use crate::decide::{Ask, refuse_undecided};
use crate::metrics::Unanswered;
use crate::state::State;

/// How hyper's serving of a connection ended.
pub(super) enum Ended {
    /// hyper returned.
    Served(Result<(), hyper::Error>),
    /// Nothing moved either way for `limits.idle_timeout_ms`.
    Idle,
}

/// Journal or count how the connection ended, and the answer to give in place of hyper's own
/// when there is one. `host` is what the connection is known to be for (empty if nothing).
pub(super) fn answer<T>(
    state: &Arc<State>,
    origin: Origin,
    host: &str,
    ended: &Ended,
    gate: &Gate<T>,
) -> Option<Vec<u8>> {
    let error = match ended {
        Ended::Served(Ok(())) => return None,
        Ended::Served(Err(e)) => e,
        Ended::Idle => {
            state.metrics.unanswered(Unanswered::Idle);
            return None;
        }
    };
    if !gate.between_requests() {
        // A request is being answered; it is journaled on its own.
        return None;
    }
    let t = &state.tuning;
    let refusal = if error.is_parse_too_large() {
        Refusal::new(
            StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE,
            &codes::NET_HEAD_TOO_LARGE,
            "head_too_large",
            format!(
                "The request head is larger than the sidecar reads ({error}): at most {} bytes in {} header fields",
                t.max_header_bytes, t.max_headers
            ),
        )
    } else if error.is_parse() {
        Refusal::new(
            StatusCode::BAD_REQUEST,
            &codes::NET_BAD_REQUEST,
            "bad_request",
            format!("The request head could not be read: {error}"),
        )
    } else if error.is_timeout() && gate.head_started() {
        Refusal::new(
            StatusCode::REQUEST_TIMEOUT,
            &codes::NET_HEADER_TIMEOUT,
            "header_timeout",
            format!(
                "The request head did not arrive whole within {} ms",
                t.header_read_timeout.as_millis()
            ),
        )
    } else if error.is_timeout() {
        state.metrics.unanswered(Unanswered::Idle);
        return None;
    } else if error.is_incomplete_message() {
        state.metrics.unanswered(Unanswered::Incomplete);
        return None;
    } else {
        return None;
    };
    let ask = Ask {
        via: origin.via,
        arrived: origin.arrived,
        client: origin.client,
        method: "",
        host,
        port: origin.port,
        path: "",
        tunnel: false,
    };
    refuse_undecided(state, &ask, &refusal);
    Some(refusal.raw_close_response())
}
