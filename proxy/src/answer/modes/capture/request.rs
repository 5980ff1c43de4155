//! A host without a provider handler that its rule names exactly: the request is captured
//! as a generic `request` message and answered `202 {"captured": true}`, so the service sees a
//! plain success rather than a made-up API answer.

use http::StatusCode;
use serde_json::json;

use super::{Answer, Exchange, Sent};
use crate::record::message::{self, Content, MessageKind};

/// Capture `ex` as a generic message.
pub(super) fn capture(ex: &Exchange<'_>) -> Sent {
    // The message bounds its own text (`message::MAX_BODY_BYTES`).
    let text = (!ex.body.is_empty()).then(|| String::from_utf8_lossy(ex.body).into_owned());
    let content = Content {
        text,
        ..Content::default()
    };
    Sent {
        answer: Answer::json(StatusCode::ACCEPTED, &json!({"captured": true})),
        messages: vec![message::new(
            "request",
            MessageKind::Message,
            None,
            Vec::new(),
            content,
        )],
    }
}
