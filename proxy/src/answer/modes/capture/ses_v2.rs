//! Amazon SES v2, `POST /v2/email/outbound-emails` with simple, raw or template content:
//! answered `200 {"MessageId"}`.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use http::StatusCode;
use serde::Deserialize;
use serde_json::json;

use super::mail::Mime;
use super::ses_v1::message_id;
use super::{Answer, CaptureError, Exchange, Handled, Provider, Sent};
use crate::record::message::{self, Content, Message, MessageKind};

const PROVIDER: Provider = Provider::Ses;

#[derive(Deserialize)]
#[serde(rename_all = "PascalCase")]
struct SendEmail {
    from_email_address: Option<String>,
    #[serde(default)]
    destination: Destination,
    content: Option<EmailContent>,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "PascalCase")]
struct Destination {
    #[serde(default)]
    to_addresses: Vec<String>,
    #[serde(default)]
    cc_addresses: Vec<String>,
    #[serde(default)]
    bcc_addresses: Vec<String>,
}

#[derive(Deserialize)]
#[serde(rename_all = "PascalCase")]
struct EmailContent {
    simple: Option<Simple>,
    raw: Option<Data>,
    template: Option<Template>,
}

#[derive(Deserialize)]
#[serde(rename_all = "PascalCase")]
struct Simple {
    subject: Option<Data>,
    #[serde(default)]
    body: Body,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "PascalCase")]
struct Body {
    text: Option<Data>,
    html: Option<Data>,
}

#[derive(Deserialize)]
#[serde(rename_all = "PascalCase")]
struct Data {
    data: String,
}

#[derive(Deserialize)]
#[serde(rename_all = "PascalCase")]
struct Template {
    template_data: Option<String>,
}

/// Capture an SES v2 request.
pub(super) fn capture(ex: &Exchange<'_>) -> Handled {
    (ex.path == "/v2/email/outbound-emails").then(|| {
        let message = send(ex.body)?;
        let reply = json!({"MessageId": message_id(ex.body)});
        Ok(Sent {
            answer: Answer::json(StatusCode::OK, &reply),
            messages: vec![message],
        })
    })
}

fn send(body: &[u8]) -> Result<Message, CaptureError> {
    let email: SendEmail = super::json(PROVIDER, body)?;
    let Destination {
        to_addresses,
        cc_addresses,
        bcc_addresses,
    } = email.destination;
    let to: Vec<String> = [to_addresses, cc_addresses, bcc_addresses].concat();
    let content = email.content.ok_or(PROVIDER.missing("Content"))?;
    let (from, to, content) = match content {
        EmailContent {
            simple: Some(simple),
            ..
        } => (email.from_email_address, to, simple_content(simple)?),
        EmailContent { raw: Some(raw), .. } => {
            const FIELD: &str = "Content.Raw.Data";
            let bytes =
                STANDARD
                    .decode(raw.data.trim())
                    .map_err(|source| CaptureError::Base64 {
                        provider: PROVIDER,
                        field: FIELD,
                        source,
                    })?;
            let mime = Mime::parse(PROVIDER, FIELD, &bytes)?;
            // The request's envelope wins over the mail's headers.
            let from = email.from_email_address.or(mime.from);
            let to = if to.is_empty() { mime.to } else { to };
            (from, to, mime.content)
        }
        EmailContent {
            template: Some(template),
            ..
        } => {
            // The template lives at SES; its data is what the inbox can show.
            let content = Content {
                text: template.template_data,
                ..Content::default()
            };
            (email.from_email_address, to, content)
        }
        _ => return Err(PROVIDER.missing("Content.Simple, Content.Raw or Content.Template")),
    };
    let from = from.ok_or(PROVIDER.missing("FromEmailAddress"))?;
    if to.is_empty() {
        return Err(PROVIDER.missing("Destination"));
    }
    Ok(message::new(
        PROVIDER.id(),
        MessageKind::Email,
        Some(from),
        to,
        content,
    ))
}

fn simple_content(simple: Simple) -> Result<Content, CaptureError> {
    let subject = simple
        .subject
        .ok_or(PROVIDER.missing("Content.Simple.Subject.Data"))?;
    let Body { text, html } = simple.body;
    if text.is_none() && html.is_none() {
        return Err(PROVIDER.missing("Content.Simple.Body.Text or Content.Simple.Body.Html"));
    }
    Ok(Content {
        subject: Some(subject.data),
        text: text.map(|d| d.data),
        html: html.map(|d| d.data),
    })
}

