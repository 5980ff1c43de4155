//! Raw mail as the inbox shows it, for every way one arrives: the SMTP listener and the
//! providers' raw MIME sends (Amazon SES, Mailgun). Everything about the format (RFC 5322
//! headers, MIME structure, transfer encodings, RFC 2047 encoded words, charsets) is
//! `mail-parser`'s; this module only chooses what to show, once for all of them.

use std::collections::BTreeSet;

use mail_parser::{Addr, Address, Message, MessageParser, MessagePart, MimeHeaders, PartType};

use crate::record::message::Content;

/// An address header of a mail.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AddressField {
    /// `To`.
    To,
    /// `Cc`.
    Cc,
    /// `Bcc` (present only in a mail handed over before sending, as raw sends are).
    Bcc,
}

impl AddressField {
    /// The header's name.
    pub fn name(self) -> &'static str {
        match self {
            AddressField::To => "To",
            AddressField::Cc => "Cc",
            AddressField::Bcc => "Bcc",
        }
    }
}

/// One parsed mail.
pub struct Mail<'a>(Message<'a>);

impl<'a> Mail<'a> {
    /// The mail in `raw`, or `None` when it has no header section (it is not RFC 5322 mail).
    pub fn parse(raw: &'a [u8]) -> Option<Self> {
        MessageParser::default()
            .parse(raw)
            .filter(|m| !m.root_part().headers().is_empty())
            .map(Mail)
    }

    /// The first mailbox of the `From` header, as shown.
    pub fn from(&self) -> Option<String> {
        self.0.from().and_then(|a| a.iter().find_map(shown))
    }

    /// The mailboxes of `field`, as shown.
    pub fn mailboxes(&self, field: AddressField) -> Vec<String> {
        self.address(field)
            .into_iter()
            .flat_map(Address::iter)
            .filter_map(shown)
            .collect()
    }

    /// The bare addresses of `field`, lower-case (for comparing with an SMTP envelope).
    pub fn addresses(&self, field: AddressField) -> BTreeSet<String> {
        self.address(field)
            .into_iter()
            .flat_map(Address::iter)
            .filter_map(Addr::address)
            .map(str::to_ascii_lowercase)
            .collect()
    }

    /// Every recipient in `To`, `Cc` and `Bcc`, as shown.
    pub fn recipients(&self) -> Vec<String> {
        [AddressField::To, AddressField::Cc, AddressField::Bcc]
            .into_iter()
            .flat_map(|field| self.mailboxes(field))
            .collect()
    }

    /// Subject and bodies. The text is the text/plain parts (HTML rendered as text when the
    /// mail has no plain part), followed by `notes` and the attachments' names (their content
    /// is not kept); the HTML is the text/html parts as sent. Lines end in LF.
    pub fn content(&self, notes: &[String]) -> Content {
        let attachments = self.attachment_names();
        let attachments =
            (!attachments.is_empty()).then(|| format!("Attachments: {}", attachments.join(", ")));
        let notes = notes
            .iter()
            .cloned()
            .chain(attachments)
            .collect::<Vec<_>>()
            .join("\n");
        let text = [self.text_view(), notes]
            .into_iter()
            .filter(|s| !s.is_empty())
            .collect::<Vec<_>>()
            .join("\n\n");
        Content {
            subject: self.0.subject().map(str::to_owned),
            text: as_shown(&text),
            html: as_shown(&self.html_view()),
        }
    }

    fn address(&self, field: AddressField) -> Option<&Address<'a>> {
        match field {
            AddressField::To => self.0.to(),
            AddressField::Cc => self.0.cc(),
            AddressField::Bcc => self.0.bcc(),
        }
    }

    fn text_view(&self) -> String {
        (0..self.0.text_body_count())
            .filter_map(|i| self.0.body_text(i))
            .collect::<Vec<_>>()
            .join("\n")
            .trim_end()
            .to_owned()
    }

    fn html_view(&self) -> String {
        self.0
            .html_bodies()
            .filter_map(|part| match &part.body {
                PartType::Html(html) => Some(html.as_ref()),
                _ => None,
            })
            .collect::<Vec<_>>()
            .join("\n")
    }

    /// The names of the parts that are not shown as a body.
    fn attachment_names(&self) -> Vec<String> {
        let mail = &self.0;
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
}

