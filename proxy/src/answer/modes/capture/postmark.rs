//! Postmark, `POST /email`, `/email/batch`, `/email/withTemplate` and
//! `/email/batchWithTemplates`: answered `200` with `{"To", "SubmittedAt", "MessageID",
//! "ErrorCode": 0, "Message": "OK"}` per message (an array for the batches).

use std::time::SystemTime;

use http::StatusCode;
use serde::Deserialize;
use serde_json::{Value, json};

use super::ids::Digest;
use super::mail::template_text;
use super::{Answer, CaptureError, Exchange, Handled, Provider, Sent};
use crate::record::journal::record::rfc3339;
use crate::record::message::{self, Content, Message, MessageKind};
use crate::record::mime::address_list;

const PROVIDER: Provider = Provider::Postmark;

#[derive(Deserialize)]
#[serde(rename_all = "PascalCase")]
struct Email {
    from: Option<String>,
    to: Option<String>,
    cc: Option<String>,
    bcc: Option<String>,
    subject: Option<String>,
    html_body: Option<String>,
    text_body: Option<String>,
    template_id: Option<u64>,
    template_alias: Option<String>,
    template_model: Option<Value>,
}

#[derive(Deserialize)]
#[serde(rename_all = "PascalCase")]
struct TemplateBatch {
    #[serde(default)]
    messages: Vec<Email>,
}

/// Whether a route sends bodies or templates.
#[derive(Clone, Copy)]
enum Kind {
    Bodies,
    Template,
}

/// Capture a Postmark request; `now` is the `SubmittedAt`.
pub(super) fn capture(ex: &Exchange<'_>, now: SystemTime) -> Handled {
    let (kind, batch) = match ex.path {
        "/email" => (Kind::Bodies, false),
        "/email/withTemplate" => (Kind::Template, false),
        "/email/batch" => (Kind::Bodies, true),
        "/email/batchWithTemplates" => (Kind::Template, true),
        _ => return None,
    };
    Some(send(ex.body, kind, batch, now))
}

fn send(body: &[u8], kind: Kind, batch: bool, now: SystemTime) -> Result<Sent, CaptureError> {
    let emails: Vec<Email> = match (kind, batch) {
        (_, false) => vec![super::json(PROVIDER, body)?],
        (Kind::Bodies, true) => super::json(PROVIDER, body)?,
        (Kind::Template, true) => super::json::<TemplateBatch>(PROVIDER, body)?.messages,
    };
    if emails.is_empty() {
        return Err(PROVIDER.missing("Messages"));
    }
    let submitted_at = rfc3339(now).to_string();
    let mut replies = Vec::with_capacity(emails.len());
    let mut messages = Vec::with_capacity(emails.len());
    for (i, email) in emails.into_iter().enumerate() {
        replies.push(json!({
            "To": email.to.as_deref().unwrap_or_default(),
            "SubmittedAt": submitted_at,
            "MessageID": Digest::of(body, "message", i).uuid(),
            "ErrorCode": 0,
            "Message": "OK",
        }));
        messages.push(message(email, kind)?);
    }
    let reply = if batch {
        Value::Array(replies)
    } else {
        replies.swap_remove(0)
    };
    Ok(Sent {
        answer: Answer::json(StatusCode::OK, &reply),
        messages,
    })
}

