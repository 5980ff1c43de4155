//! The SMTP conversation as a state machine over bytes, with no I/O: the listener feeds what it
//! read and writes back what [`Session::feed`] returns. Commands are parsed by `smtp-proto`,
//! the mail body is dot-unstuffed by its data receiver, and replies are written by its
//! generators.
//!
//! Replies carry RFC 3463 enhanced status codes. Input after STARTTLS or QUIT in the same read
//! is discarded, so no command can be smuggled across the TLS upgrade.

use std::borrow::Cow;
use std::slice::Iter;

use smtp_proto::request::receiver::{DataReceiver, DummyDataReceiver};
use smtp_proto::{
    AUTH_LOGIN, AUTH_PLAIN, EXT_8BIT_MIME, EXT_AUTH, EXT_ENHANCED_STATUS_CODES, EXT_PIPELINING,
    EXT_SIZE, EXT_START_TLS, EhloResponse, Error as ParseError, MailFrom, RcptTo, Request,
    Response,
};

use super::SERVER_NAME;
use super::mail::{self, Envelope};
use crate::record::message::Message;

/// Longest command line accepted, CRLF included (RFC 5321 text lines; commands are shorter).
pub(crate) const MAX_LINE_BYTES: usize = 1000;

/// Most recipients of one mail (RFC 5321 asks servers to take at least 100).
pub const MAX_RECIPIENTS: usize = 100;

/// The line ending SMTP uses.
const CRLF: &[u8] = b"\r\n";

/// The AUTH LOGIN prompts, base64 of `Username:` and `Password:`.
const LOGIN_USERNAME: &str = "VXNlcm5hbWU6";
const LOGIN_PASSWORD: &str = "UGFzc3dvcmQ6";

/// What a session is allowed to offer.
#[derive(Debug, Clone, Copy)]
pub struct Settings {
    /// Largest mail accepted, in bytes after dot-unstuffing.
    pub max_message_bytes: usize,
    /// Whether STARTTLS is offered (the sidecar has the environment CA).
    pub starttls: bool,
}

/// What the listener does after writing `Output::replies`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Then {
    /// Read more input.
    Read,
    /// Start TLS on the connection, then call [`Session::tls_started`].
    StartTls,
    /// Close the connection.
    Close,
}

/// The result of feeding input to a session.
#[derive(Debug)]
pub struct Output {
    /// Reply lines to send, in order.
    pub replies: Vec<u8>,
    /// Mails accepted (each already answered 250 in `replies`).
    pub messages: Vec<Message>,
    /// What to do next.
    pub then: Then,
}

/// Where the conversation is.
enum Phase {
    /// Reading command lines.
    Commands,
    /// Reading the mail after DATA.
    Data(Body),
    /// The mail outgrew the limit: reading to its end without keeping it.
    Oversize(DummyDataReceiver),
    /// AUTH waiting for the client's next line; credentials are read and dropped, never kept.
    Auth(AuthStep),
}

/// The lines an AUTH exchange still expects.
#[derive(Clone, Copy)]
enum AuthStep {
    /// PLAIN without an initial response: the credentials line.
    PlainCredentials,
    /// LOGIN: the username line.
    LoginUsername,
    /// LOGIN: the password line.
    LoginPassword,
}

/// One SMTP conversation.
pub struct Session {
    settings: Settings,
    phase: Phase,
    /// A command line read in part.
    line: Vec<u8>,
    /// The current line is over [`MAX_LINE_BYTES`]; the rest of it is dropped.
    overlong: bool,
    greeted: bool,
    authenticated: bool,
    tls: bool,
    envelope: Option<Envelope>,
}

/// A mail being received: smtp-proto's data receiver and the dot-unstuffed bytes so far.
struct Body {
    receiver: DataReceiver,
    bytes: Vec<u8>,
}

impl Body {
    /// The receiver sees a line start only after a CRLF it was fed; the CRLF that ended the
    /// DATA command is that one, so it is fed first and left out of the mail.
    fn new() -> Self {
        let mut receiver = DataReceiver::new();
        let mut bytes = Vec::new();
        receiver.ingest(&mut CRLF.iter(), &mut bytes);
        Self { receiver, bytes }
    }

    /// Take mail bytes; true once the end-of-data line has been read.
    fn ingest(&mut self, input: &mut Iter<'_, u8>) -> bool {
        self.receiver.ingest(input, &mut self.bytes)
    }

