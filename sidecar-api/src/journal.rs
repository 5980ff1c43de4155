//! The journal's records: one per decision, DNS sighting or captured message, all in one
//! sequence. The sidecar writes each as one JSON line; the admin API returns those lines as
//! they are, so these types are both what is written and what is read.

use std::borrow::Cow;
use std::net::SocketAddr;
use std::sync::Arc;

use af_policy::egress::Mode;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// One journal line: the envelope every kind shares, then the kind's own fields.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Record {
    /// Position in the journal, from 1, never reused.
    pub seq: u64,
    /// When the event happened, RFC 3339 UTC with milliseconds.
    pub at: String,
    /// The environment id.
    pub env: String,
    /// The kind-specific fields, tagged by `kind`.
    #[serde(flatten)]
    pub entry: Entry,
}

/// The kinds of record.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Entry {
    /// A request or connection the sidecar decided.
    Decision(DecisionRecord),
    /// The DNS server saw a name for the first time.
    DnsSighting(DnsSighting),
    /// A message captured by capture mode or the SMTP listener: what `af inbox` shows.
    Message(MessageRecord),
    /// A containment watcher's verdict changed: first heard, lost, or held again.
    Containment(ContainmentRecord),
}

impl Entry {
    /// The decision, when the record is one.
    pub fn as_decision(&self) -> Option<&DecisionRecord> {
        match self {
            Entry::Decision(d) => Some(d),
            Entry::DnsSighting(_) | Entry::Message(_) | Entry::Containment(_) => None,
        }
    }

    /// The containment change, when the record is one.
    pub fn as_containment(&self) -> Option<&ContainmentRecord> {
        match self {
            Entry::Containment(c) => Some(c),
            Entry::Decision(_) | Entry::DnsSighting(_) | Entry::Message(_) => None,
        }
    }

    /// The captured message, when the record is one.
    pub fn as_message(&self) -> Option<&MessageRecord> {
        match self {
            Entry::Message(m) => Some(m),
            Entry::Decision(_) | Entry::DnsSighting(_) | Entry::Containment(_) => None,
        }
    }

    /// The host the record is about (none for a containment change).
    pub fn host(&self) -> &str {
        match self {
            Entry::Decision(d) => &d.host,
            Entry::DnsSighting(s) => &s.host,
            Entry::Message(m) => &m.host,
            Entry::Containment(_) => "",
        }
    }

    /// The host the record is about, taken out of it (left empty): for a writer done with
    /// the record that keeps the host beside its encoded line.
    pub fn take_host(&mut self) -> String {
        match self {
            Entry::Decision(d) => std::mem::take(&mut d.host),
            Entry::DnsSighting(s) => std::mem::take(&mut s.host),
            Entry::Message(m) => std::mem::take(&mut m.host),
            Entry::Containment(_) => String::new(),
        }
    }

    /// Whether the record counts as refused for `blocked=true`: a decision that did not leave
    /// and carries a refusal code (an answer made by mock, capture or synth is not refused).
    /// `None` for the kinds that are not decisions.
    pub fn blocked(&self) -> Option<bool> {
        match self {
            Entry::Decision(d) => Some(d.refused()),
            Entry::DnsSighting(_) | Entry::Message(_) | Entry::Containment(_) => None,
        }
    }
}

