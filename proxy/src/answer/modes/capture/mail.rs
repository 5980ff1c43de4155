//! What the mail providers share: raw MIME messages (SES raw sends, Mailgun MIME sends) and
//! template sends.

use serde_json::Value;

use super::{CaptureError, Provider};
use crate::record::message::Content;
use crate::record::mime::Mail;

/// A raw MIME message's sender, recipients (To, Cc, Bcc) and content, read as every mail is
/// ([`crate::record::mime`]).
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
        let mail = Mail::parse(raw).ok_or(CaptureError::Mime { provider, field })?;
        Ok(Self {
            from: mail.from(),
            to: mail.recipients(),
            content: mail.content(&[]),
        })
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
