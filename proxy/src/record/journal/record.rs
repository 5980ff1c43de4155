//! What the journal holds: the records of the contract ([`af_sidecar_api::journal`]), one per
//! decision, DNS sighting or captured message, all in the same sequence; the line the writer
//! puts them in; and the fields the admin API filters on.

use std::time::SystemTime;

use humantime::Rfc3339Timestamp;
use serde::{Deserialize, Serialize, Serializer};

pub(crate) use af_sidecar_api::journal::{
    DecisionRecord, DnsSighting, Entry, MessageRecord, Outcome, refused,
};

/// One journal line as the writer serializes it: exactly an
/// [`af_sidecar_api::journal::Record`], borrowing the environment id and the entry.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Line<'a> {
    /// Position in the journal, from 1, never reused.
    pub seq: u64,
    /// When the event happened, RFC 3339 UTC with milliseconds: formatted straight into the
    /// line, not into a `String` first.
    #[serde(serialize_with = "as_text")]
    pub at: Rfc3339Timestamp,
    /// The environment id.
    pub env: &'a str,
    /// The kind-specific fields, tagged by `kind`.
    #[serde(flatten)]
    pub entry: &'a Entry,
}

/// The fields the admin API filters on, read back from a stored line.
#[derive(Debug, Deserialize)]
pub(crate) struct StoredView {
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

/// A time as RFC 3339 UTC with milliseconds (`2026-11-29T14:51:33.123Z`).
pub(crate) fn rfc3339(t: SystemTime) -> Rfc3339Timestamp {
    humantime::format_rfc3339_millis(t)
}

/// Serialize `value` as the string its `Display` writes.
fn as_text<S: Serializer>(value: &Rfc3339Timestamp, serializer: S) -> Result<S::Ok, S::Error> {
    serializer.collect_str(value)
}

#[cfg(test)]
mod tests {
    use super::*;
    use af_sidecar_api::journal::{Message, MessageKind, Record};
    use std::time::{Duration, UNIX_EPOCH};

    #[test]
    fn rfc3339_formats_known_instants() {
        assert_eq!(rfc3339(UNIX_EPOCH).to_string(), "1970-01-01T00:00:00.000Z");
        let t = UNIX_EPOCH + Duration::from_millis(1_795_963_893_123);
        assert_eq!(rfc3339(t).to_string(), "2026-11-29T14:51:33.123Z");
        let leap = UNIX_EPOCH + Duration::from_secs(951_782_400); // 2000-02-29
        assert_eq!(rfc3339(leap).to_string(), "2000-02-29T00:00:00.000Z");
    }

    #[test]
    fn a_written_line_is_the_contracts_record() {
        let message = Entry::Message(MessageRecord {
            via: "smtp".to_owned(),
            client: "127.0.0.1:5000".parse().expect("addr"),
            host: "mail.test".to_owned(),
            rule: None,
            message: Message {
                provider: "smtp".to_owned(),
                kind: MessageKind::Email,
                from: None,
                to: vec!["ada@example.test".to_owned()],
                subject: Some("Hi".to_owned()),
                text: None,
                html: None,
                links: Vec::new(),
                code: None,
            },
        });
        let line = Line {
            seq: 7,
            at: rfc3339(UNIX_EPOCH),
            env: "e",
            entry: &message,
        };
        let text = serde_json::to_string(&line).expect("serializes");
        let read: Record = serde_json::from_str(&text).expect("a contract record");
        assert_eq!((read.seq, read.env.as_str()), (7, "e"));
        assert_eq!(read.entry, message);
        let view: StoredView = serde_json::from_str(&text).expect("a stored view");
        assert_eq!(view.kind.as_deref(), Some("message"));
    }
}
