//! What the mail providers share: addresses as the inbox shows them, raw MIME messages (SES
//! raw sends, Mailgun MIME sends) and template sends.

use mail_parser::{Addr, MessageParser, PartType};
use serde_json::Value;

use super::{CaptureError, Provider};
use crate::message::Content;

/// An address as the inbox shows it: `Name <address>`, or the bare address.
pub(super) fn mailbox(name: Option<&str>, address: &str) -> String {
    match name.map(str::trim).filter(|n| !n.is_empty()) {
        Some(name) if name.contains([',', ';', '<', '>', '@', '"']) => {
            format!("\"{}\" <{address}>", name.replace('"', "\\\""))
        }
        Some(name) => format!("{name} <{address}>"),
        None => address.to_owned(),
    }
}

/// Each address of an RFC 5322 address list (`a@x.com, "Doe, J" <j@x.com>`), read by the mail
/// parser so quoted names with commas stay whole.
pub(super) fn address_list(list: &str) -> Vec<String> {
    // Line breaks would end the header early; in a list they are only folding anyway.
    let header = format!("To: {}\r\n\r\n", list.replace(['\r', '\n'], " "));
    MessageParser::default()
        .parse_headers(header.as_bytes())
        .and_then(|m| m.to().map(|to| to.iter().filter_map(shown).collect()))
        .unwrap_or_default()
}

fn shown(addr: &Addr<'_>) -> Option<String> {
    match (addr.name(), addr.address()) {
        (name, Some(address)) => Some(mailbox(name, address)),
        (Some(name), None) => Some(name.to_owned()),
        (None, None) => None,
    }
}

/// A raw MIME message's sender, recipients (To, Cc, Bcc) and content.
pub(super) struct Mime {
    pub(super) from: Option<String>,
    pub(super) to: Vec<String>,
    pub(super) content: Content,
}

impl Mime {
    /// Read the MIME message in `field` of a `provider` payload.
    pub(super) fn parse(
        provider: Provider,
        field: &'static str,
        raw: &[u8],
    ) -> Result<Self, CaptureError> {
        let message = MessageParser::default()
            .parse(raw)
            .filter(|m| !m.root_part().headers().is_empty())
            .ok_or(CaptureError::Mime { provider, field })?;
        let from = message.from().and_then(|f| f.first()).and_then(shown);
        let to = [message.to(), message.cc(), message.bcc()]
            .into_iter()
            .flatten()
            .flat_map(|list| list.iter().filter_map(shown))
            .collect();
        // The parser offers an HTML part as text (and the reverse) when the other is missing;
        // the inbox wants each body only if the mail has it.
        let text = message.text_bodies().find_map(|part| match &part.body {
            PartType::Text(text) => Some(text.to_string()),
            _ => None,
        });
        let html = message.html_bodies().find_map(|part| match &part.body {
            PartType::Html(html) => Some(html.to_string()),
            _ => None,
        });
        let content = Content {
            subject: message.subject().map(str::to_owned),
            text,
            html,
        };
        Ok(Self { from, to, content })
    }
}

/// A template send's data as the message text: the template itself lives at the provider, so
/// its data is what the inbox can show (and where links and codes are).
pub(super) fn template_text(model: &Value) -> String {
    serde_json::to_string_pretty(model).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn address_lists_keep_quoted_names_whole() {
        assert_eq!(
            address_list("ada@example.com, \"Doe, Jane\" <jane@example.com>,Bob <bob@example.org>"),
            [
                "ada@example.com",
                "\"Doe, Jane\" <jane@example.com>",
                "Bob <bob@example.org>"
            ]
        );
        assert!(address_list("").is_empty());
    }

    #[test]
    fn mime_message_gives_sender_recipients_and_both_bodies() {
        let raw = "From: Example <no-reply@example.com>\r\n\
                   To: ada@example.com\r\nCc: Bob <bob@example.org>\r\n\
                   Subject: =?UTF-8?Q?Caf=C3=A9_code?=\r\nMIME-Version: 1.0\r\n\
                   Content-Type: multipart/alternative; boundary=\"alt\"\r\n\r\n\
                   --alt\r\nContent-Type: text/plain; charset=utf-8\r\n\
                   Content-Transfer-Encoding: quoted-printable\r\n\r\nCode =3D 123456\r\n\
                   --alt\r\nContent-Type: text/html; charset=utf-8\r\n\r\n<p>Code 123456</p>\r\n\
                   --alt--\r\n";
        let mime = Mime::parse(Provider::Ses, "RawMessage.Data", raw.as_bytes()).expect("mime");
        assert_eq!(mime.from.as_deref(), Some("Example <no-reply@example.com>"));
        assert_eq!(mime.to, ["ada@example.com", "Bob <bob@example.org>"]);
        assert_eq!(mime.content.subject.as_deref(), Some("Café code"));
        assert_eq!(mime.content.text.as_deref(), Some("Code = 123456"));
        assert_eq!(mime.content.html.as_deref(), Some("<p>Code 123456</p>"));
    }

    #[test]
    fn html_only_mail_has_no_text_body() {
        let raw = "From: a@example.com\r\nContent-Type: text/html\r\n\r\n<b>Hi</b>";
        let mime = Mime::parse(Provider::Ses, "RawMessage.Data", raw.as_bytes()).expect("mime");
        assert_eq!(mime.content.text, None);
        assert_eq!(mime.content.html.as_deref(), Some("<b>Hi</b>"));
    }

    #[test]
    fn bytes_without_headers_are_not_a_mime_message() {
        let error = Mime::parse(Provider::Ses, "RawMessage.Data", b"\r\njust text")
            .err()
            .expect("refused");
        assert_eq!(
            error.to_string(),
            "the Amazon SES payload's RawMessage.Data is not a MIME message"
        );
    }
}
