//! Mailgun, `POST /v3/{domain}/messages` (the mail as form fields) and
//! `POST /v3/{domain}/messages.mime` (a MIME mail in the `message` field), URL-encoded or
//! multipart/form-data: answered `200 {"id": "<...@domain>", "message": "Queued. Thank you."}`.

use http::StatusCode;
use serde_json::json;

use super::form::Form;
use super::ids::Digest;
use super::mail::Mime;
use super::{Answer, CaptureError, Exchange, Handled, Provider, Sent};
use crate::record::message::{self, Content, Message, MessageKind};
use crate::record::mime::address_list;

const PROVIDER: Provider = Provider::Mailgun;

/// Capture a Mailgun request.
pub(super) fn capture(ex: &Exchange<'_>) -> Handled {
    let (domain, route) = ex.path.strip_prefix("/v3/")?.split_once('/')?;
    if domain.is_empty() {
        return None;
    }
    let message = match route {
        "messages" => Form::of(PROVIDER, ex).and_then(|form| from_fields(&form)),
        "messages.mime" => Form::of(PROVIDER, ex).and_then(|form| from_mime(&form)),
        _ => return None,
    };
    Some(message.map(|message| {
        let hex = Digest::of(ex.body, "message", 0).hex(32);
        let id = format!("<{}.{}@{domain}>", &hex[..16], &hex[16..]);
        let reply = json!({"id": id, "message": "Queued. Thank you."});
        Sent {
            answer: Answer::json(StatusCode::OK, &reply),
            messages: vec![message],
        }
    }))
}

/// Every address of the repeatable, comma-separated `fields`.
fn recipients(form: &Form, fields: &[&str]) -> Vec<String> {
    fields
        .iter()
        .flat_map(|name| form.all(name))
        .flat_map(address_list)
        .collect()
}

fn from_fields(form: &Form) -> Result<Message, CaptureError> {
    let from = form.first("from").ok_or(PROVIDER.missing("from"))?;
    if recipients(form, &["to"]).is_empty() {
        return Err(PROVIDER.missing("to"));
    }
    let (text, html) = (form.first("text"), form.first("html"));
    let template = form.first("template");
    if text.is_none() && html.is_none() && template.is_none() {
        return Err(PROVIDER.missing("text, html or template"));
    }
    // A template send's variables are what the inbox can show of it.
    let variables = template.and(
        form.first("t:variables")
            .or_else(|| form.first("h:X-Mailgun-Variables")),
    );
    let content = Content {
        subject: form.first("subject").map(str::to_owned),
        text: text.or(variables).map(str::to_owned),
        html: html.map(str::to_owned),
    };
    Ok(message::new(
        PROVIDER.id(),
        MessageKind::Email,
        Some(from.to_owned()),
        recipients(form, &["to", "cc", "bcc"]),
        content,
    ))
}

fn from_mime(form: &Form) -> Result<Message, CaptureError> {
    let to = recipients(form, &["to"]);
    if to.is_empty() {
        return Err(PROVIDER.missing("to"));
    }
    let raw = form.first("message").ok_or(PROVIDER.missing("message"))?;
    let mime = Mime::parse(PROVIDER, "message", raw.as_bytes())?;
    Ok(message::new(
        PROVIDER.id(),
        MessageKind::Email,
        mime.from,
        to,
        mime.content,
    ))
}

#[cfg(test)]
mod tests {
    use super::super::testing::{json_body, post, post_form, refusal, sent};
    use super::super::{Answer, Captured};
    use crate::record::message::{Message, MessageKind};

    const HOST: &str = "api.mailgun.net";
    const PATH: &str = "/v3/mg.example.com/messages";

    fn assert_queued(answer: &Answer) {
        assert_eq!(answer.status, 200);
        let reply = json_body(answer);
        assert_eq!(reply["message"], "Queued. Thank you.");
        let id = reply["id"].as_str().expect("id");
        assert!(
            id.starts_with('<') && id.ends_with("@mg.example.com>"),
            "{id}"
        );
    }

    fn assert_welcome(message: &Message) {
        assert_eq!(message.provider, "mailgun");
        assert_eq!(message.kind, MessageKind::Email);
        assert_eq!(
            message.from.as_deref(),
            Some("Excited User <mailgun@mg.example.com>")
        );
        assert_eq!(
            message.to,
            [
                "ada@example.com",
                "Bob <bob@example.org>",
                "carol@example.net"
            ]
        );
        assert_eq!(message.subject.as_deref(), Some("Welcome"));
        assert_eq!(
            message.text.as_deref(),
            Some("Use 550120 or https://example.com/invite/x")
        );
        assert_eq!(message.html, None);
        assert_eq!(message.links, ["https://example.com/invite/x"]);
        assert_eq!(message.code.as_deref(), Some("550120"));
    }

