//! The journal as an HTTP Archive (HAR 1.2), the file browser network panels and Charles
//! import: one entry per decision, in journal order, with the verdict in the custom `_af`
//! field. Pure: records in, a document out; `af net log --har` and `af ui` both call [`har`].
//!
//! The journal keeps no headers and no raw bodies, so headers are empty and sizes are the body
//! bytes it counted. What it keeps of a body is a captured request's message (text or HTML,
//! each bounded at 64 KiB by the sidecar): a capture decision carries it as `postData` and
//! names the message records in `_af.messages`. Mock answers are not journaled, so they have
//! no body here.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::time::{Duration, SystemTime};

use af_policy::egress::Mode;
use af_sidecar_api::journal::{DecisionRecord, Entry, MessageRecord, Record};
use hyper::StatusCode;
use serde::Serialize;
use url::Url;

/// The HAR version written.
pub const VERSION: &str = "1.2";

/// A HAR document: `{"log": ...}`.
#[derive(Debug, Clone, Serialize)]
pub struct Har {
    /// The archive.
    pub log: Log,
}

/// The archive: who wrote it and one entry per decision.
#[derive(Debug, Clone, Serialize)]
pub struct Log {
    /// Always [`VERSION`].
    pub version: &'static str,
    /// `af` and its version.
    pub creator: Creator,
    /// One per decision record, in journal order.
    pub entries: Vec<HarEntry>,
}

/// The program that wrote the archive.
#[derive(Debug, Clone, Serialize)]
pub struct Creator {
    /// `af`.
    pub name: &'static str,
    /// Its version.
    pub version: String,
}

/// One request and its answer, with the sidecar's verdict on it.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct HarEntry {
    /// When it was decided, RFC 3339 with milliseconds.
    pub started_date_time: String,
    /// Milliseconds from decision to the end of the answer.
    pub time: f64,
    /// What the service sent.
    pub request: Request,
    /// What it got.
    pub response: Response,
    /// Nothing: the sidecar keeps no cache (HAR requires the object).
    pub cache: Cache,
    /// Where the time went, as far as the journal measured it.
    pub timings: Timings,
    /// The client connection (its source port), as browsers write it.
    pub connection: String,
    /// How the sidecar decided it.
    #[serde(rename = "_af")]
    pub af: Verdict,
}

/// The request half of an entry.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Request {
    /// The method; `CONNECT` for a tunnel or a TLS connection decided on its SNI.
    pub method: String,
    /// The absolute URL.
    pub url: String,
    /// The HTTP version.
    pub http_version: &'static str,
    /// Always empty: the journal keeps no cookies.
    pub cookies: Vec<Pair>,
    /// Always empty: the journal keeps no headers.
    pub headers: Vec<Pair>,
    /// The URL's query, decoded.
    pub query_string: Vec<Pair>,
    /// What the journal kept of the body.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub post_data: Option<PostData>,
    /// -1: not known.
    pub headers_size: i64,
    /// Body bytes sent upstream.
    pub body_size: i64,
}

/// The response half of an entry.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Response {
    /// The status the client got; 0 when none (a closed connection).
    pub status: u16,
    /// The status's reason phrase.
    pub status_text: &'static str,
    /// The HTTP version.
    pub http_version: &'static str,
    /// Always empty.
    pub cookies: Vec<Pair>,
    /// Always empty.
    pub headers: Vec<Pair>,
    /// The body's size (its text is not journaled).
    pub content: Content,
    /// Always empty: the journal keeps no `Location`.
    #[serde(rename = "redirectURL")]
    pub redirect_url: &'static str,
    /// -1: not known.
    pub headers_size: i64,
    /// Body bytes received from upstream.
    pub body_size: i64,
}

/// A name and a value (header, cookie, query parameter).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Pair {
    /// The name.
    pub name: String,
    /// The value.
    pub value: String,
}

/// A request body.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PostData {
    /// Its media type.
    pub mime_type: &'static str,
    /// Its text.
    pub text: String,
    /// Where it came from.
    pub comment: String,
}

/// A response body's description.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Content {
    /// Its size in bytes.
    pub size: i64,
    /// Empty: not journaled.
    pub mime_type: &'static str,
}

/// The cache state, always empty.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Cache {}

