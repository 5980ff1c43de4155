//! What the journal holds: one record per decision, DNS sighting or (next issue) captured
//! message, all in the same sequence.

use std::net::SocketAddr;
use std::time::SystemTime;

use serde::{Deserialize, Serialize};

use crate::message::Message;

/// One journal line: the envelope every kind shares, then the kind's own fields.
#[derive(Debug, Clone, Serialize)]
pub struct Record<'a> {
    /// Position in the journal, from 1, never reused.
    pub seq: u64,
    /// When the event happened, RFC 3339 UTC with milliseconds.
    pub at: String,
    /// The environment id.
    pub env: &'a str,
    /// The kind-specific fields, tagged by `kind`.
    #[serde(flatten)]
    pub entry: &'a Entry,
}

/// The kinds of record. New kinds (captured messages) are new variants.
#[derive(Debug, Clone, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Entry {
    /// A request or connection the sidecar decided.
    Decision(DecisionRecord),
    /// The DNS server saw a name for the first time.
    DnsSighting(DnsSighting),
    /// A message captured by capture mode or the SMTP listener: what `af inbox` shows.
    Message(MessageRecord),
}

impl Entry {
    /// Whether the record counts as refused for `blocked=true`: a decision that did not leave
    /// and carries a refusal code (an answer made by mock, capture or synth is not refused).
    pub fn blocked(&self) -> Option<bool> {
        match self {
            Entry::Decision(d) => Some(refused(d.allowed, d.code.is_some())),
            Entry::DnsSighting(_) | Entry::Message(_) => None,
        }
    }
}

/// The canonical decision record.
#[derive(Debug, Clone, Serialize)]
pub struct DecisionRecord {
    /// Which listener: `proxy`, `transparent`, `tls` (later `dns`, `inspect`).
    pub via: &'static str,
    /// The client's address.
    pub client: SocketAddr,
    /// Request method; `CONNECT` for tunnels, empty for a TLS connection.
    pub method: String,
    /// The host decided on (lower-case, no trailing dot), empty if none was learned.
    pub host: String,
    /// The destination port (from the listener or the CONNECT authority).
    pub port: u16,
    /// Request path with query, empty for tunnels.
    pub path: String,
    /// Whether the client spoke TLS to the sidecar's TLS listener.
    pub tls: bool,
    /// The catalogue's verdict, absent when the request was refused before deciding.
    pub mode: Option<&'static str>,
    /// The rule that decided (`rules[N] host`) or `default`; absent before deciding.
    pub rule: Option<String>,
    /// Why. From the catalogue: `rule`, `default`, `invalid-host`, `non-canonical-path`.
    /// From the sidecar: `guard:<class>`, `mode_unserved`, `resolve`, `connect`, `upstream`,
    /// `tunnel`, `client_gone`, `shutdown`, `loop`, `no_sni`, `not_tls`, `client_hello_timeout`,
    /// `not_proxy_request`, `bad_request`, `bad_port`, `bad_body`, `head_too_large`, `header_timeout`,
    /// `connection_limit`; `synth_model` for the call synth made to its model on a request's
    /// behalf.
    pub reason: String,
    /// Whether the request left the environment.
    pub allowed: bool,
    /// The HTTP status the client got (200 for an established tunnel), absent for a closed
    /// connection.
    pub status: Option<u16>,
    /// Body (or tunnel) bytes sent upstream.
    pub bytes_up: u64,
    /// Body (or tunnel) bytes received from upstream.
    pub bytes_down: u64,
    /// From decision to the end of the response or tunnel.
    pub duration_ms: u64,
    /// The product error code of a refusal or failure.
    pub code: Option<&'static str>,
    /// What went wrong, in one sentence.
    pub error: Option<String>,
}

impl Default for DecisionRecord {
    /// An empty record (what a closed ticket keeps once its record is journaled).
    fn default() -> Self {
        Self {
            via: "",
            client: SocketAddr::from(([0, 0, 0, 0], 0)),
            method: String::new(),
            host: String::new(),
            port: 0,
            path: String::new(),
            tls: false,
            mode: None,
            rule: None,
            reason: String::new(),
            allowed: false,
            status: None,
            bytes_up: 0,
            bytes_down: 0,
            duration_ms: 0,
            code: None,
            error: None,
        }
    }
}

/// A DNS name seen for the first time (written by the DNS server through the same journal).
#[derive(Debug, Clone, Serialize)]
pub struct DnsSighting {
    /// Always `dns`.
    pub via: &'static str,
    /// The client's address.
    pub client: SocketAddr,
    /// The name queried.
    pub host: String,
    /// The query type (A, AAAA, ...).
    pub qtype: String,
    /// How the DNS server answered (af-dns `AnswerKind`: outside, inside, localhost, ...).
    pub answer: String,
    /// The mode the catalogue gives this host (decided for port 443).
    pub mode: &'static str,
    /// The rule that gives it, or `default`.
    pub rule: String,
}

/// A captured message and where it came from.
#[derive(Debug, Clone, Serialize)]
pub struct MessageRecord {
    /// `capture` (an API call answered by capture mode) or `smtp`.
    pub via: &'static str,
    /// The client's address.
    pub client: SocketAddr,
    /// The host the message was sent to (the API host, or the SMTP server name).
    pub host: String,
    /// The rule that decided, when the catalogue was asked.
    pub rule: Option<String>,
    /// The message.
    pub message: Message,
}

/// Whether a decision was refused: it did not leave and has a refusal code.
pub fn refused(allowed: bool, coded: bool) -> bool {
    !allowed && coded
}

/// The fields the admin API filters on, read back from a stored line.
#[derive(Debug, Deserialize)]
pub struct StoredView {
    /// Sequence number.
    pub seq: u64,
    /// Host, if the kind has one.
    #[serde(default)]
    pub host: Option<String>,
    /// Allowed, for decisions.
    #[serde(default)]
    pub allowed: Option<bool>,
    /// The refusal or failure code, for decisions.
    #[serde(default)]
    pub code: Option<String>,
    /// The record's kind (`decision`, `dns_sighting`, `message`).
    #[serde(default)]
    pub kind: Option<String>,
}

/// Format a time as RFC 3339 UTC with milliseconds (`2026-11-29T14:51:33.123Z`).
pub fn rfc3339(t: SystemTime) -> String {
    humantime::format_rfc3339_millis(t).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, UNIX_EPOCH};

    #[test]
    fn rfc3339_formats_known_instants() {
        assert_eq!(rfc3339(UNIX_EPOCH), "1970-01-01T00:00:00.000Z");
        let t = UNIX_EPOCH + Duration::from_millis(1_795_963_893_123);
        assert_eq!(rfc3339(t), "2026-11-29T14:51:33.123Z");
        let leap = UNIX_EPOCH + Duration::from_secs(951_782_400); // 2000-02-29
        assert_eq!(rfc3339(leap), "2000-02-29T00:00:00.000Z");
    }
}
