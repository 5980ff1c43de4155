//! Resend, `POST /emails` (answered `200 {"id"}`) and `POST /emails/batch` (answered
//! `200 {"data": [{"id"}, ...]}`).

use http::StatusCode;
use serde::Deserialize;
use serde_json::{Value, json};

use super::ids::Digest;
use super::{Answer, CaptureError, Exchange, Handled, Provider, Sent};
use crate::record::message::{self, Content, Message, MessageKind};

const PROVIDER: Provider = Provider::Resend;

#[derive(Deserialize)]
struct Email {
    from: Option<String>,
    to: Option<Recipients>,
    cc: Option<Recipients>,
    bcc: Option<Recipients>,
    subject: Option<String>,
    html: Option<String>,
    text: Option<String>,
}

/// Resend takes one address or a list wherever it takes recipients.
#[derive(Deserialize)]
#[serde(untagged)]
enum Recipients {
    One(String),
    Many(Vec<String>),
}

impl Recipients {
    fn addresses(&self) -> &[String] {
        match self {
            Self::One(one) => std::slice::from_ref(one),
            Self::Many(many) => many,
        }
    }
}

/// Capture a Resend request.
pub(super) fn capture(ex: &Exchange<'_>) -> Handled {
    match ex.path {
        "/emails" => Some(send(ex.body)),
        "/emails/batch" => Some(send_batch(ex.body)),
        _ => None,
    }
}

fn send(body: &[u8]) -> Result<Sent, CaptureError> {
    let message = message(super::json(PROVIDER, body)?)?;
    let answer = json!({"id": Digest::of(body, "email", 0).uuid()});
    Ok(Sent {
        answer: Answer::json(StatusCode::OK, &answer),
        messages: vec![message],
    })
}

fn send_batch(body: &[u8]) -> Result<Sent, CaptureError> {
    let emails: Vec<Email> = super::json(PROVIDER, body)?;
    if emails.is_empty() {
        return Err(PROVIDER.missing("emails"));
    }
    let messages: Vec<Message> = emails.into_iter().map(message).collect::<Result<_, _>>()?;
    let ids: Vec<Value> = (0..messages.len())
        .map(|i| json!({"id": Digest::of(body, "email", i).uuid()}))
        .collect();
    Ok(Sent {
        answer: Answer::json(StatusCode::OK, &json!({"data": ids})),
        messages,
    })
}

fn message(email: Email) -> Result<Message, CaptureError> {
    let from = email
        .from
        .filter(|f| !f.is_empty())
        .ok_or(PROVIDER.missing("from"))?;
    let to: Vec<String> = [&email.to, &email.cc, &email.bcc]
        .into_iter()
        .flatten()
        .flat_map(Recipients::addresses)
        .filter(|a| !a.is_empty())
        .cloned()
        .collect();
    if email.to.as_ref().is_none_or(|t| t.addresses().is_empty()) {
        return Err(PROVIDER.missing("to"));
    }
    let subject = email.subject.ok_or(PROVIDER.missing("subject"))?;
    let content = Content {
        subject: Some(subject),
        text: email.text,
        html: email.html,
    };
    Ok(message::new(
        PROVIDER.id(),
        MessageKind::Email,
        Some(from),
        to,
        content,
    ))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::super::testing::{json_body, post_json, refusal, sent};
    use crate::record::message::MessageKind;

    const HOST: &str = "api.resend.com";

    #[test]
    fn email_is_answered_with_an_id() {
        // As `resend.emails.send({...})` from the Node SDK sends it.
        let payload = json!({
            "from": "Acme <onboarding@resend.dev>",
            "to": ["delivered@resend.dev"],
            "cc": "ops@example.com",
            "subject": "Your sign-in code",
            "html": "<p>Your code is <strong>318204</strong></p><a href=\"https://acme.dev/login?c=318204\">Sign in</a>",
            "text": "Your code is 318204"
        });
        let (answer, messages) = sent(post_json(HOST, "/emails", &payload));
        assert_eq!(answer.status, 200);
        let id = json_body(&answer)["id"].as_str().expect("id").to_owned();
        assert_eq!(id.len(), 36);
        let [message] = &messages[..] else {
            panic!("one message")
        };
        assert_eq!(message.provider, "resend");
        assert_eq!(message.kind, MessageKind::Email);
        assert_eq!(
            message.from.as_deref(),
            Some("Acme <onboarding@resend.dev>")
        );
        assert_eq!(message.to, ["delivered@resend.dev", "ops@example.com"]);
        assert_eq!(message.subject.as_deref(), Some("Your sign-in code"));
        assert_eq!(message.text.as_deref(), Some("Your code is 318204"));
        assert_eq!(message.html.as_deref(), payload["html"].as_str());
        assert_eq!(message.links, ["https://acme.dev/login?c=318204"]);
        assert_eq!(message.code.as_deref(), Some("318204"));
    }

    #[test]
    fn batch_is_answered_with_one_id_per_email() {
        let payload = json!([
            {"from": "Acme <a@acme.dev>", "to": "ada@example.com", "subject": "Hi Ada", "text": "1"},
            {"from": "Acme <a@acme.dev>", "to": ["bob@example.org"], "subject": "Hi Bob", "html": "<p>2</p>"}
        ]);
        let (answer, messages) = sent(post_json(HOST, "/emails/batch", &payload));
        assert_eq!(answer.status, 200);
        let data = json_body(&answer)["data"].as_array().expect("data").clone();
        assert_eq!(data.len(), 2);
        assert_ne!(data[0]["id"], data[1]["id"]);
        assert_eq!(messages.len(), 2);
        assert_eq!(messages[0].to, ["ada@example.com"]);
        assert_eq!(messages[1].subject.as_deref(), Some("Hi Bob"));
        assert_eq!(messages[1].html.as_deref(), Some("<p>2</p>"));
        assert_eq!(messages[1].text, None);
    }

    #[test]
    fn emails_without_recipients_or_subject_are_refused() {
        let no_to = json!({"from": "a@acme.dev", "to": [], "subject": "s", "text": "x"});
        assert_eq!(
            refusal(post_json(HOST, "/emails", &no_to)),
            "the Resend payload has no to"
        );
        let no_subject = json!([{"from": "a@acme.dev", "to": "b@example.com", "text": "x"}]);
        assert_eq!(
            refusal(post_json(HOST, "/emails/batch", &no_subject)),
            "the Resend payload has no subject"
        );
        assert_eq!(
            refusal(post_json(HOST, "/emails/batch", &json!([]))),
            "the Resend payload has no emails"
        );
    }
}