#[cfg(test)]
mod tests {
    use base64::Engine as _;
    use base64::engine::general_purpose::STANDARD;
    use serde_json::json;

    use super::super::testing::{json_body, post_json, refusal, sent};
    use crate::record::message::MessageKind;

    const HOST: &str = "email.eu-west-1.amazonaws.com";
    const PATH: &str = "/v2/email/outbound-emails";

    #[test]
    fn simple_email_is_answered_with_a_message_id() {
        // As the AWS SDK's SESv2 `SendEmailCommand` sends it.
        let payload = json!({
            "FromEmailAddress": "no-reply@acme.com",
            "Destination": {"ToAddresses": ["ada@example.com"], "CcAddresses": ["ops@acme.com"]},
            "Content": {"Simple": {
                "Subject": {"Data": "Your login code", "Charset": "UTF-8"},
                "Body": {
                    "Text": {"Data": "Code: 66120044", "Charset": "UTF-8"},
                    "Html": {"Data": "<p>Code: 66120044</p>", "Charset": "UTF-8"}
                }
            }}
        });
        let (answer, messages) = sent(post_json(HOST, PATH, &payload));
        assert_eq!(answer.status, 200);
        let id = json_body(&answer)["MessageId"]
            .as_str()
            .expect("id")
            .to_owned();
        assert_eq!(id.len(), 60);
        let [message] = &messages[..] else {
            panic!("one message")
        };
        assert_eq!(message.provider, "ses");
        assert_eq!(message.kind, MessageKind::Email);
        assert_eq!(message.from.as_deref(), Some("no-reply@acme.com"));
        assert_eq!(message.to, ["ada@example.com", "ops@acme.com"]);
        assert_eq!(message.subject.as_deref(), Some("Your login code"));
        assert_eq!(message.text.as_deref(), Some("Code: 66120044"));
        assert_eq!(message.html.as_deref(), Some("<p>Code: 66120044</p>"));
        assert!(message.links.is_empty());
        assert_eq!(message.code.as_deref(), Some("66120044"));
    }

    #[test]
    fn raw_and_template_emails_are_captured() {
        let mime = "From: no-reply@acme.com\r\nTo: ada@example.com\r\nSubject: Hi\r\n\r\nHello\r\n";
        let raw = json!({"Content": {"Raw": {"Data": STANDARD.encode(mime)}}});
        let message = &sent(post_json(HOST, PATH, &raw)).1[0];
        assert_eq!(message.from.as_deref(), Some("no-reply@acme.com"));
        assert_eq!(message.to, ["ada@example.com"]);
        assert_eq!(message.subject.as_deref(), Some("Hi"));
        assert_eq!(message.text.as_deref(), Some("Hello"));

        let template = json!({
            "FromEmailAddress": "no-reply@acme.com",
            "Destination": {"ToAddresses": ["ada@example.com"]},
            "Content": {"Template": {"TemplateName": "Invite",
                "TemplateData": "{\"link\":\"https://acme.com/invite/q1\"}"}}
        });
        let message = &sent(post_json(HOST, PATH, &template)).1[0];
        assert_eq!(
            message.text.as_deref(),
            Some("{\"link\":\"https://acme.com/invite/q1\"}")
        );
        assert_eq!(message.links, ["https://acme.com/invite/q1"]);
    }

    #[test]
    fn emails_ses_would_reject_are_refused() {
        let no_content = json!({"FromEmailAddress": "a@acme.com",
            "Destination": {"ToAddresses": ["b@example.com"]}});
        assert_eq!(
            refusal(post_json(HOST, PATH, &no_content)),
            "the Amazon SES payload has no Content"
        );
        let no_from = json!({"Destination": {"ToAddresses": ["b@example.com"]},
            "Content": {"Simple": {"Subject": {"Data": "s"}, "Body": {"Text": {"Data": "x"}}}}});
        assert_eq!(
            refusal(post_json(HOST, PATH, &no_from)),
            "the Amazon SES payload has no FromEmailAddress"
        );
    }
}
