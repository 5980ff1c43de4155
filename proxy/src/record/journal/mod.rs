//! The durable, bounded journal of every decision.
//!
//! Request tasks hand records to [`Journal::record`], which never waits: the queue to the
//! writer is bounded, and when it is full the record is dropped and counted
//! (`af_proxy_journal_queue_drops_total`, and `losses` in the admin API) rather than slowing
//! traffic. One writer thread numbers records, appends them to size-bounded segment files and
//! fsyncs once per batch; only then does the admin API see them, so a record the API returned
//! survives `kill -9`. Commits are paced (`commit_interval`): under load the records of an
//! interval share one write and one fsync, rather than each waking the writer for its own. When the segments exceed the bound the oldest is removed and counted.

pub(crate) mod reader;
pub(crate) mod record;
pub(crate) mod segment;
mod tail;
mod writer;

use std::collections::VecDeque;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::{Duration, SystemTime};

use bytes::Bytes;
use tokio::sync::{mpsc, watch};

use crate::metrics::Metrics;
pub(crate) use reader::Query;
pub(crate) use record::{DecisionRecord, DnsSighting, Entry, MessageRecord, Outcome};
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
    /// Least time between two commits: a record handed over while the writer waits for it
    /// goes out with the next commit, at most this long after the last.
    pub commit_interval: Duration,
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
    /// Records handed to the writer (not dropped at the queue).
    submitted: AtomicU64,
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
            commit_interval: settings.commit_interval,
            tail: tail.clone(),
            committed: committed_tx,
            metrics: metrics.clone(),
            scratch: Vec::with_capacity(1024),
        };
        let handle = std::thread::Builder::new()
            .name("af-journal".into())
            .spawn(move || writer.run())?;
        Ok((
            Journal {
                tx,
                inner: Arc::new(Inner {
                    dir: settings.dir.clone(),
                    submitted: AtomicU64::new(0),
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
        match self.tx.try_send(pending) {
            Ok(()) => {
                self.inner.submitted.fetch_add(1, Relaxed);
            }
            Err(_) => self.inner.metrics.journal_queue_drop(),
        }
    }

    /// Wait (up to `timeout`) until every record handed over so far is written or counted as
    /// lost, for a clean shutdown.
    pub async fn drain(&self, timeout: Duration) {
        let deadline = tokio::time::Instant::now() + timeout;
        while self.inner.metrics.journal_settled() < self.inner.submitted.load(Relaxed)
            && tokio::time::Instant::now() < deadline
        {
            tokio::time::sleep(Duration::from_millis(5)).await;
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
        if let Some(hit) = self.inner.tail.after(query.since, query.limit, |c| {
            c.seq <= committed && query.keeps_cached(c)
        }) {
            return Ok(hit.into_iter().map(|c| (c.seq, c.line)).collect());
        }
        let dir = self.inner.dir.clone();
        tokio::task::spawn_blocking(move || reader::read_disk(&dir, &query, committed))
            .await
            .map_err(std::io::Error::other)?
    }

    /// The newest `query.limit` committed records matching `query` and `keep` (a filter on
    /// the JSON line), oldest first: what `tail` would show. Reads every match after
    /// `query.since`, a page at a time, keeping only `query.limit` of them.
    pub async fn newest(
        &self,
        query: Query,
        keep: impl Fn(&[u8]) -> bool,
    ) -> std::io::Result<Vec<(u64, Bytes)>> {
        const PAGE: usize = 1000;
        let want = query.limit;
        let mut kept: VecDeque<(u64, Bytes)> = VecDeque::with_capacity(want.min(64));
        let mut page = Query {
            limit: PAGE,
            ..query
        };
        loop {
            let lines = self.query(page.clone()).await?;
            let Some((last, _)) = lines.last() else {
                break;
            };
            page.since = *last;
            let full = lines.len() >= PAGE;
            for (seq, line) in lines.into_iter().filter(|(_, line)| keep(line)) {
                if kept.len() == want {
                    kept.pop_front();
                }
                kept.push_back((seq, line));
            }
            if !full {
                break;
            }
        }
        Ok(kept.into())
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    fn temp_dir(tag: &str) -> PathBuf {
        let nanos = SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos();
        std::env::temp_dir().join(format!("af-journal-{tag}-{}-{nanos}", std::process::id()))
    }

    fn decision(n: u32) -> Entry {
        Entry::Decision(DecisionRecord {
            via: "proxy".into(),
            arrived: None,
            intercepted: false,
            client: "127.0.0.1:5000".parse().unwrap(),
            method: "GET".into(),
            host: format!("h{n}.test"),
            port: 80,
            path: format!("/{n}"),
            tls: false,
            mode: Some(af_policy::egress::Mode::Block),
            rule: Some("default".into()),
            reason: "default".into(),
            allowed: false,
            outcome: Some(super::Outcome::Refused),
            status: Some(403),
            grpc_status: None,
            bytes_up: 0,
            bytes_down: 0,
            duration_ms: 0,
            code: Some("AF-NET-010".into()),
            error: None,
        })
    }

    fn settings(dir: &Path) -> JournalSettings {
        JournalSettings {
            dir: dir.to_owned(),
            segment_bytes: 2048,
            max_segments: 2,
            queue: 1024,
            batch: 8,
            commit_interval: Duration::ZERO,
            tail: 4,
        }
    }

    use std::path::Path;

    #[tokio::test]
    async fn segments_rotate_and_the_oldest_is_evicted_and_counted() {
        let dir = temp_dir("rotate");
        let metrics = Arc::new(Metrics::default());
        let (journal, writer) =
            Journal::start(&settings(&dir), Arc::from("e"), metrics.clone()).unwrap();
        for n in 0..100 {
            journal.record(decision(n));
        }
        journal.drain(Duration::from_secs(5)).await;
        assert_eq!(journal.committed(), 100);
        let segments = segment::list(&dir).unwrap();
        assert!(segments.len() <= 2, "{segments:?}");
        let losses = metrics.journal_losses();
        assert!(losses.evicted_segments > 0 && losses.evicted_records > 0);
        // Read back from disk (the tail holds only 4): contiguous, ending at 100, and exactly
        // the records that were not evicted.
        let query = Query {
            limit: 1000,
            ..Query::default()
        };
        let got = journal.query(query).await.unwrap();
        let seqs: Vec<u64> = got.iter().map(|(s, _)| *s).collect();
        assert_eq!(seqs.last(), Some(&100));
        assert!(seqs.windows(2).all(|w| w[1] == w[0] + 1));
        assert_eq!(seqs.len() as u64 + losses.evicted_records, 100);
        drop(journal);
        writer.join().unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[tokio::test]
    async fn recovery_cuts_a_torn_line_and_continues_the_sequence() {
        let dir = temp_dir("recover");
        let metrics = Arc::new(Metrics::default());
        let (journal, writer) =
            Journal::start(&settings(&dir), Arc::from("e"), metrics.clone()).unwrap();
        for n in 0..5 {
            journal.record(decision(n));
        }
        journal.drain(Duration::from_secs(5)).await;
        drop(journal);
        writer.join().unwrap();
        let last = segment::list(&dir).unwrap().pop().unwrap();
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .open(&last.path)
            .unwrap();
        std::io::Write::write_all(&mut f, b"{\"seq\":6,\"at\":").unwrap();
        drop(f);

        let (journal, writer) = Journal::start(
            &settings(&dir),
            Arc::from("e"),
            Arc::new(Metrics::default()),
        )
        .unwrap();
        assert_eq!(journal.committed(), 5);
        journal.record(decision(5));
        journal.drain(Duration::from_secs(5)).await;
        let query = Query {
            limit: 1000,
            ..Query::default()
        };
        let got = journal.query(query).await.unwrap();
        let seqs: Vec<u64> = got.iter().map(|(s, _)| *s).collect();
        assert_eq!(seqs, [1, 2, 3, 4, 5, 6]);
        let line: serde_json::Value = serde_json::from_slice(&got[5].1).unwrap();
        assert_eq!(line["path"], "/5");
        drop(journal);
        writer.join().unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
