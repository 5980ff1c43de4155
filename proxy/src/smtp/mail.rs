//! A received mail as the inbox shows it. Everything about the mail format (RFC 5322 headers,
//! MIME structure, transfer encodings, RFC 2047 encoded words, charsets) is `mail-parser`'s;
//! this module only chooses what to show.

use std::collections::BTreeSet;

use mail_parser::{
    Addr, Address, Message as ParsedMail, MessageParser, MessagePart, MimeHeaders, PartType,
};

use crate::message::{Content, Message, MessageKind};

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
    let mail = MessageParser::default()
        .parse(raw)
        .ok_or(MailError::NoHeaders)?;
    let from = mail
        .from()
        .and_then(|a| a.iter().find_map(mailbox))
        .or_else(|| (!envelope.from.is_empty()).then(|| envelope.from.clone()));
    let text = [text_view(&mail), notes(envelope, &mail)]
        .into_iter()
        .filter(|s| !s.is_empty())
        .collect::<Vec<_>>()
        .join("\n\n");
    let content = Content {
        subject: mail.subject().map(str::to_owned),
        text: shown(&text),
        html: shown(&html_view(&mail)),
    };
    Ok(Message::new(
        "smtp",
        MessageKind::Email,
        from,
        envelope.to.clone(),
        content,
    ))
}

/// The text/plain parts, and HTML rendered as text where a mail has no plain alternative.
fn text_view(mail: &ParsedMail<'_>) -> String {
    (0..mail.text_body_count())
        .filter_map(|i| mail.body_text(i))
        .collect::<Vec<_>>()
        .join("\n")
        .trim_end()
        .to_owned()
}

