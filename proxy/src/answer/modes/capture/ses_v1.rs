//! Amazon SES v1 (the query API), `POST /` with `Action=SendEmail` or `Action=SendRawEmail`:
//! answered `200` with the `SendEmailResponse` / `SendRawEmailResponse` XML document.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use http::StatusCode;

use super::form::Form;
use super::ids::Digest;
use super::mail::Mime;
use super::{Answer, CaptureError, Exchange, Handled, Provider, Sent};
use crate::record::message::{self, Content, Message, MessageKind};

const PROVIDER: Provider = Provider::Ses;

/// Capture an SES v1 request.
pub(super) fn capture(ex: &Exchange<'_>) -> Handled {
    if ex.path != "/" {
        return None;
    }
    let form = match Form::of(PROVIDER, ex) {
        Ok(form) => form,
        Err(error) => return Some(Err(error)),
    };
    let (action, message) = match form.first("Action")? {
        "SendEmail" => ("SendEmail", send_email(&form)),
        "SendRawEmail" => ("SendRawEmail", send_raw_email(&form)),
        _ => return None,
    };
    Some(message.map(|message| Sent {
        answer: response(action, ex.body),
        messages: vec![message],
    }))
}

/// The SES answer document. Every value in it is a generated hex id, so nothing needs
/// escaping.
fn response(action: &str, body: &[u8]) -> Answer {
    let message_id = message_id(body);
    let request_id = Digest::of(body, "request", 0).uuid();
    let xml = format!(
        "<{action}Response xmlns=\"http://ses.amazonaws.com/doc/2010-12-01/\">\n\
         \x20 <{action}Result>\n\
         \x20   <MessageId>{message_id}</MessageId>\n\
         \x20 </{action}Result>\n\
         \x20 <ResponseMetadata>\n\
         \x20   <RequestId>{request_id}</RequestId>\n\
         \x20 </ResponseMetadata>\n\
         </{action}Response>\n"
    );
    Answer::new(StatusCode::OK, "text/xml", xml)
}

/// An SES message id: `0100018a0b1c2d3e-<uuid>-000000`.
pub(super) fn message_id(body: &[u8]) -> String {
    let digest = Digest::of(body, "message", 0);
    format!("0100{}-{}-000000", digest.hex(12), digest.uuid())
}

fn send_email(form: &Form) -> Result<Message, CaptureError> {
    let from = form.first("Source").ok_or(PROVIDER.missing("Source"))?;
    let to: Vec<String> = ["To", "Cc", "Bcc"]
        .iter()
        .flat_map(|kind| form.members(&format!("Destination.{kind}Addresses.member")))
        .map(str::to_owned)
        .collect();
    if to.is_empty() {
        return Err(PROVIDER.missing("Destination (To, Cc or Bcc addresses)"));
    }
    let subject = form
        .first("Message.Subject.Data")
        .ok_or(PROVIDER.missing("Message.Subject.Data"))?;
    let text = form.first("Message.Body.Text.Data");
    let html = form.first("Message.Body.Html.Data");
    if text.is_none() && html.is_none() {
        return Err(PROVIDER.missing("Message.Body.Text.Data or Message.Body.Html.Data"));
    }
    let content = Content {
        subject: Some(subject.to_owned()),
        text: text.map(str::to_owned),
        html: html.map(str::to_owned),
    };
    Ok(message::new(
        PROVIDER.id(),
        MessageKind::Email,
        Some(from.to_owned()),
        to,
        content,
    ))
}

fn send_raw_email(form: &Form) -> Result<Message, CaptureError> {
    const FIELD: &str = "RawMessage.Data";
    let encoded = form.first(FIELD).ok_or(PROVIDER.missing(FIELD))?;
    let raw = STANDARD
        .decode(encoded.trim())
        .map_err(|source| CaptureError::Base64 {
            provider: PROVIDER,
            field: FIELD,
            source,
        })?;
    let mime = Mime::parse(PROVIDER, FIELD, &raw)?;
    // The envelope (Source, Destinations) wins over the headers, as SES sends it.
    let from = form.first("Source").map(str::to_owned).or(mime.from);
    let destinations: Vec<String> = form
        .members("Destinations.member")
        .into_iter()
        .map(str::to_owned)
        .collect();
    let to = if destinations.is_empty() {
        mime.to
    } else {
        destinations
    };
    Ok(message::new(
        PROVIDER.id(),
        MessageKind::Email,
        from,
        to,
        mime.content,
    ))
}

#[cfg(test)]
mod tests {
    use base64::Engine as _;
    use base64::engine::general_purpose::STANDARD;
    use http::header;

    use super::super::testing::{post_form, refusal, sent};
    use super::super::{Answer, Captured};
    use crate::record::message::MessageKind;

    const HOST: &str = "email.us-east-1.amazonaws.com";