    /// The mail so far.
    fn mail(&self) -> &[u8] {
        self.bytes.get(CRLF.len()..).unwrap_or_default()
    }
}

impl Session {
    /// A new conversation; send [`Session::greeting`] first.
    pub fn new(settings: Settings) -> Self {
        Self {
            settings,
            phase: Phase::Commands,
            line: Vec::new(),
            overlong: false,
            greeted: false,
            authenticated: false,
            tls: false,
            envelope: None,
        }
    }

    /// The 220 greeting that opens the conversation.
    pub fn greeting() -> Vec<u8> {
        format!("220 {SERVER_NAME} ESMTP af-proxy ready\r\n").into_bytes()
    }

    /// The 421 line sent when a client stays silent too long.
    pub fn idle_reply() -> Vec<u8> {
        reply(
            421,
            [4, 4, 2],
            "No command arrived in time, closing the connection.",
        )
    }

    /// TLS is now active: forget everything learned before it, as RFC 3207 requires.
    pub fn tls_started(&mut self) {
        *self = Self {
            tls: true,
            ..Self::new(self.settings)
        };
    }

    /// Process `input`; the returned replies answer every complete command in it.
    pub fn feed(&mut self, mut input: &[u8]) -> Output {
        let mut out = Output {
            replies: Vec::new(),
            messages: Vec::new(),
            then: Then::Read,
        };
        while !input.is_empty() && out.then == Then::Read {
            input = match self.phase {
                Phase::Data(_) | Phase::Oversize(_) => self.feed_data(input, &mut out),
                Phase::Commands | Phase::Auth(_) => self.feed_line(input, &mut out),
            };
        }
        out
    }

