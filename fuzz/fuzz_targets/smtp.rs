//! The SMTP session: any conversation is answered with well-formed replies (CRLF lines, a
//! 2xx-5xx code, an enhanced status code on every 4xx/5xx, readable by smtp-proto's client
//! parser); how TCP cut the input changes nothing; every accepted mail has 1 to
//! `MAX_RECIPIENTS` recipients, is answered with one 250, and keeps the inbox's bounds.
#![no_main]

use af_fuzz::check_message;
use af_proxy::fuzzing::Message;
use af_proxy::fuzzing::smtp::{MAX_RECIPIENTS, Session, Settings, Then};
use libfuzzer_sys::fuzz_target;
use smtp_proto::response::parser::ResponseReceiver;

/// Largest mail accepted in these sessions: small, so the oversize path is reached.
const MAX_MESSAGE_BYTES: usize = 2048;

/// The replies and mails of one conversation fed `step` bytes at a time, as the listener feeds
/// a session (a STARTTLS upgrade restarts it; input after it in the same read is dropped).
fn converse(input: &[u8], step: usize, starttls: bool) -> (Vec<u8>, Vec<Message>) {
    let mut session = Session::new(Settings {
        max_message_bytes: MAX_MESSAGE_BYTES,
        starttls,
    });
    let (mut replies, mut messages) = (Vec::new(), Vec::new());
    for chunk in input.chunks(step) {
        let out = session.feed(chunk);
        replies.extend(out.replies);
        messages.extend(out.messages);
        match out.then {
            Then::Read => {}
            Then::StartTls => session.tls_started(),
            Then::Close => break,
        }
    }
    (replies, messages)
}

/// Panics unless `bytes` is a run of well-formed replies; returns their codes.
fn reply_codes(bytes: &[u8]) -> Vec<u16> {
    assert!(bytes.is_empty() || bytes.ends_with(b"\r\n"), "{bytes:?}");
    for line in bytes.split(|&b| b == b'\n').filter(|l| !l.is_empty()) {
        let text = std::str::from_utf8(line).expect("replies are UTF-8");
        let body = text.strip_suffix('\r').expect("every line ends in CRLF");
        assert!(!body.contains('\r'), "bare CR in {text:?}");
        let code: u16 = body.get(..3).and_then(|c| c.parse().ok()).expect("a code");
        assert!((200..600).contains(&code), "{text:?}");
        let rest = &body[3..];
        assert!(rest.starts_with([' ', '-']), "{text:?}");
        if code >= 400 {
            let esc = rest.as_bytes().get(1..6).unwrap_or_default();
            let class = b'0' + (code / 100) as u8;
            assert!(
                esc.len() == 5 && esc[0] == class && esc[1] == b'.' && esc[3] == b'.',
                "no enhanced status code in {text:?}"
            );
        }
    }
    let mut codes = Vec::new();
    let mut rest = bytes.iter();
    while !rest.as_slice().is_empty() {
        let reply = ResponseReceiver::default()
            .parse(&mut rest)
            .expect("smtp-proto reads every reply");
        codes.push(reply.code);
    }
    codes
}

fuzz_target!(|input: &[u8]| {
    let Some((&flags, input)) = input.split_first() else {
        return;
    };
    let starttls = flags & 0x80 != 0;
    let step = usize::from(flags & 0x3f) + 1;
    let (replies, messages) = converse(input, step, starttls);
    reply_codes(&replies);
    let accepted = replies
        .windows(b"250 2.0.0 Message accepted".len())
        .filter(|w| *w == b"250 2.0.0 Message accepted")
        .count();
    assert_eq!(accepted, messages.len(), "one 250 per accepted mail");
    for message in &messages {
        assert!(
            (1..=MAX_RECIPIENTS).contains(&message.to.len()),
            "{} recipients",
            message.to.len()
        );
        check_message(message);
    }
    if !starttls {
        // Without an upgrade the conversation is one stream, whatever the reads.
        let whole = converse(input, usize::MAX, false);
        assert_eq!(
            whole,
            (replies, messages),
            "the replies depend on how the input was cut"
        );
    }
});
