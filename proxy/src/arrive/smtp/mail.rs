//! A mail received over SMTP as the inbox shows it: the shared mail reader ([`crate::record::mime`])
//! with the envelope's recipients.

use std::collections::BTreeSet;

use crate::record::message::{self, Message, MessageKind};
use crate::record::mime::{AddressField, Mail};

/// The SMTP envelope of one mail.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Envelope {
    /// The reverse-path from MAIL FROM (empty for a bounce).
    pub from: String,
    /// Every forward-path from RCPT TO, in order.
    pub to: Vec<String>,
}

/// Why a received mail could not be shown.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum MailError {
    /// The data is not an RFC 5322 message.
    #[error("it has no header section")]
    NoHeaders,
}

/// The inbox message for a mail received with `envelope`.
///
/// `from` is the header From, else the envelope sender; `to` is every envelope recipient (the
/// header To and Cc are added to the text when they name other addresses); attachments are
/// listed by name in the text, their content is not kept.
pub fn message(envelope: &Envelope, raw: &[u8]) -> Result<Message, MailError> {
    let mail = Mail::parse(raw).ok_or(MailError::NoHeaders)?;
    let from = mail
        .from()
        .or_else(|| (!envelope.from.is_empty()).then(|| envelope.from.clone()));
    let content = mail.content(&recipient_notes(envelope, &mail));
    Ok(message::new(
        "smtp",
        MessageKind::Email,
        from,
        envelope.to.clone(),
        content,
    ))
}

/// The header recipients, when they differ from the envelope's (Bcc, a list expansion).
fn recipient_notes(envelope: &Envelope, mail: &Mail<'_>) -> Vec<String> {
    let headers = [AddressField::To, AddressField::Cc];
    let in_headers: BTreeSet<String> = headers
        .iter()
        .flat_map(|&field| mail.addresses(field))
        .collect();
    let in_envelope = envelope.to.iter().map(|a| a.to_ascii_lowercase()).collect();
    if in_headers == in_envelope {
        return Vec::new();
    }
    headers
        .into_iter()
        .map(|field| (field, mail.mailboxes(field)))
        .filter(|(_, list)| !list.is_empty())
        .map(|(field, list)| format!("{}: {}", field.name(), list.join(", ")))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn envelope(to: &[&str]) -> Envelope {
        Envelope {
            from: "bounce@shop.test".into(),
            to: to.iter().map(|s| (*s).to_owned()).collect(),
        }
    }

    fn crlf(s: &str) -> Vec<u8> {
        s.replace('\n', "\r\n").into_bytes()
    }

    #[test]
    fn header_recipients_are_noted_only_when_they_differ_from_the_envelope() {
        let raw = crlf(concat!(
            "From: a@shop.test\n",
            "To: Ana <ANA@example.test>\n",
            "Cc: bo@example.test\n",
            "Subject: s\n",
            "\n",
            "hi\n",
        ));
        let same =
            message(&envelope(&["ana@example.test", "bo@example.test"]), &raw).expect("parses");
        assert_eq!(
            (same.provider.as_str(), same.kind),
            ("smtp", MessageKind::Email)
        );
        assert_eq!(same.text.as_deref(), Some("hi"));
        let bcc = message(
            &envelope(&["ana@example.test", "bo@example.test", "audit@shop.test"]),
            &raw,
        )
        .expect("parses");
        assert_eq!(bcc.to.len(), 3);
        assert_eq!(
            bcc.text.as_deref(),
            Some("hi\n\nTo: Ana <ANA@example.test>\nCc: bo@example.test")
        );
    }

    #[test]
    fn envelope_sender_is_used_without_a_from_header() {
        let raw = crlf("Subject: no from\n\nbody\n");
        let m = message(&envelope(&["ana@example.test"]), &raw).expect("parses");
        assert_eq!(m.from.as_deref(), Some("bounce@shop.test"));
        let bounce = Envelope {
            from: String::new(),
            ..envelope(&["ana@example.test"])
        };
        assert_eq!(message(&bounce, &raw).expect("parses").from, None);
    }

    #[test]
    fn data_without_headers_is_refused() {
        assert_eq!(
            message(&envelope(&["a@b.test"]), b""),
            Err(MailError::NoHeaders)
        );
    }
}