    /// Buffer input up to the end of one line and handle it; returns the rest.
    fn feed_line<'a>(&mut self, input: &'a [u8], out: &mut Output) -> &'a [u8] {
        let end = input.iter().position(|&b| b == b'\n');
        let (chunk, rest) = match end {
            Some(at) => input.split_at(at + 1),
            None => (input, &[][..]),
        };
        if !self.overlong {
            if self.line.len() + chunk.len() > MAX_LINE_BYTES {
                self.overlong = true;
                self.line.clear();
            } else {
                self.line.extend_from_slice(chunk);
            }
        }
        if end.is_some() {
            let line = std::mem::take(&mut self.line);
            if std::mem::take(&mut self.overlong) {
                self.phase = Phase::Commands;
                out.replies.extend(reply(
                    500,
                    [5, 5, 2],
                    &format!("The line is longer than {MAX_LINE_BYTES} bytes; it was ignored."),
                ));
            } else {
                self.line_complete(&line, out);
            }
        }
        rest
    }

    fn line_complete(&mut self, line: &[u8], out: &mut Output) {
        match self.phase {
            Phase::Auth(step) => self.auth_continue(step, line, out),
            _ => match Request::parse(&mut line.iter()) {
                Ok(request) => self.command(request, out),
                Err(e) => out.replies.extend(parse_error_reply(&e)),
            },
        }
    }

    fn command(&mut self, request: Request<Cow<'_, str>>, out: &mut Output) {
        let replies = &mut out.replies;
        match request {
            Request::Ehlo { .. } => {
                self.greeted = true;
                self.envelope = None;
                replies.extend(self.ehlo_reply());
            }
            Request::Helo { .. } => {
                self.greeted = true;
                self.envelope = None;
                replies.extend(reply(250, [2, 0, 0], SERVER_NAME));
            }
            Request::StartTls => replies.extend(self.starttls(&mut out.then)),
            Request::Auth {
                mechanism,
                initial_response,
            } => replies.extend(self.auth(mechanism, &initial_response)),
            Request::Mail { from } => replies.extend(self.mail(from)),
            Request::Rcpt { to } => replies.extend(self.rcpt(to)),
            Request::Data => replies.extend(self.data()),
            Request::Rset => {
                self.envelope = None;
                replies.extend(reply(250, [2, 0, 0], "Reset."));
            }
            Request::Noop { .. } => replies.extend(reply(250, [2, 0, 0], "OK.")),
            Request::Quit => {
                replies.extend(reply(221, [2, 0, 0], "Bye."));
                out.then = Then::Close;
            }
            Request::Lhlo { .. }
            | Request::Bdat { .. }
            | Request::Vrfy { .. }
            | Request::Expn { .. }
            | Request::Help { .. }
            | Request::Etrn { .. }
            | Request::Atrn { .. }
            | Request::Burl { .. } => replies.extend(reply(
                502,
                [5, 5, 1],
                &format!("{} is not implemented here.", request.name()),
            )),
        }
    }

    fn ehlo_reply(&self) -> Vec<u8> {
        let mut ehlo = EhloResponse::new(SERVER_NAME);
        ehlo.capabilities =
            EXT_AUTH | EXT_SIZE | EXT_8BIT_MIME | EXT_PIPELINING | EXT_ENHANCED_STATUS_CODES;
        if self.settings.starttls && !self.tls {
            ehlo.capabilities |= EXT_START_TLS;
        }
        ehlo.auth_mechanisms = AUTH_PLAIN | AUTH_LOGIN;
        ehlo.size = self.settings.max_message_bytes;
        let mut bytes = Vec::new();
        // Writing to a Vec cannot fail.
        let _ = ehlo.write(&mut bytes);
        bytes
    }

    fn starttls(&mut self, then: &mut Then) -> Vec<u8> {
        if !self.settings.starttls {
            return reply(
                502,
                [5, 5, 1],
                "STARTTLS is not offered: the sidecar has no environment CA.",
            );
        }
        if self.tls {
            return reply(503, [5, 5, 1], "TLS is already active.");
        }
        if let Some(refusal) = self.needs_greeting() {
            return refusal;
        }
        *then = Then::StartTls;
        reply(220, [2, 0, 0], "Ready to start TLS.")
    }

    /// Any mechanism we offer succeeds: services configure SMTP credentials and we accept any.
    fn auth(&mut self, mechanism: u64, initial_response: &str) -> Vec<u8> {
        if let Some(refusal) = self.needs_greeting() {
            return refusal;
        }
        if self.authenticated {
            return reply(503, [5, 5, 1], "Already authenticated.");
        }
        if self.envelope.is_some() {
            return reply(
                503,
                [5, 5, 1],
                "AUTH is not allowed during a mail transaction.",
            );
        }
        let next = match (mechanism, initial_response.is_empty()) {
            (AUTH_PLAIN, false) => None,
            (AUTH_PLAIN, true) => Some(AuthStep::PlainCredentials),
            (AUTH_LOGIN, true) => Some(AuthStep::LoginUsername),
            (AUTH_LOGIN, false) => Some(AuthStep::LoginPassword),
            _ => {
                return reply(504, [5, 5, 4], "Only AUTH PLAIN and LOGIN are supported.");
            }
        };
        match next {
            Some(step) => {
                self.phase = Phase::Auth(step);
                challenge(step)
            }
            None => self.auth_succeeded(),
        }
    }

    fn auth_continue(&mut self, step: AuthStep, line: &[u8], out: &mut Output) {
        self.phase = Phase::Commands;
        if line.trim_ascii() == b"*" {
            out.replies
                .extend(reply(501, [5, 0, 0], "Authentication cancelled."));
            return;
        }
        match step {
            AuthStep::LoginUsername => {
                self.phase = Phase::Auth(AuthStep::LoginPassword);
                out.replies.extend(challenge(AuthStep::LoginPassword));
            }
            AuthStep::PlainCredentials | AuthStep::LoginPassword => {
                out.replies.extend(self.auth_succeeded());
            }
        }
    }

    fn auth_succeeded(&mut self) -> Vec<u8> {
        self.authenticated = true;
        reply(235, [2, 7, 0], "Authentication succeeded.")
    }

    fn mail(&mut self, from: MailFrom<Cow<'_, str>>) -> Vec<u8> {
        if let Some(refusal) = self.needs_greeting() {
            return refusal;
        }
        if self.envelope.is_some() {
            return reply(
                503,
                [5, 5, 1],
                "A mail transaction is already open; send RSET first.",
            );
        }
        if from.size > self.settings.max_message_bytes {
            return self.too_large();
        }
        self.envelope = Some(Envelope {
            from: from.address.into_owned(),
            to: Vec::new(),
        });
        reply(250, [2, 1, 0], "Sender OK.")
    }

    fn rcpt(&mut self, to: RcptTo<Cow<'_, str>>) -> Vec<u8> {
        let Some(envelope) = self.envelope.as_mut() else {
            return reply(503, [5, 5, 1], "Send MAIL FROM first.");
        };
        if to.address.is_empty() {
            return reply(501, [5, 1, 3], "The recipient address is empty.");
        }
        if envelope.to.len() >= MAX_RECIPIENTS {
            return reply(
                452,
                [4, 5, 3],
                &format!("Too many recipients; at most {MAX_RECIPIENTS} per mail."),
            );
        }
        envelope.to.push(to.address.into_owned());
        reply(250, [2, 1, 5], "Recipient OK.")
    }

    fn data(&mut self) -> Vec<u8> {
        match &self.envelope {
            None => reply(503, [5, 5, 1], "Send MAIL FROM first."),
            Some(envelope) if envelope.to.is_empty() => {
                reply(503, [5, 5, 1], "Send RCPT TO first.")
            }
            Some(_) => {
                self.phase = Phase::Data(Body::new());
                b"354 Start mail input; end with <CRLF>.<CRLF>\r\n".to_vec()
            }
        }
    }

    /// Take mail bytes up to the end-of-data line; returns the rest.
    fn feed_data<'a>(&mut self, input: &'a [u8], out: &mut Output) -> &'a [u8] {
        let mut bytes = input.iter();
        let ended = match &mut self.phase {
            Phase::Data(body) => {
                let ended = body.ingest(&mut bytes);
                if !ended && body.mail().len() > self.settings.max_message_bytes {
                    // Keep reading to the end of data, but stop keeping the mail.
                    self.phase = Phase::Oversize(DummyDataReceiver::new_data(&body.receiver));
                }
                ended
            }
            Phase::Oversize(receiver) => receiver.ingest(&mut bytes),
            Phase::Commands | Phase::Auth(_) => return input,
        };
        if ended {
            let answer = self.end_of_data(out);
            out.replies.extend(answer);
        }
        bytes.as_slice()
    }

    /// The mail ended: accept it, or refuse it if it outgrew the limit.
    fn end_of_data(&mut self, out: &mut Output) -> Vec<u8> {
        let phase = std::mem::replace(&mut self.phase, Phase::Commands);
        let max = self.settings.max_message_bytes;
        match (phase, self.envelope.take()) {
            (Phase::Data(body), Some(envelope)) if body.mail().len() <= max => {
                match mail::message(&envelope, body.mail()) {
                    Ok(message) => {
                        out.messages.push(message);
                        reply(250, [2, 0, 0], "Message accepted.")
                    }
                    Err(e) => reply(554, [5, 6, 0], &format!("The mail was refused: {e}.")),
                }
            }
            _ => self.too_large(),
        }
    }

    fn too_large(&self) -> Vec<u8> {
        reply(
            552,
            [5, 3, 4],
            &format!(
                "The message is larger than the {} bytes this server accepts.",
                self.settings.max_message_bytes
            ),
        )
    }

    fn needs_greeting(&self) -> Option<Vec<u8>> {
        (!self.greeted).then(|| reply(503, [5, 5, 1], "Send EHLO or HELO first."))
    }
}