/// An address as the inbox shows it: `Name <address>` (the name quoted when it holds a
/// separator), or the bare address.
pub(crate) fn mailbox(name: Option<&str>, address: &str) -> String {
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
pub fn address_list(list: &str) -> Vec<String> {
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

/// A body as the inbox shows it: `None` when empty, lines ending in LF (CRLF is the wire's;
/// the carriage returns before a line feed are all dropped, so `\r\r\n` ends in LF too).
fn as_shown(body: &str) -> Option<String> {
    let mut shown = String::with_capacity(body.len());
    for piece in body.split_inclusive('\n') {
        match piece.strip_suffix('\n') {
            Some(line) => {
                shown.push_str(line.trim_end_matches('\r'));
                shown.push('\n');
            }
            None => shown.push_str(piece),
        }
    }
    (!shown.is_empty()).then_some(shown)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn crlf(s: &str) -> Vec<u8> {
        s.replace('\n', "\r\n").into_bytes()
    }

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
    fn multipart_alternative_with_attachment_keeps_both_bodies_and_lists_the_attachment() {
        let raw = crlf(concat!(
            "From: Shop <hello@shop.test>\n",
            "To: ana@example.test\n",
            "Cc: Bob <bob@example.org>\n",
            "Bcc: audit@shop.test\n",
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
        let mail = Mail::parse(&raw).expect("parses");
        assert_eq!(mail.from().as_deref(), Some("Shop <hello@shop.test>"));
        assert_eq!(
            mail.recipients(),
            [
                "ana@example.test",
                "Bob <bob@example.org>",
                "audit@shop.test"
            ]
        );
        let content = mail.content(&[]);
        assert_eq!(content.subject.as_deref(), Some("Welcome"));
        assert_eq!(
            content.text.as_deref(),
            Some("Café code 482913\n\nAttachments: invoice.pdf")
        );
        assert_eq!(content.html.as_deref(), Some("<p>Café</p>"));
    }

    #[test]
    fn encoded_words_and_charsets_are_decoded() {
        let raw = crlf(concat!(
            "From: =?ISO-8859-1?Q?Ren=E9?= <rene@shop.test>\n",
            "Subject: =?UTF-8?B?VW4gY2Fmw6k=?= =?UTF-8?Q?_pour_vous?=\n",
            "Content-Type: text/plain; charset=iso-8859-1\n",
            "Content-Transfer-Encoding: quoted-printable\n",
            "\n",
            "D=E9j=E0 vu\n",
        ));
        let mail = Mail::parse(&raw).expect("parses");
        assert_eq!(mail.from().as_deref(), Some("René <rene@shop.test>"));
        let content = mail.content(&[]);
        assert_eq!(content.subject.as_deref(), Some("Un café pour vous"));
        assert_eq!(content.text.as_deref(), Some("Déjà vu"));
        assert_eq!(content.html, None);
    }

    #[test]
    fn html_only_mail_has_a_text_view_and_notes_follow_the_text() {
        let raw = crlf(concat!(
            "From: a@shop.test\n",
            "Content-Type: text/html\n",
            "\n",
            "<p>Your code is <b>123456</b></p>\n",
        ));
        let content = Mail::parse(&raw)
            .expect("parses")
            .content(&["To: x@shop.test".to_owned()]);
        assert_eq!(
            content.html.as_deref(),
            Some("<p>Your code is <b>123456</b></p>\n")
        );
        let text = content.text.expect("a text view");
        assert!(text.starts_with("Your code is 123456"), "{text}");
        assert!(text.ends_with("\n\nTo: x@shop.test"), "{text}");
        assert!(!text.contains('<'), "{text}");
    }

    #[test]
    fn bytes_without_a_header_section_are_not_mail() {
        assert!(Mail::parse(b"").is_none());
        assert!(Mail::parse(b"\r\njust text").is_none());
    }

    proptest::proptest! {
        #[test]
        fn any_bytes_after_a_header_are_read_without_panicking(
            headers in proptest::collection::vec("[A-Za-z-]{1,12}: .{0,60}", 1..6),
            body in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..1024),
        ) {
            let mut raw = headers.join("\r\n").into_bytes();
            raw.extend_from_slice(b"\r\n\r\n");
            raw.extend_from_slice(&body);
            if let Some(mail) = Mail::parse(&raw) {
                let content = mail.content(&["note".to_owned()]);
                let text = content.text.unwrap_or_default();
                proptest::prop_assert!(text.contains("note"), "the notes follow the text: {text:?}");
                for body in [Some(text), content.html].into_iter().flatten() {
                    proptest::prop_assert!(!body.contains("\r\n"), "lines end in LF: {body:?}");
                }
                let _ = (mail.from(), mail.recipients());
            }
        }
    }

    /// Found by `fuzz/fuzz_targets/mime.rs`: a header line ending `\r\r\n` left a CRLF in
    /// the HTML body once its CRLFs were made LFs.
    #[test]
    fn a_run_of_carriage_returns_before_a_line_feed_leaves_no_crlf() {
        const CRASH: &[u8] = b"FromFro:m a@shop.test\r\nConten|-\xff\xff\xff\xff\xff\xff\xff\x10\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xb2\xff\xff\xff\xff\xff\xfftext/htpe: t\nTo: ana@example.test\r\nCc: Bob <bob@example.org>\r\nBcc: audit@shop.te.test/\x03\xaa\xaa\xaa\xaa\xaa\xaa\xaaunsubsFrom: a@shop.test\r\nContent-Type: text/html\r\n\r\n<p>Your cohop.tes\x89\xf2\xf5\xbcot-tneTnFromde is <b>123456</b> <a href=\"ype: tIIIIIIIIIIIIIIIII<u</a></p>https://x.test/unsubs: a@shop.test\r\nContpe: text/ent-Type: text/html\r\r\n\r\n<\np>Your code cribe\">u</xt/htmlis <b>123456</b> <a href=\"'ttps://x.test/unsubscribe\">u</a></p>\n\r\n";
        let content = Mail::parse(CRASH).expect("parses").content(&[]);
        let html = content.html.expect("an HTML body");
        assert!(html.contains("text/html\n\n<\np>"), "{html:?}");
        assert!(!html.contains('\r'), "{html:?}");
        let small = b"From: a@x.test\r\nContent-Type: text/plain\r\n\r\none\r\r\ntwo\rthree";
        let text = Mail::parse(small).expect("parses").content(&[]).text;
        assert_eq!(
            text.as_deref(),
            Some("one\ntwo\rthree"),
            "a CR inside a line stays"
        );
    }

    #[test]
    fn names_with_separators_are_quoted() {
        assert_eq!(mailbox(Some("Doe, J"), "j@x.test"), "\"Doe, J\" <j@x.test>");
        assert_eq!(mailbox(Some(" "), "j@x.test"), "j@x.test");
        assert_eq!(mailbox(Some("Ana"), "a@x.test"), "Ana <a@x.test>");
    }
}
