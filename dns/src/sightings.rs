//! First sightings of (name, type): remembered in a bounded set and handed to the embedding
//! program's observer on its own thread, so a slow observer never delays an answer.
//!
//! Bounds: the seen set holds at most `seen_capacity` pairs (a 64-bit keyed hash each, about
//! 16 bytes; 1 MiB at the default); when full, the oldest pair is forgotten, so a pair may be reported again later.
//! At most `sighting_queue` sightings wait for the observer, and at most `sightings_per_second`
//! are reported a second (ten times that at once); past either, the new sighting is dropped,
//! counted, and not remembered, so a later query reports it again.

use std::{
    collections::{HashSet, VecDeque},
    hash::{BuildHasher, RandomState},
    net::SocketAddr,
    num::NonZeroU32,
    sync::{
        Arc, Mutex,
        mpsc::{Receiver, SyncSender, TrySendError, sync_channel},
    },
};

use governor::{DefaultDirectRateLimiter, Quota, RateLimiter};
use hickory_proto::rr::{LowerName, RecordType};

use crate::FastHash;
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
pub(crate) const SHARDS: usize = 16;

/// How much the sightings machinery holds and passes on.
#[derive(Debug, Clone, Copy)]
pub(crate) struct SightingBounds {
    /// (name, type) pairs remembered.
    pub seen_capacity: usize,
    /// Sightings waiting for the observer.
    pub queue: usize,
    /// Sightings reported per second (ten times that at once).
    pub per_second: NonZeroU32,
}

/// The bounded seen set plus the queue to the observer thread.
pub(crate) struct Sightings {
    hasher: RandomState,
    shards: Box<[Mutex<Shard>]>,
    queue: SyncSender<Sighting>,
    budget: DefaultDirectRateLimiter,
    metrics: Metrics,
}

#[derive(Default)]
struct Shard {
    keys: HashSet<u64, FastHash>,
    order: VecDeque<u64>,
    capacity: usize,
}

impl Sightings {
    /// Starts the observer thread; it ends when the returned value is dropped.
    pub(crate) fn start(
        observer: Arc<dyn QueryObserver>,
        bounds: SightingBounds,
        metrics: Metrics,
    ) -> std::io::Result<Self> {
        let SightingBounds {
            seen_capacity,
            queue,
            per_second,
        } = bounds;
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
        let burst = per_second.saturating_mul(NonZeroU32::new(10).unwrap_or(NonZeroU32::MIN));
        Ok(Self {
            hasher: RandomState::new(),
            shards,
            queue: sender,
            budget: RateLimiter::direct(Quota::per_second(per_second).allow_burst(burst)),
            metrics,
        })
    }

    /// Records a query; reports it if this (name, type) is not remembered yet.
    pub(crate) fn record(
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
        if self.budget.check().is_err() {
            self.metrics.sighting_over_budget();
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

    fn bounds(seen_capacity: usize, queue: usize, per_second: u32) -> SightingBounds {
        SightingBounds {
            seen_capacity,
            queue,
            per_second: NonZeroU32::new(per_second).expect("positive"),
        }
    }

    #[test]
    fn past_the_budget_a_sighting_is_counted_and_reported_on_a_later_query() {
        let (sender, receiver) = mpsc::channel();
        let metrics = Metrics::default();
        // One a second, ten at once.
        let sightings = Sightings::start(
            Arc::new(Collect(Mutex::new(sender))),
            bounds(1024, 1024, 1),
            metrics.clone(),
        )
        .expect("thread");
        let name = |i: usize| -> LowerName { format!("n{i}.flood.test.").parse().expect("name") };
        for i in 0..30 {
            sightings.record(&name(i), RecordType::A, client(), AnswerKind::Outside);
        }
        let snapshot = metrics.snapshot();
        assert_eq!(snapshot.sightings_sent, 10, "{snapshot:?}");
        assert_eq!(snapshot.sightings_over_budget, 20, "{snapshot:?}");
        // A second later there is room for one more: the hidden name is reported when asked again.
        std::thread::sleep(std::time::Duration::from_millis(1100));
        sightings.record(&name(29), RecordType::A, client(), AnswerKind::Outside);
        drop(sightings);
        let reported: Vec<String> = receiver.iter().map(|s| s.name).collect();
        assert_eq!(reported.len(), 11, "{reported:?}");
        assert_eq!(reported.last().map(String::as_str), Some("n29.flood.test"));
    }

    #[test]
    fn a_pair_is_reported_once_in_journal_form() {
        let (sender, receiver) = mpsc::channel();
        let metrics = Metrics::default();
        let sightings = Sightings::start(
            Arc::new(Collect(Mutex::new(sender))),
            bounds(64, 8, 1_000_000),
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
        let sightings = Sightings::start(
            Arc::new(IgnoreSightings),
            bounds(32, 4096, 1_000_000),
            metrics.clone(),
        )
        .expect("thread");
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
