//! A host without a provider handler that its rule names exactly: the request is captured
//! as a generic `request` message and answered `202 {"captured": true}`, so the service sees a
//! plain success rather than a made-up API answer.

use http::StatusCode;
use serde_json::json;

use super::{Answer, Exchange, Sent};
use crate::message::{Content, Message, MessageKind};

/// The most of a body the message keeps as its text.
const TEXT_LIMIT: usize = 64 * 1024;

/// Capture `ex` as a generic message.
pub(super) fn capture(ex: &Exchange<'_>) -> Sent {
    let text = (!ex.body.is_empty()).then(|| {
        let mut text = String::from_utf8_lossy(ex.body).into_owned();
        if text.len() > TEXT_LIMIT {
            // Cut on a character boundary; 0 always is one.
            let cut = (0..=TEXT_LIMIT).rev().find(|&i| text.is_char_boundary(i));
            text.truncate(cut.unwrap_or(0));
        }
        text
    });
    let content = Content {
        text,
        ..Content::default()
    };
    Sent {
        answer: Answer::json(StatusCode::ACCEPTED, &json!({"captured": true})),
        messages: vec![Message::new(
            "request",
            MessageKind::Message,
            None,
            Vec::new(),
            content,
        )],
    }
}
