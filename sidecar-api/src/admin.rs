//! The sidecar's admin API: what its routes are asked and what they answer.
//!
//! `GET /healthz` (no token) and, with `Authorization: Bearer <token>`: `GET /readyz`
//! ([`Ready`]), `GET /v1/decisions` ([`DecisionsQuery`], a [`Page`]),
//! `GET /v1/decisions/follow` (NDJSON, one [`Record`] a line), `GET /v1/inbox`
//! ([`InboxQuery`], a [`Page`] of messages), `GET /v1/inbox/{seq}` (one [`Record`]),
//! `POST /v1/deliver` ([`Delivery`], answered with [`Delivered`]), `GET /v1/containment`
//! ([`crate::containment::ContainmentPage`]) and `GET /metrics`. A refusal
//! is a [`Refusal`] with a non-2xx status.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::journal::Record;

/// The most records one page holds (`limit` is 1 to this).
pub const MAX_LIMIT: usize = 1000;
/// The records a page holds when `limit` is not given.
pub const DEFAULT_LIMIT: usize = 100;

/// What `GET /v1/decisions` is asked (as its query string); `/v1/decisions/follow` takes
/// `since`, `blocked` and `host` only.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct DecisionsQuery {
    /// Records with a larger sequence number only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub since: Option<u64>,
    /// At most this many records, 1 to [`MAX_LIMIT`], default [`DEFAULT_LIMIT`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<usize>,
    /// The newest `limit` matches (oldest first, like `tail`) rather than the first after
    /// `since`.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub newest: bool,
    /// Only refused decisions (`true`) or only the others (`false`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub blocked: Option<bool>,
    /// Only records about this host.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host: Option<String>,
}

/// What `GET /v1/inbox` is asked (as its query string).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct InboxQuery {
    /// Messages with a larger sequence number only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub since: Option<u64>,
    /// At most this many, the newest; 1 to [`MAX_LIMIT`], default [`DEFAULT_LIMIT`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<usize>,
    /// A case-insensitive substring of some recipient.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub to: Option<String>,
    /// A case-insensitive substring of the subject.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subject: Option<String>,
}

/// One page of `GET /v1/decisions` or `GET /v1/inbox`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Page {
    /// The records, oldest first.
    pub records: Vec<Record>,
    /// The `since` to ask next: a full page resumes after its last record, a short one after
    /// everything committed.
    pub next_since: u64,
    /// The sequence number of the last record on disk.
    pub committed: u64,
    /// What the journal lost since the sidecar started.
    pub losses: JournalLosses,
}

/// Journal losses since the sidecar started.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct JournalLosses {
    /// Dropped because the writer queue was full.
    pub queue_drops: u64,
    /// Removed with evicted segments.
    pub evicted_records: u64,
    /// Segments evicted.
    pub evicted_segments: u64,
    /// Lost to write errors.
    pub write_errors: u64,
}

/// `GET /readyz`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Ready {
    /// Always `true`: the sidecar answers only once it serves.
    pub ready: bool,
    /// The sequence number of the last record on disk.
    pub committed: u64,
}

/// A coded refusal, the body of every error the admin API answers.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Refusal {
    /// The product error code (`AF-NET-021`).
    pub code: String,
    /// What happened, in one sentence.
    pub statement: String,
    /// What to do next.
    pub next: String,
}

/// `POST /v1/deliver`: one HTTP/1.1 request the sidecar sends to one of the environment's
/// services.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Delivery {
    /// The service's name inside the environment (one of `inside.names`).
    pub service: String,
    /// Its port.
    pub port: u16,
    /// The path (with query) to request, from `/`.
    pub path: String,
    /// The method, default [`Delivery::DEFAULT_METHOD`].
    #[serde(default = "Delivery::default_method")]
    pub method: String,
    /// Headers to send.
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
    /// The body, exactly as sent.
    #[serde(default)]
    pub body: String,
}

impl Delivery {
    /// The method when none is given.
    pub const DEFAULT_METHOD: &str = "POST";

    fn default_method() -> String {
        Self::DEFAULT_METHOD.to_owned()
    }
}

/// What the service answered a [`Delivery`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Delivered {
    /// The status code.
    pub status: u16,
    /// The response headers (the last value of each name).
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
    /// The body, as text (lossy UTF-8, at most 1 MiB).
    #[serde(default)]
    pub body: String,
}
