//! Counters the sidecar exports as metrics. Relaxed atomics: each is read on its own.

use std::sync::{
    Arc,
    atomic::{AtomicU64, Ordering::Relaxed},
};

use crate::sightings::AnswerKind;

/// A cheap, clonable handle on the server's counters.
#[derive(Debug, Clone, Default)]
pub struct Metrics(Arc<Counters>);

#[derive(Debug, Default)]
struct Counters {
    outside: AtomicU64,
    inside: AtomicU64,
    localhost: AtomicU64,
    refused: AtomicU64,
    failed: AtomicU64,
    sightings_sent: AtomicU64,
    sightings_dropped: AtomicU64,
    sightings_over_budget: AtomicU64,
    seen_evicted: AtomicU64,
    tcp_refused: AtomicU64,
    tcp_accept_failed: AtomicU64,
    udp_shed: AtomicU64,
}

/// The counters at one moment.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MetricsSnapshot {
    /// Queries answered as outside names.
    pub outside: u64,
    /// Queries answered from the runtime's resolver as inside names.
    pub inside: u64,
    /// Queries answered as `localhost`.
    pub localhost: u64,
    /// Queries refused (`REFUSED`, `FORMERR`, `NOTIMP`, `BADVERS`) by this crate's handler.
    pub refused: u64,
    /// Queries answered `SERVFAIL` because the runtime's resolver failed.
    pub failed: u64,
    /// Sightings handed to the observer's queue.
    pub sightings_sent: u64,
    /// Sightings dropped because the observer's queue was full.
    pub sightings_dropped: u64,
    /// Sightings past `sightings_per_second`, not reported (yet).
    pub sightings_over_budget: u64,
    /// Remembered (name, type) pairs forgotten because the seen set was full.
    pub seen_evicted: u64,
    /// DNS-over-TCP connections closed unanswered because the connection cap was reached.
    pub tcp_refused: u64,
    /// Failed TCP accepts (out of file descriptors and the like), each followed by a pause.
    pub tcp_accept_failed: u64,
    /// UDP queries dropped unread because `udp_max_in_flight` of their socket's were already
    /// waiting on the runtime's resolver.
    pub udp_shed: u64,
}

impl MetricsSnapshot {
    /// (name, type) pairs remembered now; never more than `seen_capacity`.
    pub fn seen(&self) -> u64 {
        self.sightings_sent.saturating_sub(self.seen_evicted)
    }
}

impl Metrics {
    /// Reads every counter.
    pub fn snapshot(&self) -> MetricsSnapshot {
        let c = &self.0;
        MetricsSnapshot {
            outside: c.outside.load(Relaxed),
            inside: c.inside.load(Relaxed),
            localhost: c.localhost.load(Relaxed),
            refused: c.refused.load(Relaxed),
            failed: c.failed.load(Relaxed),
            sightings_sent: c.sightings_sent.load(Relaxed),
            sightings_dropped: c.sightings_dropped.load(Relaxed),
            sightings_over_budget: c.sightings_over_budget.load(Relaxed),
            seen_evicted: c.seen_evicted.load(Relaxed),
            tcp_refused: c.tcp_refused.load(Relaxed),
            tcp_accept_failed: c.tcp_accept_failed.load(Relaxed),
            udp_shed: c.udp_shed.load(Relaxed),
        }
    }

    pub(crate) fn answered(&self, kind: AnswerKind) {
        let c = &self.0;
        let counter = match kind {
            AnswerKind::Outside => &c.outside,
            AnswerKind::Inside => &c.inside,
            AnswerKind::Localhost => &c.localhost,
            AnswerKind::Refused => &c.refused,
            AnswerKind::Failed => &c.failed,
        };
        counter.fetch_add(1, Relaxed);
    }

    pub(crate) fn sighting_sent(&self) {
        self.0.sightings_sent.fetch_add(1, Relaxed);
    }

    pub(crate) fn sighting_dropped(&self) {
        self.0.sightings_dropped.fetch_add(1, Relaxed);
    }

    pub(crate) fn sighting_over_budget(&self) {
        self.0.sightings_over_budget.fetch_add(1, Relaxed);
    }

    pub(crate) fn seen_evicted(&self) {
        self.0.seen_evicted.fetch_add(1, Relaxed);
    }

    pub(crate) fn tcp_refused(&self) {
        self.0.tcp_refused.fetch_add(1, Relaxed);
    }

    pub(crate) fn tcp_accept_failed(&self) {
        self.0.tcp_accept_failed.fetch_add(1, Relaxed);
    }

    pub(crate) fn udp_shed(&self) {
        self.0.udp_shed.fetch_add(1, Relaxed);
    }
}