fn challenge(step: AuthStep) -> Vec<u8> {
    let prompt = match step {
        AuthStep::PlainCredentials => "",
        AuthStep::LoginUsername => LOGIN_USERNAME,
        AuthStep::LoginPassword => LOGIN_PASSWORD,
    };
    // 334 carries a base64 challenge, never an enhanced status code.
    format!("334 {prompt}\r\n").into_bytes()
}

/// One reply line with an enhanced status code.
fn reply(code: u16, status: [u8; 3], text: &str) -> Vec<u8> {
    let mut bytes = Vec::new();
    // Writing to a Vec cannot fail.
    let _ = Response::new(code, status[0], status[1], status[2], text).write(&mut bytes);
    bytes
}

/// The reply to a line smtp-proto could not parse.
fn parse_error_reply(e: &ParseError) -> Vec<u8> {
    match e {
        ParseError::UnknownCommand => reply(500, [5, 5, 1], "Command not recognized."),
        ParseError::InvalidSenderAddress => {
            reply(501, [5, 1, 7], "The sender address is not valid.")
        }
        ParseError::InvalidRecipientAddress => {
            reply(501, [5, 1, 3], "The recipient address is not valid.")
        }
        ParseError::SyntaxError { syntax } => {
            reply(501, [5, 5, 2], &format!("Syntax error; expected {syntax}."))
        }
        ParseError::InvalidParameter { param } => reply(
            501,
            [5, 5, 4],
            &format!("The {param} parameter is not valid."),
        ),
        ParseError::UnsupportedParameter { param } => reply(
            555,
            [5, 5, 4],
            &format!("The parameter {} is not supported.", printable(param)),
        ),
        ParseError::NeedsMoreData { .. }
        | ParseError::ResponseTooLong
        | ParseError::InvalidResponse { .. } => reply(
            501,
            [5, 5, 2],
            "Syntax error; the command could not be read.",
        ),
    }
}

