//! The newest committed records, kept in memory so `follow` and recent queries do not read
//! the disk. Only records already fsynced are ever put here.

use std::collections::VecDeque;
use std::sync::Mutex;

use bytes::Bytes;

/// One committed record and the fields the admin API filters on.
#[derive(Debug, Clone)]
pub struct Cached {
    /// Sequence number.
    pub seq: u64,
    /// Host, for the `host=` filter.
    pub host: Option<String>,
    /// Refused decision (`Some(true)`), allowed decision, or not a decision.
    pub blocked: Option<bool>,
    /// Whether the record is a captured message (for the inbox).
    pub message: bool,
    /// The JSON line, without its newline.
    pub line: Bytes,
}

/// A bounded window of the newest records.
pub(super) struct Tail {
    cap: usize,
    records: Mutex<VecDeque<Cached>>,
}

impl Tail {
    /// An empty window holding at most `cap` records.
    pub(super) fn new(cap: usize) -> Self {
        Self {
            cap,
            records: Mutex::new(VecDeque::with_capacity(cap.min(4096))),
        }
    }

    /// Append committed records, evicting the oldest.
    pub(super) fn extend(&self, new: impl Iterator<Item = Cached>) {
        let mut records = self.records.lock().unwrap_or_else(|p| p.into_inner());
        for c in new {
            if records.len() == self.cap {
                records.pop_front();
            }
            records.push_back(c);
        }
    }

    /// Records after `since` that `keep` accepts, at most `limit`; `None` when the window does
    /// not reach back to `since` (the caller reads the disk instead).
    pub(super) fn after(
        &self,
        since: u64,
        limit: usize,
        keep: impl Fn(&Cached) -> bool,
    ) -> Option<Vec<Cached>> {
        let records = self.records.lock().unwrap_or_else(|p| p.into_inner());
        let first = records.front()?.seq;
        if first > since.saturating_add(1) {
            return None;
        }
        let start = records.partition_point(|c| c.seq <= since);
        Some(
            records
                .range(start..)
                .filter(|c| keep(c))
                .take(limit)
                .cloned()
                .collect(),
        )
    }
}
