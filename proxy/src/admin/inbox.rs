//! `GET /v1/inbox` and `GET /v1/inbox/{seq}`: the captured messages, read from the journal
//! (so the inbox survives a restart and is bounded with it).
//!
//! `since`, `limit` (1 to 1000, default 100), `to` and `subject` (case-insensitive substrings
//! of any recipient and of the subject). The answer has the shape of `/v1/decisions`; when more
//! messages match than `limit`, the newest are returned, oldest first, and `next_since` is the
//! committed position (so `af inbox wait` resumes after everything it has seen).

use af_policy::error::{Report, codes};
use af_sidecar_api::admin::{DEFAULT_LIMIT, MAX_LIMIT};
use bytes::Bytes;
use serde::Deserialize;

use crate::record::journal::{Journal, Query};

/// What `/v1/inbox` was asked for.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct InboxQuery {
    /// Only messages after this sequence number.
    pub since: u64,
    /// At most this many (the newest).
    pub limit: usize,
    /// A substring of some recipient.
    pub to: Option<String>,
    /// A substring of the subject.
    pub subject: Option<String>,
}

/// The fields the filters read from a stored message record.
#[derive(Deserialize)]
struct StoredMessage {
    message: StoredFields,
}

#[derive(Deserialize)]
struct StoredFields {
    #[serde(default)]
    to: Vec<String>,
    #[serde(default)]
    subject: Option<String>,
}

impl InboxQuery {
    /// Parse the query string; unknown or bad parameters are refused.
    pub(crate) fn parse(query: &str) -> Result<Self, Report> {
        let mut q = InboxQuery {
            limit: DEFAULT_LIMIT,
            ..InboxQuery::default()
        };
        let pairs: Vec<(String, String)> = serde_urlencoded::from_str(query).map_err(|e| {
            bad(&format!(
                "The query string {query:?} could not be read: {e}."
            ))
        })?;
        for (name, value) in pairs {
            match name.as_str() {
                "since" => {
                    q.since = value
                        .parse()
                        .map_err(|_| bad(&format!("since={value:?} is not a sequence number.")))?;
                }
                "limit" => {
                    q.limit = value
                        .parse()
                        .ok()
                        .filter(|n| (1..=MAX_LIMIT).contains(n))
                        .ok_or_else(|| bad(&format!("limit={value:?} is not 1 to {MAX_LIMIT}.")))?;
                }
                "to" if !value.is_empty() => q.to = Some(value.to_lowercase()),
                "subject" if !value.is_empty() => q.subject = Some(value.to_lowercase()),
                _ => {
                    return Err(bad(&format!(
                        "{name}={value:?} is not an inbox parameter (since, limit, to, subject)."
                    )));
                }
            }
        }
        Ok(q)
    }

    fn keeps(&self, line: &[u8]) -> bool {
        if self.to.is_none() && self.subject.is_none() {
            return true;
        }
        let Ok(stored) = serde_json::from_slice::<StoredMessage>(line) else {
            return false;
        };
        let m = stored.message;
        let to_ok = self
            .to
            .as_deref()
            .is_none_or(|want| m.to.iter().any(|t| t.to_lowercase().contains(want)));
        let subject_ok = self.subject.as_deref().is_none_or(|want| {
            m.subject
                .as_deref()
                .is_some_and(|s| s.to_lowercase().contains(want))
        });
        to_ok && subject_ok
    }
}

fn bad(statement: &str) -> Report {
    Report::new(&codes::NET_ADMIN_BAD_REQUEST, statement).with_next("Correct the parameter named.")
}

/// The newest matching messages after `q.since`, oldest first.
pub(crate) async fn messages(
    journal: &Journal,
    q: &InboxQuery,
) -> std::io::Result<Vec<(u64, Bytes)>> {
    let query = Query {
        since: q.since,
        limit: q.limit,
        messages_only: true,
        ..Query::default()
    };
    journal.newest(query, |line| q.keeps(line)).await
}

/// The message with sequence number `seq`, if it is one and still in the journal.
pub(crate) async fn message(journal: &Journal, seq: u64) -> std::io::Result<Option<Bytes>> {
    let query = Query {
        since: seq.saturating_sub(1),
        limit: 1,
        messages_only: true,
        ..Query::default()
    };
    let lines = journal.query(query).await?;
    Ok(lines
        .into_iter()
        .find(|(found, _)| *found == seq)
        .map(|(_, line)| line))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parameters_parse_and_filters_match_substrings() {
        let q = InboxQuery::parse("to=Alice%40Example.test&subject=Verify&limit=5").expect("ok");
        assert_eq!(q.to.as_deref(), Some("alice@example.test"));
        assert_eq!(q.limit, 5);
        let line = br#"{"seq":3,"kind":"message","message":{"to":["alice@example.test"],"subject":"Please verify your email"}}"#;
        assert!(q.keeps(line));
        let other = br#"{"seq":4,"kind":"message","message":{"to":["bob@example.test"],"subject":"Verify"}}"#;
        assert!(!q.keeps(other));
        for bad in ["limit=0", "since=x", "colour=red"] {
            let err = InboxQuery::parse(bad).err();
            assert!(err.is_some_and(|e| e.code.code == "AF-NET-021"), "{bad}");
        }
    }
}