/// Client text made safe to echo in a reply line: printable ASCII, at most 64 characters.
fn printable(text: &str) -> String {
    text.chars()
        .filter(|c| c.is_ascii_graphic())
        .take(64)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use smtp_proto::response::parser::ResponseReceiver;

    const MAX: usize = 2048;

    fn session(starttls: bool) -> Session {
        Session::new(Settings {
            max_message_bytes: MAX,
            starttls,
        })
    }

    /// Check that `bytes` is a run of well-formed replies and return them, in order. Each line
    /// ends in CRLF, starts with a 2xx-5xx code and a separator; every 4xx and 5xx carries an
    /// enhanced status code of its class; smtp-proto's client parser reads them all.
    fn parse_replies(bytes: &[u8]) -> Vec<Response<String>> {
        assert!(bytes.is_empty() || bytes.ends_with(b"\r\n"), "{bytes:?}");
        for line in bytes.split(|&b| b == b'\n').filter(|l| !l.is_empty()) {
            let text = std::str::from_utf8(line).expect("replies are UTF-8");
            let body = text.strip_suffix('\r').expect("every line ends in CRLF");
            assert!(!body.contains('\r'), "bare CR in {text:?}");
            let (code, rest) = body.split_at(3);
            let code: u16 = code.parse().expect("a three-digit code");
            assert!((200..600).contains(&code), "{text:?}");
            assert!(rest.starts_with([' ', '-']), "{text:?}");
            if code >= 400 {
                let class = char::from(b'0' + (code / 100) as u8);
                let esc = rest.get(1..6).unwrap_or_default();
                assert!(
                    esc.starts_with(class)
                        && esc.as_bytes()[1] == b'.'
                        && esc.as_bytes()[3] == b'.',
                    "no enhanced status code in {text:?}"
                );
            }
        }
        let mut parsed = Vec::new();
        let mut rest = bytes.iter();
        while !rest.as_slice().is_empty() {
            let reply = ResponseReceiver::default()
                .parse(&mut rest)
                .expect("smtp-proto reads the reply");
            parsed.push(reply);
        }
        parsed
    }

    fn codes(out: &Output) -> Vec<u16> {
        parse_replies(&out.replies).iter().map(|r| r.code).collect()
    }

    fn feed_all(s: &mut Session, input: &str) -> Output {
        s.feed(input.as_bytes())
    }

    const MAIL: &str = concat!(
        "EHLO client.test\r\n",
        "MAIL FROM:<app@shop.test> SIZE=200\r\n",
        "RCPT TO:<ana@example.test>\r\n",
        "RCPT TO:<bo@example.test>\r\n",
        "DATA\r\n",
        "From: Shop <app@shop.test>\r\n",
        "Subject: Hi\r\n",
        "\r\n",
        "..a line starting with a dot\r\n",
        "code 123456\r\n",
        ".\r\n",
        "QUIT\r\n",
    );

    #[test]
    fn a_pipelined_conversation_is_answered_in_order_and_yields_one_message() {
        let mut s = session(false);
        let out = feed_all(&mut s, MAIL);
        assert_eq!(codes(&out), [250, 250, 250, 250, 354, 250, 221]);
        assert_eq!(out.then, Then::Close);
        let [m] = &out.messages[..] else {
            panic!("one message: {:?}", out.messages)
        };
        assert_eq!(m.from.as_deref(), Some("Shop <app@shop.test>"));
        assert_eq!(m.to, ["ana@example.test", "bo@example.test"]);
        assert_eq!(m.subject.as_deref(), Some("Hi"));
        assert_eq!(
            m.text.as_deref(),
            Some(".a line starting with a dot\ncode 123456")
        );
    }

    #[test]
    fn ehlo_advertises_the_extensions_and_starttls_only_when_offered_and_not_active() {
        let ehlo = |s: &mut Session| {
            let out = feed_all(s, "EHLO c\r\n");
            let [reply] = &parse_replies(&out.replies)[..] else {
                panic!("one reply")
            };
            assert_eq!(reply.code, 250);
            reply.message.clone()
        };
        let offered = ehlo(&mut session(true));
        for ext in [
            "STARTTLS",
            "AUTH PLAIN LOGIN",
            &format!("SIZE {MAX}"),
            "8BITMIME",
            "PIPELINING",
            "ENHANCEDSTATUSCODES",
        ] {
            assert!(offered.lines().any(|l| l == ext), "{ext} in {offered:?}");
        }
        assert!(!ehlo(&mut session(false)).contains("STARTTLS"));
        let mut upgraded = session(true);
        upgraded.tls_started();
        assert!(!ehlo(&mut upgraded).contains("STARTTLS"));
    }

    #[test]
    fn starttls_stops_reading_and_drops_input_sent_after_it() {
        let mut s = session(true);
        let out = feed_all(&mut s, "EHLO c\r\nSTARTTLS\r\nMAIL FROM:<evil@x.test>\r\n");
        assert_eq!(codes(&out), [250, 220]);
        assert_eq!(out.then, Then::StartTls);
        s.tls_started();
        // The smuggled MAIL was dropped, and the greeting must be repeated inside TLS.
        let out = feed_all(&mut s, "MAIL FROM:<a@x.test>\r\nEHLO c\r\nSTARTTLS\r\n");
        assert_eq!(codes(&out), [503, 250, 503]);
        let out = feed_all(&mut session(false), "EHLO c\r\nSTARTTLS\r\n");
        assert_eq!(codes(&out), [250, 502]);
        assert_eq!(out.then, Then::Read);
    }

    #[test]
    fn out_of_order_and_unknown_commands_get_5xx_and_the_session_goes_on() {
        let mut s = session(false);
        let out = feed_all(
            &mut s,
            concat!(
                "MAIL FROM:<a@x.test>\r\n",
                "HELO c\r\n",
                "RCPT TO:<b@x.test>\r\n",
                "DATA\r\n",
                "MAIL FROM:<a@x.test>\r\n",
                "DATA\r\n",
                "MAIL FROM:<a@x.test>\r\n",
                "FROB\r\n",
                "MAIL FROM:a@x.test\r\n",
                "RCPT TO:<b@x.test> FOO=1\r\n",
                "VRFY b\r\n",
                "\r\n",
                "RSET\r\n",
                "NOOP\r\n",
            ),
        );
        assert_eq!(
            codes(&out),
            [
                503, 250, 503, 503, 250, 503, 503, 500, 501, 555, 502, 500, 250, 250
            ]
        );
        assert!(out.messages.is_empty());
    }

    #[test]
    fn auth_plain_and_login_succeed_with_any_credentials() {
        let mut s = session(false);
        let out = feed_all(
            &mut s,
            "EHLO c\r\nAUTH PLAIN AHVzZXIAcGFzcw==\r\nAUTH PLAIN\r\n",
        );
        assert_eq!(codes(&out), [250, 235, 503]);
        let mut s = session(false);
        let out = feed_all(&mut s, "EHLO c\r\nAUTH LOGIN\r\ndXNlcg==\r\ncGFzcw==\r\n");
        assert_eq!(codes(&out), [250, 334, 334, 235]);
        let prompts = parse_replies(&out.replies);
        assert_eq!(prompts[1].message, LOGIN_USERNAME);
        assert_eq!(prompts[2].message, LOGIN_PASSWORD);
        let mut s = session(false);
        let out = feed_all(
            &mut s,
            "EHLO c\r\nAUTH PLAIN\r\n*\r\nAUTH CRAM-MD5\r\nAUTH LOGIN dXNlcg==\r\ncGFzcw==\r\n",
        );
        assert_eq!(codes(&out), [250, 334, 501, 504, 334, 235]);
    }

    #[test]
    fn an_oversize_mail_is_refused_and_the_next_one_is_accepted() {
        let mut s = session(false);
        let big = "x".repeat(100);
        let mut body = String::from("Subject: big\r\n\r\n");
        while body.len() <= MAX {
            body.push_str(&big);
            body.push_str("\r\n");
        }
        let declared = format!("EHLO c\r\nMAIL FROM:<a@x.test> SIZE={}\r\n", MAX + 1);
        assert_eq!(codes(&feed_all(&mut s, &declared)), [250, 552]);
        let out = feed_all(
            &mut s,
            &format!("MAIL FROM:<a@x.test>\r\nRCPT TO:<b@x.test>\r\nDATA\r\n{body}.\r\n"),
        );
        assert_eq!(codes(&out), [250, 250, 354, 552]);
        assert!(out.messages.is_empty());
        let out = feed_all(
            &mut s,
            "MAIL FROM:<a@x.test>\r\nRCPT TO:<b@x.test>\r\nDATA\r\nSubject: small\r\n\r\nok\r\n.\r\n",
        );
        assert_eq!(codes(&out), [250, 250, 354, 250]);
        assert_eq!(out.messages.len(), 1);
    }

    #[test]
    fn recipients_are_capped_at_one_hundred() {
        let mut s = session(false);
        let mut input = String::from("EHLO c\r\nMAIL FROM:<a@x.test>\r\n");
        for i in 0..=MAX_RECIPIENTS {
            input.push_str(&format!("RCPT TO:<r{i}@x.test>\r\n"));
        }
        let codes = codes(&feed_all(&mut s, &input));
        assert_eq!(codes.len(), MAX_RECIPIENTS + 3);
        assert!(codes[2..MAX_RECIPIENTS + 2].iter().all(|&c| c == 250));
        assert_eq!(codes.last(), Some(&452));
    }

    #[test]
    fn an_overlong_line_is_refused_once_and_the_session_goes_on() {
        let mut s = session(false);
        let long = format!("NOOP {}\r\n", "a".repeat(MAX_LINE_BYTES));
        let out = feed_all(&mut s, &format!("{long}NOOP\r\n"));
        assert_eq!(codes(&out), [500, 250]);
        let [first, _] = &parse_replies(&out.replies)[..] else {
            panic!("two replies")
        };
        assert_eq!(first.esc, [5, 5, 2]);
    }

    #[test]
    fn data_without_headers_is_refused_with_554() {
        let mut s = session(false);
        let out = feed_all(
            &mut s,
            "EHLO c\r\nMAIL FROM:<a@x.test>\r\nRCPT TO:<b@x.test>\r\nDATA\r\n.\r\n",
        );
        assert_eq!(codes(&out), [250, 250, 250, 354, 554]);
        assert!(out.messages.is_empty());
    }

    proptest! {
        #[test]
        fn any_split_of_the_input_gives_the_same_conversation(cuts in proptest::collection::vec(0..MAIL.len(), 0..12)) {
            let whole = feed_all(&mut session(false), MAIL);
            let mut cuts = cuts;
            cuts.sort_unstable();
            let mut s = session(false);
            let (mut replies, mut messages, mut start) = (Vec::new(), Vec::new(), 0);
            for end in cuts.into_iter().chain([MAIL.len()]) {
                let out = s.feed(&MAIL.as_bytes()[start..end]);
                replies.extend(out.replies);
                messages.extend(out.messages);
                start = end;
            }
            prop_assert_eq!(replies, whole.replies);
            prop_assert_eq!(messages, whole.messages);
        }

        #[test]
        fn arbitrary_lines_never_panic_and_get_well_formed_replies(
            lines in proptest::collection::vec(
                prop_oneof![
                    "(EHLO|HELO|MAIL FROM:|RCPT TO:|DATA|RSET|NOOP|AUTH|STARTTLS|VRFY|BDAT|\\.)[ -~]{0,40}",
                    proptest::collection::vec(any::<u8>(), 0..80)
                        .prop_map(|b| String::from_utf8_lossy(&b).into_owned()),
                ],
                1..40,
            ),
            starttls in any::<bool>(),
        ) {
            let mut s = session(starttls);
            for line in lines {
                let out = s.feed(format!("{line}\r\n").as_bytes());
                parse_replies(&out.replies);
                if out.then == Then::StartTls {
                    s.tls_started();
                }
            }
        }
    }
}
