//! Capture mode: a request to a mail, SMS or chat API is answered the way the provider answers
//! a successful send (status, content type, body shape, ids), and the messages it would have
//! sent are handed back for the inbox. One file per provider; each knows its routes and
//! payloads, and says `None` for a route it has no handler for.
//!
//! Ids in answers are cut from a hash of the request body, so the same request gets the same
//! id. Nothing here does I/O: the caller journals the messages and sends the answer.

mod error;
mod form;
#[cfg(test)]
mod fuzz;
mod ids;
mod mail;
mod mailgun;
mod postmark;
mod provider;
mod request;
mod resend;
pub mod routes;
mod sendgrid;
mod ses_v1;
mod ses_v2;
mod slack;
#[cfg(test)]
mod testing;
mod twilio;

use std::time::SystemTime;

use http::Method;
use serde::de::DeserializeOwned;

pub(crate) use self::error::CaptureError;
pub use self::provider::Provider;
use super::{Answer, Exchange};
use crate::record::message::Message;

/// What capture makes of a request.
#[derive(Debug)]
pub enum Captured {
    /// The provider's success answer and the messages the request would have sent.
    Messages {
        /// The answer to send back.
        answer: Answer,
        /// The messages, for the inbox (one per personalization, batch entry, ...).
        messages: Vec<Message>,
    },
    /// The host's provider has no handler for this route, or the host has no provider and its
    /// rule is a wildcard.
    NoHandler,
    /// The payload is not one the provider would accept.
    Refused(CaptureError),
}

/// Capture `ex`: with its provider's handler, or, for a host without a provider that its rule
/// names exactly (`named_exactly`), as a generic `request` message. `now` stamps the answers
/// that carry a time.
pub fn capture(ex: &Exchange<'_>, named_exactly: bool, now: SystemTime) -> Captured {
    let handled = match Provider::for_host(ex.host) {
        // Every send route of every provider here is a POST.
        Some(_) if ex.method != Method::POST => None,
        Some(Provider::SendGrid) => sendgrid::capture(ex),
        Some(Provider::Resend) => resend::capture(ex),
        Some(Provider::Postmark) => postmark::capture(ex, now),
        Some(Provider::Mailgun) => mailgun::capture(ex),
        Some(Provider::Twilio) => twilio::capture(ex, now),
        Some(Provider::Ses) => ses_v1::capture(ex).or_else(|| ses_v2::capture(ex)),
        Some(Provider::Slack) => slack::capture(ex),
        None if named_exactly => Some(Ok(request::capture(ex))),
        None => None,
    };
    match handled {
        None => Captured::NoHandler,
        Some(Ok(Sent { answer, messages })) => Captured::Messages { answer, messages },
        Some(Err(error)) => Captured::Refused(error),
    }
}

/// A handled send: the answer and the messages.
struct Sent {
    answer: Answer,
    messages: Vec<Message>,
}

/// What a provider's handler makes of a request: `None` when it has no handler for the route.
type Handled = Option<Result<Sent, CaptureError>>;

/// The body as `T`, or the provider's refusal.
fn json<T: DeserializeOwned>(provider: Provider, body: &[u8]) -> Result<T, CaptureError> {
    serde_json::from_slice(body).map_err(|source| CaptureError::Json { provider, source })
}

#[cfg(test)]
mod tests {
    use http::Method;
    use serde_json::json;

    use super::Captured;
    use super::testing::{json_body, post_json, request, sent};
    use crate::record::message::MessageKind;

    #[test]
    fn a_provider_route_without_a_handler_is_not_answered() {
        let user = request(
            Method::GET,
            "api.sendgrid.com",
            "/v3/user",
            "application/json",
            b"",
            true,
        );
        assert!(matches!(user, Captured::NoHandler));
        let get_send = request(
            Method::GET,
            "api.sendgrid.com",
            "/v3/mail/send",
            "application/json",
            b"",
            true,
        );
        assert!(matches!(get_send, Captured::NoHandler));
        let templates = post_json("api.sendgrid.com", "/v3/templates", &json!({"name": "x"}));
        assert!(matches!(templates, Captured::NoHandler));
    }

    #[test]
    fn an_exactly_named_host_without_a_provider_is_captured_as_a_request() {
        let body = br#"{"event":"signup","email":"ada@example.com","code":"130077"}"#;
        let captured = request(
            Method::POST,
            "hooks.internal-crm.example",
            "/v1/events",
            "application/json",
            body,
            true,
        );
        let (answer, messages) = sent(captured);
        assert_eq!(answer.status, 202);
        assert_eq!(json_body(&answer), json!({"captured": true}));
        let [message] = &messages[..] else {
            panic!("one message")
        };
        assert_eq!(message.provider, "request");
        assert_eq!(message.kind, MessageKind::Message);
        assert_eq!(message.from, None);
        assert!(message.to.is_empty());
        assert_eq!(message.subject, None);
        assert_eq!(message.text.as_deref(), std::str::from_utf8(body).ok());
        assert_eq!(message.html, None);
        assert_eq!(message.code.as_deref(), Some("130077"));
    }

    #[test]
    fn a_wildcard_host_without_a_provider_is_not_answered() {
        let captured = request(
            Method::POST,
            "api.unknown.example",
            "/v1/send",
            "application/json",
            b"{}",
            false,
        );
        assert!(matches!(captured, Captured::NoHandler));
    }

    #[test]
    fn a_generic_capture_keeps_at_most_64_kib_of_lossy_text() {
        // 'é' is two bytes: a cut at 64 KiB falls inside one and must not split it.
        let mut body = vec![b'a'];
        body.extend("é".repeat(40 * 1024).bytes());
        body.push(0xff);
        let captured = request(
            Method::PUT,
            "hooks.crm.example",
            "/",
            "text/plain",
            &body,
            true,
        );
        let text = sent(captured).1.remove(0).text.expect("text");
        let kept = text
            .strip_suffix("\n[truncated by af]")
            .expect("marked as cut");
        assert_eq!(kept.len(), 64 * 1024 - 1);
        assert!(kept.starts_with("aé"));
        assert!(kept.ends_with('é'));
    }
}