/// The text/html parts as sent.
fn html_view(mail: &ParsedMail<'_>) -> String {
    mail.html_bodies()
        .filter_map(|part| match &part.body {
            PartType::Html(html) => Some(html.as_ref()),
            _ => None,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// Lines added after the body: the header recipients when they differ from the envelope's,
/// and the attachments' names.
fn notes(envelope: &Envelope, mail: &ParsedMail<'_>) -> String {
    let (to, cc) = (mail.to(), mail.cc());
    let mut lines = Vec::new();
    let header_addresses: BTreeSet<String> = to
        .into_iter()
        .chain(cc)
        .flat_map(Address::iter)
        .filter_map(Addr::address)
        .map(str::to_ascii_lowercase)
        .collect();
    let envelope_addresses: BTreeSet<String> =
        envelope.to.iter().map(|a| a.to_ascii_lowercase()).collect();
    if header_addresses != envelope_addresses {
        for (label, field) in [("To", to), ("Cc", cc)] {
            let list = mailboxes(field);
            if !list.is_empty() {
                lines.push(format!("{label}: {list}"));
            }
        }
    }
    let attachments = attachment_names(mail);
    if !attachments.is_empty() {
        lines.push(format!("Attachments: {}", attachments.join(", ")));
    }
    lines.join("\n")
}

/// The names of the parts that are not shown as a body.
fn attachment_names(mail: &ParsedMail<'_>) -> Vec<String> {
    let bodies: BTreeSet<u32> = mail
        .text_body
        .iter()
        .chain(&mail.html_body)
        .copied()
        .collect();
    mail.attachments
        .iter()
        .filter(|id| !bodies.contains(id))
        .filter_map(|&id| mail.part(id))
        .map(attachment_name)
        .collect()
}

fn mailboxes(field: Option<&Address<'_>>) -> String {
    field
        .into_iter()
        .flat_map(Address::iter)
        .filter_map(mailbox)
        .collect::<Vec<_>>()
        .join(", ")
}

/// `Name <address>`, or whichever of the two the header gave.
fn mailbox(addr: &Addr<'_>) -> Option<String> {
    match (addr.name(), addr.address()) {
        (Some(name), Some(address)) => Some(format!("{name} <{address}>")),
        (None, Some(only)) | (Some(only), None) => Some(only.to_owned()),
        (None, None) => None,
    }
}

fn attachment_name(part: &MessagePart<'_>) -> String {
    match (part.attachment_name(), part.content_type()) {
        (Some(name), _) => name.to_owned(),
        (None, Some(ct)) => match ct.subtype() {
            Some(sub) => format!("(unnamed {}/{sub})", ct.ctype()),
            None => format!("(unnamed {})", ct.ctype()),
        },
        (None, None) => "(unnamed)".to_owned(),
    }
}

/// A body as the inbox shows it: `None` when empty, lines ending in LF (CRLF is the wire's).
fn shown(body: &str) -> Option<String> {
    (!body.is_empty()).then(|| body.replace("\r\n", "\n"))
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
    fn multipart_alternative_with_attachment_keeps_both_bodies_and_lists_the_attachment() {
        let raw = crlf(concat!(
            "From: Shop <hello@shop.test>\n",
            "To: ana@example.test\n",
            "Subject: Welcome\n",
            "MIME-Version: 1.0\n",
            "Content-Type: multipart/mixed; boundary=\"outer\"\n",
            "\n",
            "--outer\n",
            "Content-Type: multipart/alternative; boundary=\"inner\"\n",
            "\n",
            "--inner\n",
            "Content-Type: text/plain; charset=utf-8\n",
            "Content-Transfer-Encoding: quoted-printable\n",
            "\n",
            "Caf=C3=A9 code 482913\n",
            "--inner\n",
            "Content-Type: text/html; charset=utf-8\n",
            "Content-Transfer-Encoding: base64\n",
            "\n",
            "PHA+Q2Fmw6k8L3A+\n",
            "--inner--\n",
            "--outer\n",
            "Content-Type: application/pdf; name=\"invoice.pdf\"\n",
            "Content-Disposition: attachment; filename=\"invoice.pdf\"\n",
            "Content-Transfer-Encoding: base64\n",
            "\n",
            "JVBERi0xLjQK\n",
            "--outer--\n",
        ));
        let m = message(&envelope(&["ana@example.test"]), &raw).expect("parses");
        assert_eq!(m.provider, "smtp");
        assert_eq!(m.kind, MessageKind::Email);
        assert_eq!(m.from.as_deref(), Some("Shop <hello@shop.test>"));
        assert_eq!(m.to, vec!["ana@example.test"]);
        assert_eq!(m.subject.as_deref(), Some("Welcome"));
        assert_eq!(
            m.text.as_deref(),
            Some("Café code 482913\n\nAttachments: invoice.pdf")
        );
        assert_eq!(m.html.as_deref(), Some("<p>Café</p>"));
        assert_eq!(m.code.as_deref(), Some("482913"));
        assert!(!m.text.unwrap_or_default().contains("JVBER"));
    }

    #[test]
    fn encoded_word_subject_and_charset_are_decoded() {
        let raw = crlf(concat!(
            "From: =?ISO-8859-1?Q?Ren=E9?= <rene@shop.test>\n",
            "To: ana@example.test\n",
            "Subject: =?UTF-8?B?VW4gY2Fmw6k=?= =?UTF-8?Q?_pour_vous?=\n",
            "Content-Type: text/plain; charset=iso-8859-1\n",
            "Content-Transfer-Encoding: quoted-printable\n",
            "\n",
            "D=E9j=E0 vu\n",
        ));
        let m = message(&envelope(&["ana@example.test"]), &raw).expect("parses");
        assert_eq!(m.from.as_deref(), Some("René <rene@shop.test>"));
        assert_eq!(m.subject.as_deref(), Some("Un café pour vous"));
        assert_eq!(m.text.as_deref(), Some("Déjà vu"));
        assert_eq!(m.html, None);
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
    fn html_only_mail_has_a_text_view() {
        let raw = crlf(concat!(
            "From: a@shop.test\n",
            "Subject: s\n",
            "Content-Type: text/html\n",
            "\n",
            "<p>Your code is <b>123456</b></p>\n",
        ));
        let m = message(&envelope(&["ana@example.test"]), &raw).expect("parses");
        assert_eq!(
            m.html.as_deref(),
            Some("<p>Your code is <b>123456</b></p>\n")
        );
        let text = m.text.expect("a text view");
        assert!(text.contains("Your code is 123456"), "{text}");
        assert!(!text.contains('<'), "{text}");
    }

    #[test]
    fn data_without_headers_is_refused() {
        assert_eq!(
            message(&envelope(&["a@b.test"]), b""),
            Err(MailError::NoHeaders)
        );
    }
}
