//! The durable, bounded journal of every decision.
//!
//! Request tasks hand records to [`Journal::record`], which never waits: the queue to the
//! writer is bounded, and when it is full the record is dropped and counted
//! (`af_proxy_journal_queue_drops_total`, and `losses` in the admin API) rather than slowing
//! traffic. One writer thread numbers records, appends them to size-bounded segment files and
//! fsyncs once per batch; only then does the admin API see them, so a record the API returned
//! survives `kill -9`. When the segments exceed the bound the oldest is removed and counted.

pub mod reader;
pub mod record;
pub mod segment;
mod tail;
mod writer;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::SystemTime;

use bytes::Bytes;
use tokio::sync::{mpsc, watch};

use crate::metrics::Metrics;
pub use reader::Query;
pub use record::{DecisionRecord, DnsSighting, Entry};
use tail::Tail;
use writer::{Pending, Writer};

/// How the journal is bounded.
#[derive(Debug, Clone)]
pub struct JournalSettings {
    /// Where the segments live.
    pub dir: PathBuf,
    /// Size at which a segment is closed and a new one started.
    pub segment_bytes: u64,
    /// Segments kept; the oldest beyond this is removed.
    pub max_segments: usize,
    /// Records the queue to the writer holds before dropping.
    pub queue: usize,
    /// Records per group commit at most.
    pub batch: usize,
    /// Newest records kept in memory for the admin API.
    pub tail: usize,
}

/// The handle request tasks and the admin API use. Cheap to clone.
#[derive(Clone)]
pub struct Journal {
    tx: mpsc::Sender<Pending>,
    inner: Arc<Inner>,
}

struct Inner {
    dir: PathBuf,
    tail: Arc<Tail>,
    committed: watch::Receiver<u64>,
    metrics: Arc<Metrics>,
}

impl Journal {
    /// Recover the segments in `settings.dir` and start the writer thread.
    pub fn start(
        settings: &JournalSettings,
        env: Arc<str>,
        metrics: Arc<Metrics>,
    ) -> std::io::Result<(Journal, std::thread::JoinHandle<()>)> {
        let recovered = segment::Segments::recover(
            &settings.dir,
            settings.segment_bytes,
            settings.max_segments,
        )?;
        let (tx, rx) = mpsc::channel(settings.queue);
        let (committed_tx, committed_rx) = watch::channel(recovered.next_seq - 1);
        let tail = Arc::new(Tail::new(settings.tail));
        let writer = Writer {
            rx,
            segments: recovered.segments,
            next_seq: recovered.next_seq,
            env,
            batch_max: settings.batch,
            tail: tail.clone(),
            committed: committed_tx,
            metrics: metrics.clone(),
        };
        let handle = std::thread::Builder::new()
            .name("af-journal".into())
            .spawn(move || writer.run())?;
        Ok((
            Journal {
                tx,
                inner: Arc::new(Inner {
                    dir: settings.dir.clone(),
                    tail,
                    committed: committed_rx,
                    metrics,
                }),
            },
            handle,
        ))
    }

    /// Hand a record to the writer without waiting; a full queue drops and counts it.
    pub fn record(&self, entry: Entry) {
        let pending = Pending {
            at: SystemTime::now(),
            entry,
        };
        if self.tx.try_send(pending).is_err() {
            self.inner.metrics.journal_queue_drop();
        }
    }

    /// The highest sequence number committed to disk.
    pub fn committed(&self) -> u64 {
        *self.inner.committed.borrow()
    }

    /// A receiver that changes whenever a batch commits.
    pub fn subscribe(&self) -> watch::Receiver<u64> {
        self.inner.committed.clone()
    }

    /// Committed records matching `query`, oldest first: sequence number and JSON line.
    pub async fn query(&self, query: Query) -> std::io::Result<Vec<(u64, Bytes)>> {
        let committed = self.committed();
        if let Some(hit) = self
            .inner
            .tail
            .after(query.since, query.limit, |c| c.seq <= committed && query.keeps_cached(c))
        {
            return Ok(hit.into_iter().map(|c| (c.seq, c.line)).collect());
        }
        let dir = self.inner.dir.clone();
        tokio::task::spawn_blocking(move || reader::read_disk(&dir, &query, committed))
            .await
            .map_err(std::io::Error::other)?
    }
}