/// The canonical decision record.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct DecisionRecord {
    /// Which listener: `proxy`, `transparent`, `tls`, `intercept` (a request inside an
    /// opened TLS connection), `smtp`. Borrowed when the sidecar writes it (no allocation per
    /// request), owned when read back.
    pub via: Cow<'static, str>,
    /// For a request inside an opened TLS connection (`via: intercept`): the listener that
    /// connection arrived on, `proxy` (a CONNECT) or `tls` (the transparent TLS listener,
    /// after DNS gave the sidecar's address). Absent on every other record, and in journals
    /// written before it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub arrived: Option<Cow<'static, str>>,
    /// Whether this is the record of a connection (a CONNECT, a transparent TLS connection)
    /// whose TLS the sidecar opened with a leaf from the environment CA, written when it
    /// closed; each request inside has its own record (`via: intercept`, `arrived` naming
    /// this connection's listener). `false` when absent (journals written before it).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub intercepted: bool,
    /// The client's address.
    pub client: SocketAddr,
    /// Request method; `CONNECT` for tunnels, empty for a TLS connection. Borrowed when the
    /// sidecar writes a standard method, owned when read back.
    pub method: Cow<'static, str>,
    /// The host decided on (lower-case, no trailing dot), empty if none was learned.
    pub host: String,
    /// The destination port (from the listener or the CONNECT authority).
    pub port: u16,
    /// Request path with query, empty for tunnels.
    pub path: String,
    /// Whether the client spoke TLS to the sidecar's TLS listener.
    pub tls: bool,
    /// The catalogue's verdict, absent when the request was refused before deciding.
    pub mode: Option<Mode>,
    /// The rule that decided (`rules[N] host`) or `default`; absent before deciding. Shared
    /// with the sidecar's catalogue when it writes the record (no copy per request).
    pub rule: Option<Arc<str>>,
    /// Why. From the catalogue: `rule`, `default`, `narrowed` (a connection no rule takes whole,
    /// opened for the rule with paths or methods named in `rule`), `invalid-host`,
    /// `non-canonical-path`.
    /// From the sidecar: `guard:<class>`, `mode_unserved`, `resolve`, `connect`, `upstream`,
    /// `tunnel`, `client_gone`, `shutdown`, `loop`, `no_sni`, `not_tls`, `client_hello_timeout`,
    /// `not_proxy_request`, `bad_request`, `bad_port`, `bad_body`, `head_too_large`,
    /// `header_timeout`, `connection_limit`, `client_rejected_certificate` and `intercept` (the
    /// opened TLS failed); `synth_model` for the call synth made to its model
    /// on a request's behalf. Borrowed when the sidecar writes one of these, owned when read
    /// back.
    pub reason: Cow<'static, str>,
    /// Whether the request left the environment (or may have, for one cut short). Kept for
    /// journals and readers that predate `outcome`; `outcome` says how it ended.
    pub allowed: bool,
    /// How the request or connection ended, as the sidecar saw it. Absent in journals written
    /// before it: read it through [`DecisionRecord::outcome`], which derives it then.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outcome: Option<Outcome>,
    /// The HTTP status the client got (200 for an established tunnel), absent for a closed
    /// connection.
    pub status: Option<u16>,
    /// For a gRPC call: the `grpc-status` the server ended it with (from its trailers, or from
    /// its head when it answered at once). Absent for anything else, and in journals written
    /// before it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grpc_status: Option<u16>,
    /// Body (or tunnel) bytes sent upstream.
    pub bytes_up: u64,
    /// Body (or tunnel) bytes received from upstream.
    pub bytes_down: u64,
    /// From decision to the end of the response or tunnel.
    pub duration_ms: u64,
    /// The product error code of a refusal or failure (borrowed from the catalogue when
    /// written).
    pub code: Option<Cow<'static, str>>,
    /// What went wrong, in one sentence.
    pub error: Option<String>,
}

impl Default for DecisionRecord {
    /// An empty record (what a closed ticket keeps once its record is journaled).
    fn default() -> Self {
        Self {
            via: Cow::Borrowed(""),
            arrived: None,
            intercepted: false,
            client: SocketAddr::from(([0, 0, 0, 0], 0)),
            method: Cow::Borrowed(""),
            host: String::new(),
            port: 0,
            path: String::new(),
            tls: false,
            mode: None,
            rule: None,
            reason: Cow::Borrowed(""),
            allowed: false,
            outcome: None,
            status: None,
            grpc_status: None,
            bytes_up: 0,
            bytes_down: 0,
            duration_ms: 0,
            code: None,
            error: None,
        }
    }
}