fn message(email: Email, kind: Kind) -> Result<Message, CaptureError> {
    let from = email
        .from
        .filter(|f| !f.is_empty())
        .ok_or(PROVIDER.missing("From"))?;
    let to = email.to.as_deref().map(address_list).unwrap_or_default();
    if to.is_empty() {
        return Err(PROVIDER.missing("To"));
    }
    let copies = [&email.cc, &email.bcc].into_iter().flatten();
    let recipients = to
        .into_iter()
        .chain(copies.flat_map(|list| address_list(list)))
        .collect();
    let text = match kind {
        Kind::Bodies if email.html_body.is_none() && email.text_body.is_none() => {
            return Err(PROVIDER.missing("HtmlBody or TextBody"));
        }
        Kind::Bodies => email.text_body,
        Kind::Template if email.template_id.is_none() && email.template_alias.is_none() => {
            return Err(PROVIDER.missing("TemplateId or TemplateAlias"));
        }
        Kind::Template => email.template_model.as_ref().map(template_text),
    };
    let content = Content {
        subject: email.subject,
        text,
        html: email.html_body,
    };
    Ok(message::new(
        PROVIDER.id(),
        MessageKind::Email,
        Some(from),
        recipients,
        content,
    ))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::super::testing::{json_body, post_json, refusal, sent};
    use crate::record::message::MessageKind;

    const HOST: &str = "api.postmarkapp.com";

    #[test]
    fn email_is_answered_ok_with_a_message_id() {
        // As postmark.js `client.sendEmail({...})` sends it.
        let payload = json!({
            "From": "Acme <sender@acme.com>",
            "To": "ada@example.com, \"Doe, Jane\" <jane@example.com>",
            "Cc": "ops@acme.com",
            "Subject": "Reset your password",
            "HtmlBody": "<a href=\"https://acme.com/reset?t=x1\">Reset</a>",
            "TextBody": "Reset: https://acme.com/reset?t=x1",
            "MessageStream": "outbound",
            "TrackOpens": true
        });
        let (answer, messages) = sent(post_json(HOST, "/email", &payload));
        assert_eq!(answer.status, 200);
        let reply = json_body(&answer);
        assert_eq!(reply["To"], payload["To"]);
        assert_eq!(reply["SubmittedAt"], "2015-07-30T20:12:31.000Z");
        assert_eq!(reply["MessageID"].as_str().map(str::len), Some(36));
        assert_eq!(reply["ErrorCode"], 0);
        assert_eq!(reply["Message"], "OK");
        let [message] = &messages[..] else {
            panic!("one message")
        };
        assert_eq!(message.provider, "postmark");
        assert_eq!(message.kind, MessageKind::Email);
        assert_eq!(message.from.as_deref(), Some("Acme <sender@acme.com>"));
        assert_eq!(
            message.to,
            [
                "ada@example.com",
                "\"Doe, Jane\" <jane@example.com>",
                "ops@acme.com"
            ]
        );
        assert_eq!(message.subject.as_deref(), Some("Reset your password"));
        assert_eq!(message.text.as_deref(), payload["TextBody"].as_str());
        assert_eq!(message.html.as_deref(), payload["HtmlBody"].as_str());
        assert_eq!(message.links, ["https://acme.com/reset?t=x1"]);
        assert_eq!(message.code, None);
    }

    #[test]
    fn batch_is_answered_with_an_array() {
        let payload = json!([
            {"From": "a@acme.com", "To": "ada@example.com", "Subject": "1", "TextBody": "one"},
            {"From": "a@acme.com", "To": "bob@example.org", "Subject": "2", "TextBody": "two"}
        ]);
        let (answer, messages) = sent(post_json(HOST, "/email/batch", &payload));
        let reply = json_body(&answer);
        let replies = reply.as_array().expect("array");
        assert_eq!(replies.len(), 2);
        assert_eq!(replies[1]["To"], "bob@example.org");
        assert_ne!(replies[0]["MessageID"], replies[1]["MessageID"]);
        assert_eq!(messages[1].text.as_deref(), Some("two"));
    }

    #[test]
    fn template_model_is_captured_as_text() {
        let payload = json!({
            "From": "a@acme.com", "To": "ada@example.com", "TemplateAlias": "welcome",
            "TemplateModel": {"name": "Ada", "action_url": "https://acme.com/activate/9f2"}
        });
        let (answer, messages) = sent(post_json(HOST, "/email/withTemplate", &payload));
        assert_eq!(json_body(&answer)["Message"], "OK");
        let text = messages[0].text.as_deref().expect("model as text");
        assert_eq!(
            serde_json::from_str::<serde_json::Value>(text).expect("json"),
            payload["TemplateModel"]
        );
        assert_eq!(messages[0].links, ["https://acme.com/activate/9f2"]);

        let batch = json!({"Messages": [payload.clone(), payload]});
        let (answer, messages) = sent(post_json(HOST, "/email/batchWithTemplates", &batch));
        assert_eq!(json_body(&answer).as_array().map(Vec::len), Some(2));
        assert_eq!(messages.len(), 2);
    }

    #[test]
    fn emails_postmark_would_reject_are_refused() {
        let no_body = json!({"From": "a@acme.com", "To": "b@example.com", "Subject": "s"});
        assert_eq!(
            refusal(post_json(HOST, "/email", &no_body)),
            "the Postmark payload has no HtmlBody or TextBody"
        );
        let no_template = json!({"From": "a@acme.com", "To": "b@example.com", "TemplateModel": {}});
        assert_eq!(
            refusal(post_json(HOST, "/email/withTemplate", &no_template)),
            "the Postmark payload has no TemplateId or TemplateAlias"
        );
        let no_to = json!({"From": "a@acme.com", "Subject": "s", "TextBody": "x"});
        assert_eq!(
            refusal(post_json(HOST, "/email", &no_to)),
            "the Postmark payload has no To"
        );
    }
}
