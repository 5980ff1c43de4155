//! The writer: one thread that owns the segment files, assigns sequence numbers and
//! group-commits (write + fsync per batch), at most once per commit interval. Request tasks
//! never wait for it.

use std::ops::Range;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use bytes::{BufMut, BytesMut};
use tokio::sync::{mpsc, watch};

use super::record::{Entry, Line, rfc3339};
use super::segment::Segments;
use super::tail::{Cached, Tail};
use crate::metrics::Metrics;

/// The batch buffer's first allocation, and the least of every later one: the tail's lines
/// are slices of these buffers, so one is freed once the tail has let go of all its lines.
const BATCH_BUFFER: usize = 64 * 1024;

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
    pub(super) commit_interval: Duration,
    pub(super) tail: Arc<Tail>,
    pub(super) committed: watch::Sender<u64>,
    pub(super) metrics: Arc<Metrics>,
    /// Where each record is encoded before it is appended to the batch: serde_json writes a
    /// record in many small pieces, which a `Vec` takes inline and `BytesMut`'s writer through
    /// a call each (that was the journal's largest cost per request in the keep-alive profile).
    pub(super) scratch: Vec<u8>,
}

impl Writer {
    /// Run until every sender is gone and the queue is drained.
    pub(super) fn run(mut self) {
        let mut batch = Vec::with_capacity(self.batch_max);
        let mut buf = BytesMut::with_capacity(BATCH_BUFFER);
        let mut staged = Vec::with_capacity(self.batch_max);
        while let Some(first) = self.rx.blocking_recv() {
            let began = Instant::now();
            batch.push(first);
            while batch.len() < self.batch_max {
                match self.rx.try_recv() {
                    Ok(p) => batch.push(p),
                    Err(_) => break,
                }
            }
            let full = batch.len() == self.batch_max;
            self.commit(&mut batch, &mut buf, &mut staged);
            // Paced: what arrives meanwhile waits in the queue for the next commit, and its
            // senders wake no one. A full batch is followed at once.
            if !full && let Some(rest) = self.commit_interval.checked_sub(began.elapsed()) {
                std::thread::sleep(rest);
            }
        }
    }

    /// Encode `batch` into `buf`, one line per record, and write it; a record that does not
    /// fit its segment first finishes the segment with the lines before it.
    fn commit(&mut self, batch: &mut Vec<Pending>, buf: &mut BytesMut, staged: &mut Vec<Staged>) {
        buf.clear();
        staged.clear();
        for mut pending in batch.drain(..) {
            let seq = self.next_seq;
            let record = Line {
                seq,
                at: rfc3339(pending.at),
                env: &self.env,
                entry: &pending.entry,
            };
            let start = buf.len();
            self.scratch.clear();
            if let Err(e) = serde_json::to_writer(&mut self.scratch, &record) {
                tracing::error!(error = %e, "journal: could not serialize a record");
                self.metrics.journal_write_error(1);
                continue;
            }
            buf.put_slice(&self.scratch);
            buf.put_u8(b'\n');
            let mut at = start;
            if self.segments.full_for(start, buf.len() - start) {
                // Finish the current segment with what this batch already holds.
                let line = buf.split_off(start);
                self.flush(buf, staged);
                buf.unsplit(line);
                at = 0;
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
            staged.push(Staged {
                seq,
                host: pending.entry.take_host(),
                blocked: pending.entry.blocked(),
                message: matches!(pending.entry, Entry::Message(_)),
                line: at..buf.len() - 1,
            });
        }
        self.flush(buf, staged);
    }

    /// Write and fsync what is buffered, then make it visible to readers: the tail's lines are
    /// slices of the very bytes written, not copies.
    fn flush(&mut self, buf: &mut BytesMut, staged: &mut Vec<Staged>) {
        let Some(last) = staged.last().map(|s| s.seq) else {
            return;
        };
        let n = staged.len() as u64;
        let written = buf.split().freeze();
        match self.segments.write_sync(&written) {
            Ok(()) => {
                self.metrics.journal_written(n);
                self.tail.extend(staged.drain(..).map(|s| Cached {
                    seq: s.seq,
                    host: Some(s.host),
                    blocked: s.blocked,
                    message: s.message,
                    line: written.slice(s.line),
                }));
                self.committed.send_replace(last);
            }
            Err(e) => {
                tracing::error!(error = %e, records = n, "journal: write failed, records lost");
                self.metrics.journal_write_error(n);
                staged.clear();
            }
        }
    }
}

/// A record encoded into the batch buffer, not yet written.
struct Staged {
    seq: u64,
    host: String,
    blocked: Option<bool>,
    message: bool,
    /// Where its line (without the newline) lies in the batch buffer.
    line: Range<usize>,
}
