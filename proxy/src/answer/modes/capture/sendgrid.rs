//! SendGrid v3 Mail Send, `POST /v3/mail/send`: one message per personalization, answered
//! `202` with an empty body and an `X-Message-Id` header.

use bytes::Bytes;
use http::{HeaderValue, StatusCode};
use serde::Deserialize;
use serde_json::Value;

use super::ids::Digest;
use super::mail::template_text;
use super::{Answer, CaptureError, Exchange, Handled, Provider, Sent, json};
use crate::record::message::{self, Content, MessageKind};
use crate::record::mime::mailbox;

const PROVIDER: Provider = Provider::SendGrid;

#[derive(Deserialize)]
struct MailSend {
    #[serde(default)]
    personalizations: Vec<Personalization>,
    from: Option<EmailAddress>,
    subject: Option<String>,
    #[serde(default)]
    content: Vec<ContentPart>,
    template_id: Option<String>,
}

#[derive(Deserialize)]
struct Personalization {
    #[serde(default)]
    to: Vec<EmailAddress>,
    #[serde(default)]
    cc: Vec<EmailAddress>,
    #[serde(default)]
    bcc: Vec<EmailAddress>,
    from: Option<EmailAddress>,
    subject: Option<String>,
    dynamic_template_data: Option<Value>,
}

#[derive(Deserialize)]
struct EmailAddress {
    email: String,
    name: Option<String>,
}

impl EmailAddress {
    fn shown(&self) -> String {
        mailbox(self.name.as_deref(), &self.email)
    }
}

#[derive(Deserialize)]
struct ContentPart {
    #[serde(rename = "type")]
    media_type: String,
    value: String,
}

/// Capture a SendGrid request.
pub(super) fn capture(ex: &Exchange<'_>) -> Handled {
    (ex.path == "/v3/mail/send").then(|| send(ex.body))
}

fn send(body: &[u8]) -> Result<Sent, CaptureError> {
    let mail: MailSend = json(PROVIDER, body)?;
    if mail.personalizations.is_empty() || mail.personalizations.iter().any(|p| p.to.is_empty()) {
        return Err(PROVIDER.missing("personalizations[].to"));
    }
    let body_of = |media_type: &str| {
        mail.content
            .iter()
            .find(|part| part.media_type.eq_ignore_ascii_case(media_type))
            .map(|part| part.value.clone())
    };
    let (text, html) = (body_of("text/plain"), body_of("text/html"));
    let templated = mail.template_id.is_some();
    if text.is_none() && html.is_none() && !templated {
        return Err(PROVIDER.missing("content or template_id"));
    }
    let messages = mail
        .personalizations
        .iter()
        .map(|p| {
            let from = p.from.as_ref().or(mail.from.as_ref());
            let from = from.ok_or(PROVIDER.missing("from.email"))?.shown();
            let subject = p.subject.clone().or_else(|| mail.subject.clone());
            if subject.is_none() && !templated {
                return Err(PROVIDER.missing("subject"));
            }
            let recipients = p.to.iter().chain(&p.cc).chain(&p.bcc);
            let content = Content {
                subject,
                text: text
                    .clone()
                    .or_else(|| p.dynamic_template_data.as_ref().map(template_text)),
                html: html.clone(),
            };
            Ok(message::new(
                PROVIDER.id(),
                MessageKind::Email,
                Some(from),
                recipients.map(EmailAddress::shown).collect(),
                content,
            ))
        })
        .collect::<Result<_, _>>()?;
    let mut answer = Answer::new(
        StatusCode::ACCEPTED,
        "text/plain; charset=utf-8",
        Bytes::new(),
    );
    // URL-safe base64 is always a valid header value.
    if let Ok(id) = HeaderValue::from_str(&Digest::of(body, "x-message-id", 0).base64url(16)) {
        answer.headers.insert("x-message-id", id);
    }
    Ok(Sent { answer, messages })
}

#[cfg(test)]
mod tests {
    use http::header;
    use serde_json::json;

    use super::super::testing::{post_json, refusal, sent};
    use crate::record::message::MessageKind;

    const HOST: &str = "api.sendgrid.com";