    #[test]
    fn urlencoded_send_is_queued() {
        // As `requests.post(..., data={...})` sends it, with a repeated `to`.
        let captured = post_form(
            HOST,
            PATH,
            &[
                ("from", "Excited User <mailgun@mg.example.com>"),
                ("to", "ada@example.com, Bob <bob@example.org>"),
                ("to", "carol@example.net"),
                ("subject", "Welcome"),
                ("text", "Use 550120 or https://example.com/invite/x"),
            ],
        );
        let (answer, messages) = sent(captured);
        assert_queued(&answer);
        assert_welcome(&messages[0]);
    }

    #[test]
    fn multipart_send_is_queued() {
        // As mailgun.js sends `messages.create(domain, {...})` through form-data.
        let body = "--------------------------610001183307337011939512\r\n\
            Content-Disposition: form-data; name=\"from\"\r\n\r\n\
            Excited User <mailgun@mg.example.com>\r\n\
            --------------------------610001183307337011939512\r\n\
            Content-Disposition: form-data; name=\"to\"\r\n\r\n\
            ada@example.com, Bob <bob@example.org>\r\n\
            --------------------------610001183307337011939512\r\n\
            Content-Disposition: form-data; name=\"to\"\r\n\r\n\
            carol@example.net\r\n\
            --------------------------610001183307337011939512\r\n\
            Content-Disposition: form-data; name=\"subject\"\r\n\r\n\
            Welcome\r\n\
            --------------------------610001183307337011939512\r\n\
            Content-Disposition: form-data; name=\"text\"\r\n\r\n\
            Use 550120 or https://example.com/invite/x\r\n\
            --------------------------610001183307337011939512--\r\n";
        let captured = post(
            "api.eu.mailgun.net",
            PATH,
            "multipart/form-data; boundary=------------------------610001183307337011939512",
            body.as_bytes(),
        );
        let (answer, messages) = sent(captured);
        assert_queued(&answer);
        assert_welcome(&messages[0]);
    }

    #[test]
    fn mime_send_takes_recipients_from_the_form_and_the_rest_from_the_mail() {
        let body = "--b1\r\nContent-Disposition: form-data; name=\"to\"\r\n\r\nada@example.com\r\n\
            --b1\r\nContent-Disposition: form-data; name=\"message\"; filename=\"message.mime\"\r\n\
            Content-Type: application/octet-stream\r\n\r\n\
            From: Acme <no-reply@acme.com>\r\nTo: someone@else.com\r\nSubject: Your code\r\n\
            Content-Type: text/plain\r\n\r\nCode: 7734201\r\n\
            --b1--\r\n";
        let captured = post(
            HOST,
            "/v3/mg.example.com/messages.mime",
            "multipart/form-data; boundary=b1",
            body.as_bytes(),
        );
        let (answer, messages) = sent(captured);
        assert_queued(&answer);
        let message = &messages[0];
        assert_eq!(message.from.as_deref(), Some("Acme <no-reply@acme.com>"));
        assert_eq!(message.to, ["ada@example.com"]);
        assert_eq!(message.subject.as_deref(), Some("Your code"));
        assert_eq!(message.code.as_deref(), Some("7734201"));
    }

    #[test]
    fn sends_mailgun_would_reject_are_refused_and_other_routes_have_no_handler() {
        let no_body = post_form(
            HOST,
            PATH,
            &[("from", "a@mg.example.com"), ("to", "b@x.com")],
        );
        assert_eq!(
            refusal(no_body),
            "the Mailgun payload has no text, html or template"
        );
        let no_to = post_form(HOST, PATH, &[("from", "a@mg.example.com"), ("text", "x")]);
        assert_eq!(refusal(no_to), "the Mailgun payload has no to");
        let events = post_form(HOST, "/v3/mg.example.com/events", &[("a", "b")]);
        assert!(matches!(events, Captured::NoHandler));
        let no_domain = post_form(HOST, "/v3//messages", &[("a", "b")]);
        assert!(matches!(no_domain, Captured::NoHandler));
    }
}
