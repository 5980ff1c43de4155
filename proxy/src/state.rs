//! What every connection task shares: built once at start, read-only afterwards.

use std::sync::Arc;
use std::time::Duration;

use crate::answer::modes::ModeSettings;
use crate::arrive::intercept::Interception;
use crate::decide::loops::Loops;
use crate::decide::rate::RuleRates;
use crate::drain::Drain;
use crate::leave::guard::Guard;
use crate::leave::pools::Pools;
use crate::limits::ConnectionLimit;
use crate::metrics::Metrics;
use crate::record::journal::Journal;
use af_policy::egress::Catalogue;
use governor::DefaultDirectRateLimiter;

/// The sidecar's shared state.
pub(crate) struct State {
    /// The compiled egress catalogue.
    pub catalogue: Arc<Catalogue>,
    /// The journal handle.
    pub journal: Journal,
    /// Counters.
    pub metrics: Arc<Metrics>,
    /// The address guard every dial goes through.
    pub guard: Arc<Guard>,
    /// The pooled upstream HTTP and HTTPS clients, one set per thread (every dial through
    /// the guard).
    pub pools: Pools,
    /// TLS interception, when the sidecar has an environment CA.
    pub intercept: Option<Arc<Interception>>,
    /// What the answering modes work from.
    pub modes: ModeSettings,
    /// The connection cap.
    pub limit: ConnectionLimit,
    /// The rules' rate limits.
    pub rates: RuleRates,
    /// Loops refused lately, for the hop that sent them.
    pub loops: Loops,
    /// How many refusals made before deciding are journaled (`journal.undecided_per_second`).
    pub undecided_budget: DefaultDirectRateLimiter,
    /// Timeouts and sizes.
    pub tuning: Tuning,
    /// Every data connection task, and when they stop.
    pub drain: Drain,
}

/// Timeouts and sizes, already converted from the configuration.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Tuning {
    /// Time to receive a request head.
    pub header_read_timeout: Duration,
    /// Close a connection or tunnel idle this long.
    pub idle_timeout: Duration,
    /// Time to receive a TLS ClientHello.
    pub client_hello_timeout: Duration,
    /// Largest request head.
    pub max_header_bytes: usize,
    /// Most header fields in a request head.
    pub max_headers: usize,
    /// Per tunnel direction: the pipe asked for when spliced, else the copy buffer.
    pub tunnel_buffer_bytes: usize,
    /// The port transparent HTTP requests are decided and forwarded on.
    pub http_port: u16,
    /// The port transparent TLS connections are decided and tunnelled to.
    pub tls_port: u16,
    /// Largest mail the SMTP listener accepts.
    pub smtp_max_message_bytes: usize,
}
