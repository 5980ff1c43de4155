//! First sightings of (name, type): remembered in a bounded set and handed to the embedding
//! program's observer on its own thread, so a slow observer never delays an answer.
//!
//! Bounds: the seen set holds at most `seen_capacity` pairs (a 64-bit keyed hash each, about
//! 16 bytes; 1 MiB at the default); when full, the oldest pair is forgotten, so a pair may be reported again later.
//! At most `sighting_queue` sightings wait for the observer; when that queue is full the new
//! sighting is dropped, counted, and not remembered, so its next query reports it again.

use std::{
    collections::{HashSet, VecDeque},
    hash::{BuildHasher, RandomState},
    net::SocketAddr,
    sync::{
        Arc, Mutex,
        mpsc::{Receiver, SyncSender, TrySendError, sync_channel},
    },
};

use hickory_proto::rr::{LowerName, RecordType};

use crate::metrics::Metrics;

/// How a query was answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum AnswerKind {
    /// As an outside name: the sidecar's address for `A`/`AAAA`, empty for other types.
    Outside,
    /// From the runtime's resolver, every address inside (or empty for non-address types).
    Inside,
    /// Locally, as `localhost`.
    Localhost,
    /// Refused: a class other than IN, an opcode other than QUERY, or not exactly one question.
    Refused,
    /// `SERVFAIL`: the runtime's resolver did not answer for an inside name.
    Failed,
}

/// One first sighting of a (name, type) pair.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sighting {
    /// The queried name: lower-case ASCII (IDN as punycode), no trailing dot; `.` for the root.
    pub name: String,
    /// The queried record type.
    pub record_type: RecordType,
    /// Who asked.
    pub client: SocketAddr,
    /// How it was answered.
    pub answer: AnswerKind,
}

/// Receives first sightings, in the order they happened, on a dedicated thread.
pub trait QueryObserver: Send + Sync + 'static {
    /// Called once per (name, type) while it is remembered; may block without delaying answers.
    fn first_seen(&self, sighting: &Sighting);
}

/// An observer that ignores every sighting (for programs that do not journal DNS).
#[derive(Debug, Clone, Copy, Default)]
pub struct IgnoreSightings;

impl QueryObserver for IgnoreSightings {
    fn first_seen(&self, _sighting: &Sighting) {}
}

/// Shards of the seen set: queries on different sockets rarely wait for the same lock.
pub const SHARDS: usize = 16;

/// The bounded seen set plus the queue to the observer thread.
pub struct Sightings {
    hasher: RandomState,
    shards: Box<[Mutex<Shard>]>,
    queue: SyncSender<Sighting>,
    metrics: Metrics,
}

#[derive(Default)]
struct Shard {
    keys: HashSet<u64>,
    order: VecDeque<u64>,
    capacity: usize,
}

impl Sightings {
    /// Starts the observer thread; it ends when the returned value is dropped.
    pub fn start(
        observer: Arc<dyn QueryObserver>,
        seen_capacity: usize,
        queue: usize,
        metrics: Metrics,
    ) -> std::io::Result<Self> {
        let (sender, receiver) = sync_channel(queue);
        std::thread::Builder::new()
            .name("af-dns-sightings".into())
            .spawn(move || deliver(observer.as_ref(), receiver))?;
        // Split exactly, so the shards together never hold more than `seen_capacity`.
        let shards = (0..SHARDS)
            .map(|i| {
                Mutex::new(Shard {
                    capacity: seen_capacity / SHARDS + usize::from(i < seen_capacity % SHARDS),
                    ..Shard::default()
                })
            })
            .collect();
        Ok(Self {
            hasher: RandomState::new(),
            shards,
            queue: sender,
            metrics,
        })
    }