/// The phases of an entry in milliseconds, -1 for a phase not measured.
#[derive(Debug, Clone, Serialize)]
pub struct Timings {
    /// Queued.
    pub blocked: f64,
    /// Resolving.
    pub dns: f64,
    /// Connecting.
    pub connect: f64,
    /// Sending.
    pub send: f64,
    /// Waiting for the answer.
    pub wait: f64,
    /// Receiving it.
    pub receive: f64,
    /// TLS handshake.
    pub ssl: f64,
}

/// The custom `_af` field: the decision as the journal has it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Verdict {
    /// The decision's journal position.
    pub seq: u64,
    /// How the decision ended, the journal's `outcome`: `forwarded`, `tunnel`, `answered`,
    /// `refused`, `failed`, `handshake_failed`, `opened` or `closed`.
    pub verdict: &'static str,
    /// The catalogue's mode, absent when refused before deciding.
    pub mode: Option<Mode>,
    /// The rule that decided, or `default`.
    pub rule: String,
    /// Why, as the journal says it.
    pub reason: String,
    /// Which listener saw it.
    pub via: String,
    /// The service's address.
    pub client: SocketAddr,
    /// The refusal's code.
    pub code: Option<String>,
    /// What went wrong.
    pub error: Option<String>,
    /// The journal positions of the messages this request was captured as.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub messages: Vec<u64>,
}

/// The HAR of `records`: an entry per decision (other kinds only lend their bodies),
/// written by `af` at `version`.
pub fn har(records: &[Record], version: &str) -> Har {
    let mut captured = Captured::default();
    let mut entries = Vec::new();
    for record in records {
        match &record.entry {
            Entry::Message(m) => captured.add(record.seq, m),
            Entry::Decision(d) => {
                let messages = match d.mode {
                    Some(Mode::Capture) => captured.take(d),
                    _ => Vec::new(),
                };
                entries.push(entry(record, d, &messages));
            }
            Entry::DnsSighting(_) | Entry::Containment(_) => {}
        }
    }
    Har {
        log: Log {
            version: VERSION,
            creator: Creator {
                name: "af",
                version: version.to_owned(),
            },
            entries,
        },
    }
}

/// Messages journaled and not yet claimed by their decision. The sidecar journals a capture's
/// messages before its decision (the ticket closes when the answer ends), on the same client
/// connection, host and rule; a decision takes every message waiting under that key. Bounded
/// by the records given.
#[derive(Default)]
struct Captured<'a> {
    waiting: HashMap<Connection<'a>, Vec<(u64, &'a MessageRecord)>>,
}

/// The client connection, host and rule a capture's messages and decision share.
type Connection<'a> = (SocketAddr, &'a str, Option<&'a str>);

impl<'a> Captured<'a> {
    fn add(&mut self, seq: u64, m: &'a MessageRecord) {
        if m.via == "capture" {
            let key = (m.client, m.host.as_str(), m.rule.as_deref());
            self.waiting.entry(key).or_default().push((seq, m));
        }
    }

    fn take(&mut self, d: &'a DecisionRecord) -> Vec<(u64, &'a MessageRecord)> {
        let key = (d.client, d.host.as_str(), d.rule.as_deref());
        self.waiting.remove(&key).unwrap_or_default()
    }
}