    #[test]
    fn mail_send_is_accepted_with_one_message_per_personalization() {
        // As @sendgrid/mail sends `send({to, cc, from, subject, text, html})` with two
        // personalizations (`isMultiple`).
        let payload = json!({
            "from": {"email": "no-reply@example.com", "name": "Example"},
            "subject": "Confirm your email",
            "personalizations": [
                {"to": [{"email": "ada@example.com", "name": "Ada"}],
                 "cc": [{"email": "ops@example.com"}]},
                {"to": [{"email": "bob@example.org"}], "bcc": [{"email": "audit@example.com"}],
                 "subject": "Bob, confirm your email"}
            ],
            "content": [
                {"type": "text/plain", "value": "Confirm: https://app.example.com/confirm?t=abc"},
                {"type": "text/html",
                 "value": "<a href=\"https://app.example.com/confirm?t=abc\">Confirm</a>"}
            ]
        });
        let (answer, messages) = sent(post_json(HOST, "/v3/mail/send", &payload));
        assert_eq!(answer.status, 202);
        assert!(answer.body.is_empty());
        assert_eq!(
            answer.headers[header::CONTENT_TYPE],
            "text/plain; charset=utf-8"
        );
        let id = answer.headers["x-message-id"].to_str().expect("ascii");
        assert_eq!(id.len(), 22);
        assert_eq!(messages.len(), 2);
        let first = &messages[0];
        assert_eq!(first.provider, "sendgrid");
        assert_eq!(first.kind, MessageKind::Email);
        assert_eq!(
            first.from.as_deref(),
            Some("Example <no-reply@example.com>")
        );
        assert_eq!(first.to, ["Ada <ada@example.com>", "ops@example.com"]);
        assert_eq!(first.subject.as_deref(), Some("Confirm your email"));
        assert_eq!(
            first.text.as_deref(),
            Some("Confirm: https://app.example.com/confirm?t=abc")
        );
        assert_eq!(
            first.html.as_deref(),
            Some("<a href=\"https://app.example.com/confirm?t=abc\">Confirm</a>")
        );
        assert_eq!(first.links, ["https://app.example.com/confirm?t=abc"]);
        assert_eq!(first.code, None);
        assert_eq!(messages[1].to, ["bob@example.org", "audit@example.com"]);
        assert_eq!(
            messages[1].subject.as_deref(),
            Some("Bob, confirm your email")
        );
    }

    #[test]
    fn dynamic_template_data_is_captured_as_text() {
        let payload = json!({
            "from": {"email": "no-reply@example.com"},
            "template_id": "d-13b8f94fbcae4ec6b75270d6cb59f932",
            "personalizations": [{
                "to": [{"email": "ada@example.com"}],
                "dynamic_template_data": {"code": "804213",
                                          "link": "https://app.example.com/verify/abc"}
            }]
        });
        let (answer, messages) = sent(post_json(HOST, "/v3/mail/send", &payload));
        assert_eq!(answer.status, 202);
        let message = &messages[0];
        assert_eq!(message.subject, None);
        assert_eq!(message.html, None);
        let text = message.text.as_deref().expect("template data as text");
        assert_eq!(
            serde_json::from_str::<serde_json::Value>(text).expect("json"),
            payload["personalizations"][0]["dynamic_template_data"]
        );
        assert_eq!(message.code.as_deref(), Some("804213"));
        assert_eq!(message.links, ["https://app.example.com/verify/abc"]);
    }

    #[test]
    fn same_payload_gets_the_same_message_id() {
        let payload = json!({"from": {"email": "a@example.com"}, "subject": "s",
            "personalizations": [{"to": [{"email": "b@example.com"}]}],
            "content": [{"type": "text/plain", "value": "x"}]});
        let id = |p| sent(post_json(HOST, "/v3/mail/send", p)).0.headers["x-message-id"].clone();
        assert_eq!(id(&payload), id(&payload));
        let mut other = payload.clone();
        other["subject"] = json!("t");
        assert_ne!(id(&payload), id(&other));
    }

    #[test]
    fn payloads_sendgrid_would_reject_are_refused_with_the_missing_field() {
        let no_to = json!({"from": {"email": "a@example.com"}, "subject": "s",
            "personalizations": [{"cc": [{"email": "b@example.com"}]}],
            "content": [{"type": "text/plain", "value": "x"}]});
        assert_eq!(
            refusal(post_json(HOST, "/v3/mail/send", &no_to)),
            "the SendGrid payload has no personalizations[].to"
        );
        let no_from = json!({"subject": "s",
            "personalizations": [{"to": [{"email": "b@example.com"}]}],
            "content": [{"type": "text/plain", "value": "x"}]});
        assert_eq!(
            refusal(post_json(HOST, "/v3/mail/send", &no_from)),
            "the SendGrid payload has no from.email"
        );
        let bad_shape = json!({"personalizations": {"to": "b@example.com"}});
        assert!(
            refusal(post_json(HOST, "/v3/mail/send", &bad_shape))
                .starts_with("the SendGrid payload is not what its API accepts: invalid type")
        );
    }
}
