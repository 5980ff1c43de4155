//! The mail reader every raw mail goes through (SMTP, SES and Mailgun raw sends): any bytes are
//! mail or not; a mail's view keeps the notes after the text, lines in LF, and the inbox's
//! bounds, and the SMTP message made from it has the envelope's recipients exactly.
#![no_main]

use af_fuzz::check_message;
use af_proxy::fuzzing::{AddressField, Mail, address_list};
use af_proxy::fuzzing::smtp::{Envelope, message};
use libfuzzer_sys::fuzz_target;

const NOTE: &str = "af-fuzz-note";

fuzz_target!(|raw: &[u8]| {
    let envelope = Envelope {
        from: "bounce@shop.test".into(),
        to: vec!["ana@example.test".into(), "bo@example.test".into()],
    };
    let Some(mail) = Mail::parse(raw) else {
        assert!(message(&envelope, raw).is_err(), "no mail, no message");
        return;
    };
    let content = mail.content(&[NOTE.to_owned()]);
    let text = content.text.as_deref().unwrap_or_default();
    assert!(
        text.ends_with(NOTE) || text.contains(&format!("{NOTE}\nAttachments: ")),
        "{text:?}"
    );
    for body in [content.text.as_deref(), content.html.as_deref()]
        .into_iter()
        .flatten()
    {
        assert!(!body.contains("\r\n"), "lines end in LF: {body:?}");
    }
    let _ = (
        mail.from(),
        mail.recipients(),
        mail.addresses(AddressField::Bcc),
    );
    let smtp = message(&envelope, raw).expect("a mail is a message");
    assert_eq!(smtp.to, envelope.to, "SMTP recipients are the envelope's");
    check_message(&smtp);
    if let Ok(list) = std::str::from_utf8(raw) {
        let _ = address_list(list);
    }
});