fn entry(record: &Record, d: &DecisionRecord, messages: &[(u64, &MessageRecord)]) -> HarEntry {
    let took = Duration::from_millis(d.duration_ms);
    let url = url(d);
    let query_string = Url::parse(&url)
        .map(|u| {
            u.query_pairs()
                .map(|(name, value)| Pair {
                    name: name.into_owned(),
                    value: value.into_owned(),
                })
                .collect()
        })
        .unwrap_or_default();
    let status = d.status.unwrap_or(0);
    let request = Request {
        method: method(d).to_owned(),
        url,
        http_version: HTTP_VERSION,
        cookies: Vec::new(),
        headers: Vec::new(),
        query_string,
        post_data: post_data(messages),
        headers_size: -1,
        body_size: size(d.bytes_up),
    };
    let response = Response {
        status,
        status_text: StatusCode::from_u16(status)
            .ok()
            .and_then(|s| s.canonical_reason())
            .unwrap_or(""),
        http_version: HTTP_VERSION,
        cookies: Vec::new(),
        headers: Vec::new(),
        content: Content {
            size: size(d.bytes_down),
            mime_type: "",
        },
        redirect_url: "",
        headers_size: -1,
        body_size: size(d.bytes_down),
    };
    let millis = took.as_secs_f64() * 1000.0;
    HarEntry {
        started_date_time: started(&record.at, took),
        time: millis,
        request,
        response,
        cache: Cache::default(),
        // The journal measures one span, decision to the end of the answer: all of it is
        // `wait`; the phases it does not see are -1, as HAR says for "not applicable".
        timings: Timings {
            blocked: -1.0,
            dns: -1.0,
            connect: -1.0,
            send: 0.0,
            wait: millis,
            receive: 0.0,
            ssl: -1.0,
        },
        connection: d.client.port().to_string(),
        af: Verdict {
            seq: record.seq,
            verdict: d.outcome().as_str(),
            mode: d.mode,
            rule: d.rule.as_deref().unwrap_or("default").to_owned(),
            reason: d.reason.to_string(),
            via: d.via.to_string(),
            client: d.client,
            code: d.code.as_deref().map(str::to_owned),
            error: d.error.clone(),
            messages: messages.iter().map(|(seq, _)| *seq).collect(),
        },
    }
}

/// The journal does not say which HTTP version a request spoke; HAR requires one.
const HTTP_VERSION: &str = "HTTP/1.1";

/// A TLS connection decided on its SNI has no method; it was a connection, like a tunnel.
fn method(d: &DecisionRecord) -> &str {
    if d.method.is_empty() {
        "CONNECT"
    } else {
        &d.method
    }
}

/// The request's URL: `https` for what came over TLS (intercepted, SNI, CONNECT), `smtp` for
/// the mail listener, else `http`; the port only when it is not the scheme's own.
fn url(d: &DecisionRecord) -> String {
    let scheme = match d.via.as_ref() {
        "smtp" => "smtp",
        "intercept" | "tls" => "https",
        _ if method(d) == "CONNECT" || d.tls => "https",
        _ => "http",
    };
    let host = if d.host.contains(':') {
        format!("[{}]", d.host)
    } else {
        d.host.clone()
    };
    let default_port = match scheme {
        "https" => 443,
        "smtp" => 25,
        _ => 80,
    };
    let port = if d.port == default_port || d.port == 0 {
        String::new()
    } else {
        format!(":{}", d.port)
    };
    let path = if d.path.starts_with('/') {
        d.path.as_str()
    } else {
        "/"
    };
    format!("{scheme}://{host}{port}{path}")
}

/// The captured message as the request body: the text when there is one, else the HTML.
fn post_data(messages: &[(u64, &MessageRecord)]) -> Option<PostData> {
    let (_, first) = messages.first()?;
    let (mime, text) = match (&first.message.text, &first.message.html) {
        (Some(text), _) => ("text/plain", text),
        (None, Some(html)) => ("text/html", html),
        (None, None) => return None,
    };
    Some(PostData {
        mime_type: mime,
        text: text.clone(),
        comment: format!(
            "the {} message af captured, not the raw body",
            first.message.provider
        ),
    })
}

fn size(bytes: u64) -> i64 {
    i64::try_from(bytes).unwrap_or(i64::MAX)
}