    /// Records a query; reports it if this (name, type) is not remembered yet.
    pub fn record(
        &self,
        name: &LowerName,
        record_type: RecordType,
        client: SocketAddr,
        answer: AnswerKind,
    ) {
        // A keyed hash: a client cannot craft names that collide to hide a sighting.
        let key = self.hasher.hash_one((name, record_type));
        let shard = &self.shards[(key % SHARDS as u64) as usize];
        let Ok(mut shard) = shard.lock() else {
            return;
        };
        if shard.keys.contains(&key) {
            return;
        }
        let sighting = Sighting {
            name: display_name(name),
            record_type,
            client,
            answer,
        };
        match self.queue.try_send(sighting) {
            Ok(()) => self.metrics.sighting_sent(),
            Err(TrySendError::Full(_) | TrySendError::Disconnected(_)) => {
                self.metrics.sighting_dropped();
                return;
            }
        }
        if shard.order.len() >= shard.capacity
            && let Some(oldest) = shard.order.pop_front()
        {
            shard.keys.remove(&oldest);
            self.metrics.seen_evicted();
        }
        shard.keys.insert(key);
        shard.order.push_back(key);
    }
}

fn deliver(observer: &dyn QueryObserver, receiver: Receiver<Sighting>) {
    while let Ok(sighting) = receiver.recv() {
        observer.first_seen(&sighting);
    }
}

/// The journal's form of a name: lower-case ASCII without the trailing dot.
fn display_name(name: &LowerName) -> String {
    let ascii = name.to_ascii();
    match ascii.strip_suffix('.') {
        Some("") | None => ascii,
        Some(stripped) => stripped.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use std::sync::mpsc;

    use super::*;

    struct Collect(Mutex<mpsc::Sender<Sighting>>);

    impl QueryObserver for Collect {
        fn first_seen(&self, sighting: &Sighting) {
            if let Ok(sender) = self.0.lock() {
                let _ = sender.send(sighting.clone());
            }
        }
    }

    fn client() -> SocketAddr {
        "127.0.0.1:4000".parse().expect("addr")
    }

    #[test]
    fn a_pair_is_reported_once_in_journal_form() {
        let (sender, receiver) = mpsc::channel();
        let metrics = Metrics::default();
        let sightings = Sightings::start(
            Arc::new(Collect(Mutex::new(sender))),
            64,
            8,
            metrics.clone(),
        )
        .expect("thread");
        let name: LowerName = "WWW.Example.COM.".parse().expect("name");
        for _ in 0..3 {
            sightings.record(&name, RecordType::A, client(), AnswerKind::Outside);
        }
        sightings.record(&name, RecordType::AAAA, client(), AnswerKind::Outside);
        let first = receiver.recv().expect("first");
        assert_eq!(first.name, "www.example.com");
        assert_eq!(first.record_type, RecordType::A);
        assert_eq!(
            receiver.recv().expect("second").record_type,
            RecordType::AAAA
        );
        drop(sightings);
        assert!(receiver.recv().is_err(), "exactly two sightings");
        assert_eq!(metrics.snapshot().sightings_sent, 2);
    }

    #[test]
    fn the_root_is_reported_as_a_dot() {
        assert_eq!(
            display_name(&LowerName::from(hickory_proto::rr::Name::root())),
            "."
        );
    }

    #[test]
    fn a_full_seen_set_forgets_the_oldest() {
        let metrics = Metrics::default();
        let sightings =
            Sightings::start(Arc::new(IgnoreSightings), 32, 4096, metrics.clone()).expect("thread");
        for i in 0..1000 {
            let name: LowerName = format!("n{i}.example.").parse().expect("name");
            sightings.record(&name, RecordType::A, client(), AnswerKind::Outside);
        }
        drop(sightings);
        let snapshot = metrics.snapshot();
        assert_eq!(snapshot.sightings_sent + snapshot.sightings_dropped, 1000);
        assert!(snapshot.seen() <= 32, "{snapshot:?}");
        assert!(snapshot.seen_evicted >= 1000 - 32);
    }
}