impl DecisionRecord {
    /// Refused: it did not leave and has a refusal code.
    pub fn refused(&self) -> bool {
        refused(self.allowed, self.code.is_some())
    }

    /// How it ended: as written, or derived for a record written before `outcome` was.
    pub fn outcome(&self) -> Outcome {
        self.outcome.unwrap_or_else(|| Outcome::derived(self))
    }
}

/// How a decided request or connection ended: what the sidecar can truthfully say of it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// Sent out and answered by the upstream (any status).
    Forwarded,
    /// Relayed byte for byte end to end (an untouched CONNECT or TLS tunnel): the tunnel was
    /// established and closed; what happened inside it (its TLS handshake, its requests) is
    /// not known to the sidecar. A CONNECT's status 200 means only "tunnel established".
    Tunnel,
    /// Answered inside the environment by mock, capture or synth: nothing left.
    Answered,
    /// Refused with a code before anything left.
    Refused,
    /// Allowed out, then the upstream, the tunnel or the client's body failed (coded).
    Failed,
    /// The sidecar opened the connection's TLS with a leaf of the environment CA, and the
    /// handshake failed or the client refused the certificate (coded); no request was made.
    HandshakeFailed,
    /// A connection opened for interception has closed; each request inside it has its own
    /// record (`via: intercept`).
    Opened,
    /// Ended before it was answered: the client went away, or the sidecar's drain deadline
    /// cut it (`reason` says which).
    Closed,
}

impl Outcome {
    /// The name in the journal: `forwarded`, `tunnel`, `answered`, ...
    pub const fn as_str(self) -> &'static str {
        match self {
            Outcome::Forwarded => "forwarded",
            Outcome::Tunnel => "tunnel",
            Outcome::Answered => "answered",
            Outcome::Refused => "refused",
            Outcome::Failed => "failed",
            Outcome::HandshakeFailed => "handshake_failed",
            Outcome::Opened => "opened",
            Outcome::Closed => "closed",
        }
    }

    /// The outcome of a record written before `outcome` was, from what it does say:
    /// `intercepted`, `allowed`, `code`, `reason`, `status` and the method.
    fn derived(d: &DecisionRecord) -> Self {
        let ended_early = matches!(d.reason.as_ref(), "client_gone" | "shutdown");
        let handshake = matches!(
            d.reason.as_ref(),
            "client_rejected_certificate" | "intercept"
        );
        let tunnel = d.method == "CONNECT" || (d.via == "tls" && d.method.is_empty());
        match (d.allowed, d.code.is_some()) {
            _ if d.intercepted => Outcome::Opened,
            _ if ended_early => Outcome::Closed,
            (false, true) if handshake => Outcome::HandshakeFailed,
            (false, true) => Outcome::Refused,
            (false, false) if d.status.is_some() => Outcome::Answered,
            (false, false) => Outcome::Closed,
            (true, true) => Outcome::Failed,
            (true, false) if tunnel => Outcome::Tunnel,
            (true, false) => Outcome::Forwarded,
        }
    }
}

impl std::fmt::Display for Outcome {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Whether a decision was refused: it did not leave (`allowed`) and has a refusal code
/// (`coded`).
pub fn refused(allowed: bool, coded: bool) -> bool {
    !allowed && coded
}

/// A DNS name seen for the first time (written by the DNS server through the same journal).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct DnsSighting {
    /// Always `dns`.
    pub via: String,
    /// The client's address.
    pub client: SocketAddr,
    /// The name queried.
    pub host: String,
    /// The query type (A, AAAA, ...).
    pub qtype: String,
    /// How the DNS server answered: `outside`, `inside`, `localhost`, `refused`, `failed`.
    pub answer: String,
    /// The mode the catalogue gives this host (decided for port 443).
    pub mode: Mode,
    /// The rule that gives it, or `default`.
    pub rule: String,
}

