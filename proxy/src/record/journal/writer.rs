//! The writer: one thread that owns the segment files, assigns sequence numbers and
//! group-commits (write + fsync per batch). Request tasks never wait for it.

use std::sync::Arc;
use std::time::SystemTime;

use bytes::Bytes;
use tokio::sync::{mpsc, watch};

use super::record::{Entry, Line, rfc3339};
use super::segment::Segments;
use super::tail::{Cached, Tail};
use crate::metrics::Metrics;

/// A record handed to the writer, not yet numbered.
pub(super) struct Pending {
    /// When the event happened.
    pub at: SystemTime,
    /// The record.
    pub entry: Entry,
}

/// Everything the writer thread owns.
pub(super) struct Writer {
    pub(super) rx: mpsc::Receiver<Pending>,
    pub(super) segments: Segments,
    pub(super) next_seq: u64,
    pub(super) env: Arc<str>,
    pub(super) batch_max: usize,
    pub(super) tail: Arc<Tail>,
    pub(super) committed: watch::Sender<u64>,
    pub(super) metrics: Arc<Metrics>,
}

impl Writer {
    /// Run until every sender is gone and the queue is drained.
    pub(super) fn run(mut self) {
        let mut batch = Vec::with_capacity(self.batch_max);
        let mut buf = Vec::with_capacity(64 * 1024);
        let mut cached = Vec::with_capacity(self.batch_max);
        while let Some(first) = self.rx.blocking_recv() {
            batch.push(first);
            while batch.len() < self.batch_max {
                match self.rx.try_recv() {
                    Ok(p) => batch.push(p),
                    Err(_) => break,
                }
            }
            self.commit(&mut batch, &mut buf, &mut cached);
        }
    }

    fn commit(&mut self, batch: &mut Vec<Pending>, buf: &mut Vec<u8>, cached: &mut Vec<Cached>) {
        buf.clear();
        cached.clear();
        let mut last_seq = None;
        for pending in batch.drain(..) {
            let seq = self.next_seq;
            let record = Line {
                seq,
                at: rfc3339(pending.at),
                env: &self.env,
                entry: &pending.entry,
            };
            let mut line = match serde_json::to_vec(&record) {
                Ok(line) => line,
                Err(e) => {
                    tracing::error!(error = %e, "journal: could not serialize a record");
                    self.metrics.journal_write_error(1);
                    continue;
                }
            };
            line.push(b'\n');
            if self.segments.full_for(buf.len(), line.len()) {
                // Finish the current segment with what this batch already holds.
                if !self.flush(buf, cached, &mut last_seq) {
                    return;
                }
                match self.segments.rotate(seq) {
                    Ok(evicted) => {
                        for n in evicted {
                            self.metrics.journal_evicted(n);
                        }
                    }
                    Err(e) => tracing::error!(error = %e, "journal: could not rotate segments"),
                }
            }
            self.next_seq += 1;
            let blocked = pending.entry.blocked();
            let host = Some(Box::from(pending.entry.host()));
            buf.extend_from_slice(&line);
            line.pop();
            cached.push(Cached {
                seq,
                host,
                blocked,
                message: matches!(pending.entry, Entry::Message(_)),
                line: Bytes::from(line),
            });
        }
        self.flush(buf, cached, &mut last_seq);
    }

    /// Write and fsync what is buffered, then make it visible to readers.
    fn flush(
        &mut self,
        buf: &mut Vec<u8>,
        cached: &mut Vec<Cached>,
        last: &mut Option<u64>,
    ) -> bool {
        if cached.is_empty() {
            return true;
        }
        let n = cached.len() as u64;
        match self.segments.write_sync(buf) {
            Ok(()) => {
                *last = cached.last().map(|c| c.seq);
                self.metrics.journal_written(n);
                self.tail.extend(cached.drain(..));
                if let Some(seq) = *last {
                    self.committed.send_replace(seq);
                }
                buf.clear();
                true
            }
            Err(e) => {
                tracing::error!(error = %e, records = n, "journal: write failed, records lost");
                self.metrics.journal_write_error(n);
                buf.clear();
                cached.clear();
                true
            }
        }
    }
}