/// When the request was decided: the record is written when it ends, `took` after.
fn started(at: &str, took: Duration) -> String {
    match humantime::parse_rfc3339(at) {
        Ok(end) => {
            let start = end.checked_sub(took).unwrap_or(SystemTime::UNIX_EPOCH);
            humantime::format_rfc3339_millis(start).to_string()
        }
        Err(_) => at.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use af_sidecar_api::journal::{Message, MessageKind};

    use super::*;

    fn record(seq: u64, entry: Entry) -> Record {
        Record {
            seq,
            at: "2026-11-29T14:03:01.500Z".to_owned(),
            env: "e".to_owned(),
            entry,
        }
    }

    fn client(port: u16) -> SocketAddr {
        SocketAddr::from(([10, 0, 0, 5], port))
    }

    fn capture(port: u16) -> DecisionRecord {
        DecisionRecord {
            via: "intercept".into(),
            client: client(port),
            method: "POST".into(),
            host: "api.sendgrid.com".to_owned(),
            port: 443,
            path: "/v3/mail/send?x=1&y=a%20b".to_owned(),
            mode: Some(Mode::Capture),
            rule: Some("rules[0] api.sendgrid.com".into()),
            reason: "rule".into(),
            status: Some(202),
            bytes_up: 120,
            duration_ms: 1500,
            ..DecisionRecord::default()
        }
    }

    fn mail(port: u16, text: &str) -> MessageRecord {
        MessageRecord {
            via: "capture".to_owned(),
            client: client(port),
            host: "api.sendgrid.com".to_owned(),
            rule: Some("rules[0] api.sendgrid.com".to_owned()),
            message: Message {
                provider: "sendgrid".to_owned(),
                kind: MessageKind::Email,
                from: None,
                to: vec!["ada@example.test".to_owned()],
                subject: Some("Code".to_owned()),
                text: Some(text.to_owned()),
                html: None,
                links: Vec::new(),
                code: None,
            },
        }
    }

    #[test]
    fn a_capture_carries_its_own_message_as_the_body_and_names_it() {
        let records = [
            record(1, Entry::Message(mail(4000, "first"))),
            record(2, Entry::Message(mail(4001, "second"))),
            record(3, Entry::Decision(capture(4001))),
            record(4, Entry::Decision(capture(4000))),
        ];
        let doc = har(&records, "0.1.0");
        let [second, first] = &doc.log.entries[..] else {
            panic!("two entries: {:?}", doc.log.entries);
        };
        assert_eq!(second.af.messages, [2]);
        assert_eq!(first.af.messages, [1]);
        let body = |e: &HarEntry| e.request.post_data.as_ref().map(|p| p.text.clone());
        assert_eq!(body(second).as_deref(), Some("second"));
        assert_eq!(body(first).as_deref(), Some("first"));
    }

    #[test]
    fn an_entry_starts_its_duration_before_the_record_and_keeps_the_query() {
        let doc = har(&[record(9, Entry::Decision(capture(4000)))], "0.1.0");
        let e = &doc.log.entries[0];
        assert_eq!(e.started_date_time, "2026-11-29T14:03:00.000Z");
        assert_eq!(e.time, 1500.0);
        assert_eq!(
            e.request.url,
            "https://api.sendgrid.com/v3/mail/send?x=1&y=a%20b"
        );
        let pairs: Vec<(&str, &str)> = e
            .request
            .query_string
            .iter()
            .map(|q| (q.name.as_str(), q.value.as_str()))
            .collect();
        assert_eq!(pairs, [("x", "1"), ("y", "a b")]);
        assert_eq!(e.response.status_text, "Accepted");
        assert_eq!(e.af.verdict, "answered");
    }

    #[test]
    fn a_refused_tunnel_to_an_ipv6_literal_is_a_connect_entry_with_a_bracketed_url() {
        let refused = DecisionRecord {
            via: "proxy".into(),
            method: "CONNECT".into(),
            host: "::1".to_owned(),
            port: 8443,
            mode: Some(Mode::Block),
            status: Some(403),
            code: Some("AF-NET-010".into()),
            ..DecisionRecord::default()
        };
        let sni = DecisionRecord {
            via: "tls".into(),
            host: "api.x.test".to_owned(),
            port: 443,
            mode: Some(Mode::Allow),
            allowed: true,
            ..DecisionRecord::default()
        };
        let doc = har(
            &[
                record(1, Entry::Decision(refused)),
                record(2, Entry::Decision(sni)),
            ],
            "0.1.0",
        );
        let [refused, sni] = &doc.log.entries[..] else {
            panic!("two entries");
        };
        assert_eq!(refused.request.url, "https://[::1]:8443/");
        assert_eq!(refused.af.verdict, "refused");
        assert_eq!(refused.af.code.as_deref(), Some("AF-NET-010"));
        assert_eq!(refused.af.rule, "default");
        assert_eq!(sni.request.method, "CONNECT");
        assert_eq!(sni.request.url, "https://api.x.test/");
        assert_eq!(sni.response.status, 0, "a closed connection has no status");
        assert_eq!(sni.af.verdict, "tunnel");
    }
}