/// A containment watcher's verdict, journaled when it changes: the first report of a pod's
/// watcher, containment lost (`held: false`, with what got through), or held again.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ContainmentRecord {
    /// The pod whose watcher reported.
    pub pod: String,
    /// Whether every layer was in force and every way out held.
    pub held: bool,
    /// What got through, when not held.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub breaches: Vec<crate::containment::Breach>,
}

/// A captured message and where it came from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct MessageRecord {
    /// `capture` (an API call answered by capture mode) or `smtp`.
    pub via: String,
    /// The client's address.
    pub client: SocketAddr,
    /// The host the message was sent to (the API host, or the SMTP server name).
    pub host: String,
    /// The rule that decided, when the catalogue was asked.
    pub rule: Option<String>,
    /// The message.
    pub message: Message,
}

/// What kind of message a capture was.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum MessageKind {
    /// An email (mail APIs, SMTP).
    Email,
    /// A text message (Twilio Messages).
    Sms,
    /// A chat message (Slack incoming webhooks) or any other captured request.
    Message,
}

impl MessageKind {
    /// The name in the journal: `email`, `sms`, `message`.
    pub const fn as_str(self) -> &'static str {
        match self {
            MessageKind::Email => "email",
            MessageKind::Sms => "sms",
            MessageKind::Message => "message",
        }
    }
}

/// One captured message, as the inbox lists it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Message {
    /// Who it was sent through: `sendgrid`, `resend`, `postmark`, `mailgun`, `twilio`, `ses`,
    /// `slack`, `smtp`, or `request` for a host captured without a provider handler.
    pub provider: String,
    /// Email, SMS or chat message.
    pub kind: MessageKind,
    /// The sender, as given.
    pub from: Option<String>,
    /// Every recipient (to, cc, bcc), as given.
    pub to: Vec<String>,
    /// The subject, for mail.
    pub subject: Option<String>,
    /// The plain-text body, at most 64 KiB (cut at a character boundary and marked
    /// `[truncated by af]`).
    pub text: Option<String>,
    /// The HTML body, bounded as `text` is.
    pub html: Option<String>,
    /// Links found in the whole bodies: verification and login links first, unsubscribe last.
    pub links: Vec<String>,
    /// The first 4 to 8 digit run in the subject or text that is not a year (a one-time code).
    pub code: Option<String>,
}

impl Message {
    /// Whether some recipient contains `to` and the subject contains `subject`, ignoring case,
    /// as `GET /v1/inbox` filters; a filter that is `None` matches everything.
    pub fn matches(&self, to: Option<&str>, subject: Option<&str>) -> bool {
        let to_matches = to.is_none_or(|want| self.to.iter().any(|have| contains(have, want)));
        let subject_matches = subject.is_none_or(|want| {
            self.subject
                .as_deref()
                .is_some_and(|have| contains(have, want))
        });
        to_matches && subject_matches
    }
}