    /// The text between `<tag>` and `</tag>`.
    fn element<'a>(xml: &'a str, tag: &str) -> &'a str {
        let start = xml.find(&format!("<{tag}>")).expect("open") + tag.len() + 2;
        let end = xml.find(&format!("</{tag}>")).expect("close");
        &xml[start..end]
    }

    fn assert_response(answer: &Answer, action: &str) {
        assert_eq!(answer.status, 200);
        assert_eq!(answer.headers[header::CONTENT_TYPE], "text/xml");
        let xml = std::str::from_utf8(&answer.body).expect("utf-8");
        assert!(xml.starts_with(&format!(
            "<{action}Response xmlns=\"http://ses.amazonaws.com/doc/2010-12-01/\">"
        )));
        let message_id = element(xml, "MessageId");
        assert_eq!(message_id.len(), 60, "{message_id}");
        assert!(message_id.ends_with("-000000"));
        assert_eq!(element(xml, "RequestId").len(), 36);
        assert!(element(xml, &format!("{action}Result")).contains(message_id));
    }

    #[test]
    fn send_email_is_answered_with_the_xml_response() {
        // As boto3 `ses.send_email(...)` sends it.
        let captured = post_form(
            HOST,
            "/",
            &[
                ("Action", "SendEmail"),
                ("Version", "2010-12-01"),
                ("Source", "Acme <no-reply@acme.com>"),
                ("Destination.ToAddresses.member.1", "ada@example.com"),
                ("Destination.ToAddresses.member.2", "bob@example.org"),
                ("Destination.BccAddresses.member.1", "audit@acme.com"),
                ("Message.Subject.Data", "Verify your email"),
                ("Message.Subject.Charset", "UTF-8"),
                (
                    "Message.Body.Text.Data",
                    "Code 902114: https://acme.com/verify/902114",
                ),
                ("Message.Body.Text.Charset", "UTF-8"),
                ("Message.Body.Html.Data", "<p>Code <b>902114</b></p>"),
                ("Message.Body.Html.Charset", "UTF-8"),
            ],
        );
        let (answer, messages) = sent(captured);
        assert_response(&answer, "SendEmail");
        let [message] = &messages[..] else {
            panic!("one message")
        };
        assert_eq!(message.provider, "ses");
        assert_eq!(message.kind, MessageKind::Email);
        assert_eq!(message.from.as_deref(), Some("Acme <no-reply@acme.com>"));
        assert_eq!(
            message.to,
            ["ada@example.com", "bob@example.org", "audit@acme.com"]
        );
        assert_eq!(message.subject.as_deref(), Some("Verify your email"));
        assert_eq!(
            message.text.as_deref(),
            Some("Code 902114: https://acme.com/verify/902114")
        );
        assert_eq!(message.html.as_deref(), Some("<p>Code <b>902114</b></p>"));
        assert_eq!(message.links, ["https://acme.com/verify/902114"]);
        assert_eq!(message.code.as_deref(), Some("902114"));
    }

    #[test]
    fn send_raw_email_reads_the_mime_message() {
        let mime = "From: Acme <no-reply@acme.com>\r\nTo: ada@example.com\r\n\
                    Subject: Welcome\r\nContent-Type: text/html; charset=UTF-8\r\n\r\n\
                    <a href=\"https://acme.com/start\">Start</a>\r\n";
        let captured = post_form(
            HOST,
            "/",
            &[
                ("Action", "SendRawEmail"),
                ("Version", "2010-12-01"),
                ("RawMessage.Data", &STANDARD.encode(mime)),
            ],
        );
        let (answer, messages) = sent(captured);
        assert_response(&answer, "SendRawEmail");
        let message = &messages[0];
        assert_eq!(message.from.as_deref(), Some("Acme <no-reply@acme.com>"));
        assert_eq!(message.to, ["ada@example.com"]);
        assert_eq!(message.subject.as_deref(), Some("Welcome"));
        assert_eq!(message.text.as_deref(), Some("Start"), "the HTML as text");
        assert_eq!(
            message.html.as_deref(),
            Some("<a href=\"https://acme.com/start\">Start</a>\n")
        );
        assert_eq!(message.links, ["https://acme.com/start"]);

        let with_envelope = post_form(
            HOST,
            "/",
            &[
                ("Action", "SendRawEmail"),
                ("Source", "bounce@acme.com"),
                ("Destinations.member.1", "bob@example.org"),
                ("RawMessage.Data", &STANDARD.encode(mime)),
            ],
        );
        let message = &sent(with_envelope).1[0];
        assert_eq!(message.from.as_deref(), Some("bounce@acme.com"));
        assert_eq!(message.to, ["bob@example.org"]);
    }

    #[test]
    fn sends_ses_would_reject_are_refused_and_other_actions_have_no_handler() {
        let no_to = post_form(
            HOST,
            "/",
            &[
                ("Action", "SendEmail"),
                ("Source", "a@acme.com"),
                ("Message.Subject.Data", "s"),
                ("Message.Body.Text.Data", "x"),
            ],
        );
        assert_eq!(
            refusal(no_to),
            "the Amazon SES payload has no Destination (To, Cc or Bcc addresses)"
        );
        let bad_raw = post_form(
            HOST,
            "/",
            &[("Action", "SendRawEmail"), ("RawMessage.Data", "%%%")],
        );
        assert!(
            refusal(bad_raw).starts_with("the Amazon SES payload's RawMessage.Data is not base64")
        );
        let quota = post_form(HOST, "/", &[("Action", "GetSendQuota")]);
        assert!(matches!(quota, Captured::NoHandler));
    }
}