fn contains(haystack: &str, needle: &str) -> bool {
    haystack
        .to_lowercase()
        .contains(needle.to_lowercase().as_str())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_record_reads_back_as_written_with_its_kind_tag() {
        let record = Record {
            seq: 3,
            at: "2026-11-29T14:51:33.123Z".to_owned(),
            env: "e".to_owned(),
            entry: Entry::Decision(DecisionRecord {
                via: "proxy".into(),
                client: SocketAddr::from(([127, 0, 0, 1], 5000)),
                host: "x.test".to_owned(),
                mode: Some(Mode::Block),
                code: Some("AF-NET-010".into()),
                ..DecisionRecord::default()
            }),
        };
        let line = serde_json::to_string(&record).expect("serializes");
        assert!(line.contains(r#""kind":"decision""#), "{line}");
        assert!(line.contains(r#""client":"127.0.0.1:5000""#), "{line}");
        assert!(line.contains(r#""mode":"block""#), "{line}");
        let read: Record = serde_json::from_str(&line).expect("reads back");
        assert_eq!(read, record);
        assert_eq!(read.entry.blocked(), Some(true));
        assert_eq!(read.entry.host(), "x.test");
    }

    #[test]
    fn a_decision_written_before_arrived_and_intercepted_reads_without_them() {
        let old = r#"{"seq":1,"at":"2026-11-29T14:51:33.123Z","env":"e","kind":"decision","via":"intercept","client":"127.0.0.1:5000","method":"GET","host":"x.test","port":443,"path":"/","tls":true,"mode":"mock","rule":"default","reason":"default","allowed":false,"status":200,"bytes_up":0,"bytes_down":2,"duration_ms":1,"code":null,"error":null}"#;
        let read: Record = serde_json::from_str(old).expect("an old line reads");
        let d = read.entry.as_decision().expect("a decision");
        assert_eq!((d.arrived.as_deref(), d.intercepted), (None, false));
        // And a new one carries both only when they say something.
        let inside = DecisionRecord {
            via: "intercept".into(),
            arrived: Some("tls".into()),
            ..DecisionRecord::default()
        };
        let line = serde_json::to_string(&inside).expect("serializes");
        assert!(line.contains(r#""arrived":"tls""#), "{line}");
        assert!(!line.contains("intercepted"), "{line}");
    }

    #[test]
    fn a_decision_written_before_outcome_derives_it_from_what_it_says() {
        let old = |fields: &str| -> Outcome {
            let line = format!(
                r#"{{"via":"proxy","client":"127.0.0.1:5000","host":"x.test","port":443,"path":"","tls":false,"mode":null,"rule":null,"bytes_up":0,"bytes_down":0,"duration_ms":1,"error":null,{fields}}}"#
            );
            let d: DecisionRecord = serde_json::from_str(&line).expect("an old line reads");
            assert_eq!(d.outcome, None, "{line}");
            d.outcome()
        };
        let coded = r#""code":"AF-NET-010""#;
        let uncoded = r#""code":null"#;
        let cases = [
            (
                format!(r#""method":"GET","reason":"rule","allowed":false,"status":403,{coded}"#),
                Outcome::Refused,
            ),
            (
                format!(r#""method":"GET","reason":"rule","allowed":false,"status":200,{uncoded}"#),
                Outcome::Answered,
            ),
            (
                format!(
                    r#""method":"GET","reason":"client_rejected_certificate","allowed":false,"status":200,{coded}"#
                ),
                Outcome::HandshakeFailed,
            ),
            (
                format!(r#""method":"GET","reason":"rule","allowed":true,"status":200,{uncoded}"#),
                Outcome::Forwarded,
            ),
            (
                format!(
                    r#""method":"GET","reason":"upstream","allowed":true,"status":502,{coded}"#
                ),
                Outcome::Failed,
            ),
            (
                format!(
                    r#""method":"GET","reason":"client_gone","allowed":true,"status":null,{uncoded}"#
                ),
                Outcome::Closed,
            ),
            (
                format!(
                    r#""method":"GET","reason":"rule","allowed":false,"status":200,"intercepted":true,{uncoded}"#
                ),
                Outcome::Opened,
            ),
        ];
        let tunnel =
            format!(r#""method":"CONNECT","reason":"rule","allowed":true,"status":200,{uncoded}"#);
        for (fields, want) in cases.into_iter().chain([(tunnel, Outcome::Tunnel)]) {
            assert_eq!(old(&fields), want, "{fields}");
        }
    }

    #[test]
    fn an_outcome_is_written_snake_case_and_wins_over_the_derivation() {
        let d = DecisionRecord {
            method: "CONNECT".into(),
            allowed: false,
            code: Some("AF-NET-045".into()),
            reason: "client_rejected_certificate".into(),
            outcome: Some(Outcome::HandshakeFailed),
            ..DecisionRecord::default()
        };
        let line = serde_json::to_string(&d).expect("serializes");
        assert!(line.contains(r#""outcome":"handshake_failed""#), "{line}");
        let written = DecisionRecord {
            outcome: Some(Outcome::Answered),
            ..d
        };
        assert_eq!(written.outcome(), Outcome::Answered);
    }
}
