//! Counters for `GET /metrics`, kept as plain atomics so the hot path never locks.

use std::fmt::Write;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

use af_policy::egress::Mode;
use af_sidecar_api::admin::JournalLosses;

/// Where a request entered the sidecar.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Via {
    /// The explicit proxy listener (absolute-form and CONNECT).
    Proxy,
    /// The transparent HTTP listener.
    Transparent,
    /// The transparent TLS listener (decided on SNI).
    Tls,
    /// A request inside a TLS connection the sidecar opened (from CONNECT or transparent TLS).
    Intercept,
    /// The SMTP listener.
    Smtp,
}

impl Via {
    /// Every listener kind.
    pub const ALL: [Via; 5] = [
        Via::Proxy,
        Via::Transparent,
        Via::Tls,
        Via::Intercept,
        Via::Smtp,
    ];

    /// The name in the journal and metrics.
    pub const fn as_str(self) -> &'static str {
        match self {
            Via::Proxy => "proxy",
            Via::Transparent => "transparent",
            Via::Tls => "tls",
            Via::Intercept => "intercept",
            Via::Smtp => "smtp",
        }
    }
}

/// How a decided request ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Forwarded (or tunnelled) upstream.
    Forwarded,
    /// Refused by the sidecar (catalogue, guard, unserved mode, limits, bad request).
    Refused,
    /// Allowed but the upstream could not be reached or failed.
    UpstreamError,
    /// Answered by the sidecar itself (mock, capture, synth).
    Answered,
    /// The client went away before the request was answered.
    ClientGone,
    /// The client broke its own request after it had begun to leave (a malformed body).
    ClientError,
    /// Still open when the sidecar stopped and its drain deadline passed.
    Shutdown,
}

impl Outcome {
    const ALL: [Outcome; 7] = [
        Outcome::Forwarded,
        Outcome::Refused,
        Outcome::UpstreamError,
        Outcome::Answered,
        Outcome::ClientGone,
        Outcome::ClientError,
        Outcome::Shutdown,
    ];

    const fn as_str(self) -> &'static str {
        match self {
            Outcome::Forwarded => "forwarded",
            Outcome::Refused => "refused",
            Outcome::UpstreamError => "upstream_error",
            Outcome::Answered => "answered",
            Outcome::ClientGone => "client_gone",
            Outcome::ClientError => "client_error",
            Outcome::Shutdown => "shutdown",
        }
    }
}

/// Why a client connection was closed without an answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unanswered {
    /// Nothing (more) was sent within the header timeout, or nothing moved for the idle
    /// timeout.
    Idle,
    /// The client closed in the middle of a request head, or closed an HTTP/2 connection
    /// before its first stream.
    Incomplete,
}

impl Unanswered {
    const ALL: [Unanswered; 2] = [Unanswered::Idle, Unanswered::Incomplete];

    const fn as_str(self) -> &'static str {
        match self {
            Unanswered::Idle => "idle",
            Unanswered::Incomplete => "incomplete",
        }
    }
}

/// How a tunnel's bytes were carried.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TunnelCopy {
    /// By the kernel, socket to socket through a pipe (splice(2), Linux).
    Splice,
    /// Through the sidecar's buffers (not two TCP sockets, not Linux, or no pipe).
    Buffered,
}

impl TunnelCopy {
    const ALL: [TunnelCopy; 2] = [TunnelCopy::Splice, TunnelCopy::Buffered];

    const fn as_str(self) -> &'static str {
        match self {
            TunnelCopy::Splice => "splice",
            TunnelCopy::Buffered => "buffered",
        }
    }
}

const MODES: usize = Mode::ALL.len();
const OUTCOMES: usize = Outcome::ALL.len();
const VIAS: usize = Via::ALL.len();

fn mode_index(mode: Mode) -> usize {
    Mode::ALL.iter().position(|m| *m == mode).unwrap_or(0)
}

/// Every counter the sidecar exposes.
#[derive(Default)]
pub struct Metrics {
    requests: [[[AtomicU64; OUTCOMES]; MODES]; VIAS],
    /// Requests refused before a mode was known (bad request, no SNI, limits).
    unclassified_refusals: AtomicU64,
    /// Of those, the ones past `journal.undecided_per_second`, not journaled.
    undecided_over_budget: AtomicU64,
    unanswered: [AtomicU64; Unanswered::ALL.len()],
    bytes_up: AtomicU64,
    bytes_down: AtomicU64,
    tunnels: [AtomicU64; TunnelCopy::ALL.len()],
    active_connections: AtomicU64,
    parked: AtomicU64,
    connection_limit_refusals: AtomicU64,
    open_files_limit: AtomicU64,
    /// The DNS server's counters, once it listens.
    dns: OnceLock<af_dns::Metrics>,
    guard_refusals: AtomicU64,
    upstream_dials: AtomicU64,
    upstream_open: AtomicU64,
    upstream_limit_refusals: AtomicU64,
    journal_written: AtomicU64,
    journal_queue_drops: AtomicU64,
    journal_evicted_records: AtomicU64,
    journal_evicted_segments: AtomicU64,
    journal_write_errors: AtomicU64,
    leaves_minted: AtomicU64,
    leaves_evicted: AtomicU64,
    messages_captured: AtomicU64,
    containment: ContainmentCounters,
}

/// The containment watchers' counters.
#[derive(Debug, Default)]
struct ContainmentCounters {
    reports: AtomicU64,
    refused: AtomicU64,
    losses: AtomicU64,
    lost_watchers: AtomicU64,
    forgotten: AtomicU64,
    policy_witness: AtomicU64,
    fence_witness: AtomicU64,
}

/// A layer's witness on the sidecar ([`af_sidecar_api::config::Containment`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Witness {
    /// Refused to a service by the NetworkPolicy layer alone.
    Policy,
    /// Refused to a service by the pod's own fence alone.
    Fence,
}

impl Metrics {
    /// Count one decided request.
    pub fn request(&self, via: Via, mode: Mode, outcome: Outcome) {
        let v = Via::ALL.iter().position(|x| *x == via).unwrap_or(0);
        let o = Outcome::ALL.iter().position(|x| *x == outcome).unwrap_or(0);
        self.requests[v][mode_index(mode)][o].fetch_add(1, Relaxed);
    }

    /// Count a refusal that happened before the catalogue was asked.
    pub fn unclassified_refusal(&self) {
        self.unclassified_refusals.fetch_add(1, Relaxed);
    }

    /// A refusal made before deciding was not journaled: past its budget.
    pub fn undecided_over_budget(&self) {
        self.undecided_over_budget.fetch_add(1, Relaxed);
    }

    /// A client connection was closed without an answer.
    pub fn unanswered(&self, why: Unanswered) {
        let i = Unanswered::ALL.iter().position(|x| *x == why).unwrap_or(0);
        self.unanswered[i].fetch_add(1, Relaxed);
    }

    /// Add forwarded body or tunnel bytes.
    pub fn bytes(&self, up: u64, down: u64) {
        self.bytes_up.fetch_add(up, Relaxed);
        self.bytes_down.fetch_add(down, Relaxed);
    }

    /// A tunnel started, carried as `copy` says.
    pub fn tunnel(&self, copy: TunnelCopy) {
        let i = TunnelCopy::ALL.iter().position(|c| *c == copy).unwrap_or(0);
        self.tunnels[i].fetch_add(1, Relaxed);
    }

    /// A kept-alive HTTP/1.1 connection let go of hyper's buffers to wait for its next request.
    pub fn parked(&self) {
        self.parked.fetch_add(1, Relaxed);
    }

    /// A client connection opened.
    pub fn connection_opened(&self) {
        self.active_connections.fetch_add(1, Relaxed);
    }

    /// A client connection closed.
    pub fn connection_closed(&self) {
        self.active_connections.fetch_sub(1, Relaxed);
    }

    /// Client connections currently open.
    pub fn active_connections(&self) -> u64 {
        self.active_connections.load(Relaxed)
    }

    /// A connection refused at the limit.
    pub fn connection_limit_refusal(&self) {
        self.connection_limit_refusals.fetch_add(1, Relaxed);
    }

    /// Report the DNS server's counters with these.
    pub fn attach_dns(&self, dns: af_dns::Metrics) {
        let _ = self.dns.set(dns);
    }

    /// The open-files limit in force.
    pub fn set_open_files_limit(&self, limit: u64) {
        self.open_files_limit.store(limit, Relaxed);
    }

    /// The guard refused a destination.
    pub fn guard_refusal(&self) {
        self.guard_refusals.fetch_add(1, Relaxed);
    }

    /// The guard is about to connect to an address that passed.
    pub fn upstream_dial(&self) {
        self.upstream_dials.fetch_add(1, Relaxed);
    }

    /// Connections attempted to upstream addresses (after the guard).
    pub fn upstream_dials(&self) -> u64 {
        self.upstream_dials.load(Relaxed)
    }

    /// An upstream connection took a place under the upstream cap.
    pub fn upstream_opened(&self) {
        self.upstream_open.fetch_add(1, Relaxed);
    }

    /// An upstream connection's place was freed.
    pub fn upstream_closed(&self) {
        self.upstream_open.fetch_sub(1, Relaxed);
    }

    /// Upstream connections holding a place now (idle pooled ones included).
    pub fn upstream_connections(&self) -> u64 {
        self.upstream_open.load(Relaxed)
    }

    /// A dial refused at the upstream cap.
    pub fn upstream_limit_refusal(&self) {
        self.upstream_limit_refusals.fetch_add(1, Relaxed);
    }

    /// Records committed to disk.
    pub fn journal_written(&self, n: u64) {
        self.journal_written.fetch_add(n, Relaxed);
    }

    /// A record dropped because the writer's queue was full.
    pub fn journal_queue_drop(&self) {
        self.journal_queue_drops.fetch_add(1, Relaxed);
    }

    /// Records lost because a write failed.
    pub fn journal_write_error(&self, records: u64) {
        self.journal_write_errors.fetch_add(records, Relaxed);
    }

    /// The oldest segment was removed to keep the journal bounded.
    pub fn journal_evicted(&self, records: u64) {
        self.journal_evicted_segments.fetch_add(1, Relaxed);
        self.journal_evicted_records.fetch_add(records, Relaxed);
    }

    /// Records the writer has finished with: committed or lost to a write error.
    pub fn journal_settled(&self) -> u64 {
        self.journal_written.load(Relaxed) + self.journal_write_errors.load(Relaxed)
    }

    /// A leaf certificate was minted for interception.
    pub fn leaf_minted(&self) {
        self.leaves_minted.fetch_add(1, Relaxed);
    }

    /// A leaf certificate was evicted from the bounded cache.
    pub fn leaf_evicted(&self) {
        self.leaves_evicted.fetch_add(1, Relaxed);
    }

    /// A message was captured for the inbox.
    pub fn message_captured(&self) {
        self.messages_captured.fetch_add(1, Relaxed);
    }

    /// A watcher's report was kept: `held` or not, whether its pod was lost before, and how
    /// many watchers are lost now.
    pub fn containment_reported(&self, held: bool, was_lost: bool, lost_now: usize) {
        let c = &self.containment;
        c.reports.fetch_add(1, Relaxed);
        if !held && !was_lost {
            c.losses.fetch_add(1, Relaxed);
        }
        c.lost_watchers.store(lost_now as u64, Relaxed);
    }

    /// A report was refused (wrong token, bad body).
    pub fn containment_report_refused(&self) {
        self.containment.refused.fetch_add(1, Relaxed);
    }

    /// A watcher was forgotten to keep the store's bound.
    pub fn containment_watcher_forgotten(&self) {
        self.containment.forgotten.fetch_add(1, Relaxed);
    }

    /// Something connected to a layer's witness.
    pub fn witness_reached(&self, witness: Witness) {
        match witness {
            Witness::Policy => &self.containment.policy_witness,
            Witness::Fence => &self.containment.fence_witness,
        }
        .fetch_add(1, Relaxed);
    }

    /// Journal loss counters for the admin API.
    pub fn journal_losses(&self) -> JournalLosses {
        JournalLosses {
            queue_drops: self.journal_queue_drops.load(Relaxed),
            evicted_records: self.journal_evicted_records.load(Relaxed),
            evicted_segments: self.journal_evicted_segments.load(Relaxed),
            write_errors: self.journal_write_errors.load(Relaxed),
        }
    }

    /// Prometheus text exposition.
    pub fn render(&self) -> String {
        let mut out = String::with_capacity(4096);
        out.push_str("# HELP af_proxy_requests_total Decided requests by listener, mode and outcome.\n# TYPE af_proxy_requests_total counter\n");
        for (v, via) in Via::ALL.iter().enumerate() {
            for (m, mode) in Mode::ALL.iter().enumerate() {
                for (o, outcome) in Outcome::ALL.iter().enumerate() {
                    let n = self.requests[v][m][o].load(Relaxed);
                    if n > 0 {
                        let _ = writeln!(
                            out,
                            "af_proxy_requests_total{{via=\"{}\",mode=\"{}\",outcome=\"{}\"}} {n}",
                            via.as_str(),
                            mode.as_str(),
                            outcome.as_str()
                        );
                    }
                }
            }
        }
        out.push_str("# HELP af_proxy_closed_unanswered_total Client connections closed without an answer: idle (nothing sent within limits.header_read_timeout_ms, or nothing moved for limits.idle_timeout_ms) or incomplete (closed in the middle of a request head, or an HTTP/2 connection closed before its first stream).\n# TYPE af_proxy_closed_unanswered_total counter\n");
        for (why, n) in Unanswered::ALL.iter().zip(&self.unanswered) {
            let _ = writeln!(
                out,
                "af_proxy_closed_unanswered_total{{reason=\"{}\"}} {}",
                why.as_str(),
                n.load(Relaxed)
            );
        }
        out.push_str("# HELP af_proxy_tunnels_total Tunnels (CONNECT, transparent TLS) by how their bytes were carried: splice (kernel, socket to socket) or buffered.\n# TYPE af_proxy_tunnels_total counter\n");
        for (copy, n) in TunnelCopy::ALL.iter().zip(&self.tunnels) {
            let _ = writeln!(
                out,
                "af_proxy_tunnels_total{{copy=\"{}\"}} {}",
                copy.as_str(),
                n.load(Relaxed)
            );
        }
        let losses = self.journal_losses();
        let dns = self
            .dns
            .get()
            .map(af_dns::Metrics::snapshot)
            .unwrap_or_default();
        let simple: [(&str, &str, &str, u64); 25] = [
            (
                "af_proxy_refused_undecided_total",
                "counter",
                "Connections or requests refused before the catalogue was asked.",
                self.unclassified_refusals.load(Relaxed),
            ),
            (
                "af_proxy_refused_undecided_unjournaled_total",
                "counter",
                "Of those, the ones past journal.undecided_per_second: answered and counted, not journaled.",
                self.undecided_over_budget.load(Relaxed),
            ),
            (
                "af_proxy_bytes_up_total",
                "counter",
                "Bytes sent upstream (request bodies and tunnel bytes).",
                self.bytes_up.load(Relaxed),
            ),
            (
                "af_proxy_bytes_down_total",
                "counter",
                "Bytes received from upstream (response bodies and tunnel bytes).",
                self.bytes_down.load(Relaxed),
            ),
            (
                "af_proxy_active_connections",
                "gauge",
                "Client connections open now.",
                self.active_connections.load(Relaxed),
            ),
            (
                "af_proxy_connections_parked_total",
                "counter",
                "Times a kept-alive HTTP/1.1 client connection, quiet between requests, let go of its buffers to wait for the next request on the bare socket.",
                self.parked.load(Relaxed),
            ),
            (
                "af_proxy_dns_sightings_over_budget_total",
                "counter",
                "DNS first sightings past listeners.dns.sightings_per_second, journaled on a later query instead.",
                dns.sightings_over_budget,
            ),
            (
                "af_proxy_dns_sightings_dropped_total",
                "counter",
                "DNS first sightings dropped because the journal's hand-off queue was full.",
                dns.sightings_dropped,
            ),
            (
                "af_proxy_dns_tcp_refusals_total",
                "counter",
                "DNS-over-TCP connections closed at limits.max_connections (also in af_proxy_connection_limit_refusals_total).",
                dns.tcp_refused,
            ),
            (
                "af_proxy_dns_tcp_accept_failures_total",
                "counter",
                "Failed DNS-over-TCP accepts (out of file descriptors and the like), each followed by a 50 ms pause.",
                dns.tcp_accept_failed,
            ),
            (
                "af_proxy_dns_udp_shed_total",
                "counter",
                "DNS queries over UDP dropped unread because 4096 of their socket's were already waiting on the runtime's resolver.",
                dns.udp_shed,
            ),
            (
                "af_proxy_open_files_limit",
                "gauge",
                "The process's open-files limit, raised to the hard limit at start (0: unknown).",
                self.open_files_limit.load(Relaxed),
            ),
            (
                "af_proxy_connection_limit_refusals_total",
                "counter",
                "Connections refused at limits.max_connections.",
                self.connection_limit_refusals.load(Relaxed),
            ),
            (
                "af_proxy_guard_refusals_total",
                "counter",
                "Destinations the address guard refused.",
                self.guard_refusals.load(Relaxed),
            ),
            (
                "af_proxy_upstream_dials_total",
                "counter",
                "TCP connects to upstream addresses that passed the guard.",
                self.upstream_dials.load(Relaxed),
            ),
            (
                "af_proxy_upstream_connections",
                "gauge",
                "Upstream connections open now, idle pooled ones included (at most limits.max_upstream_connections).",
                self.upstream_open.load(Relaxed),
            ),
            (
                "af_proxy_upstream_limit_refusals_total",
                "counter",
                "Requests and tunnels refused at limits.max_upstream_connections (503 AF-NET-018).",
                self.upstream_limit_refusals.load(Relaxed),
            ),
            (
                "af_proxy_journal_records_total",
                "counter",
                "Journal records committed to disk.",
                self.journal_written.load(Relaxed),
            ),
            (
                "af_proxy_journal_queue_drops_total",
                "counter",
                "Journal records dropped because the writer queue was full.",
                losses.queue_drops,
            ),
            (
                "af_proxy_journal_evicted_records_total",
                "counter",
                "Journal records removed with the oldest segment to keep the bound.",
                losses.evicted_records,
            ),
            (
                "af_proxy_journal_evicted_segments_total",
                "counter",
                "Journal segments removed to keep the bound.",
                losses.evicted_segments,
            ),
            (
                "af_proxy_journal_write_errors_total",
                "counter",
                "Journal records lost to write errors.",
                losses.write_errors,
            ),
            (
                "af_proxy_tls_leaves_minted_total",
                "counter",
                "Leaf certificates minted for TLS interception.",
                self.leaves_minted.load(Relaxed),
            ),
            (
                "af_proxy_tls_leaf_cache_evictions_total",
                "counter",
                "Leaf certificates evicted from the bounded cache (tls.leaf_cache).",
                self.leaves_evicted.load(Relaxed),
            ),
            (
                "af_proxy_messages_captured_total",
                "counter",
                "Messages captured for the inbox (capture mode and SMTP).",
                self.messages_captured.load(Relaxed),
            ),
        ];
        let c = &self.containment;
        let containment: [(&str, &str, &str, u64); 7] = [
            (
                "af_containment_reports_total",
                "counter",
                "Containment watchers' reports kept.",
                c.reports.load(Relaxed),
            ),
            (
                "af_containment_report_refusals_total",
                "counter",
                "Reports refused: without the containment token, or not of the documented shape.",
                c.refused.load(Relaxed),
            ),
            (
                "af_containment_losses_total",
                "counter",
                "Times a watcher that held (or was new) reported containment lost.",
                c.losses.load(Relaxed),
            ),
            (
                "af_containment_lost_watchers",
                "gauge",
                "Watchers whose last report says containment is lost.",
                c.lost_watchers.load(Relaxed),
            ),
            (
                "af_containment_watchers_forgotten_total",
                "counter",
                "Watchers forgotten to keep containment.max_watchers.",
                c.forgotten.load(Relaxed),
            ),
            (
                "af_containment_policy_witness_connections_total",
                "counter",
                "Connections that reached the policy witness, which the NetworkPolicy layer refuses every service.",
                c.policy_witness.load(Relaxed),
            ),
            (
                "af_containment_fence_witness_connections_total",
                "counter",
                "Connections that reached the fence witness, which every service pod's own fence refuses.",
                c.fence_witness.load(Relaxed),
            ),
        ];
        for (name, kind, help, value) in simple.into_iter().chain(containment) {
            let _ = writeln!(
                out,
                "# HELP {name} {help}\n# TYPE {name} {kind}\n{name} {value}"
            );
        }
        #[cfg(feature = "alloc-count")]
        let _ = writeln!(
            out,
            "# HELP af_proxy_allocations_total Heap allocations since start (built with the alloc-count feature).\n# TYPE af_proxy_allocations_total counter\naf_proxy_allocations_total {}",
            crate::alloc_count::total()
        );
        #[cfg(feature = "alloc-count")]
        let _ = writeln!(
            out,
            "# HELP af_proxy_heap_live_bytes Heap bytes allocated and not freed (built with the alloc-count feature).\n# TYPE af_proxy_heap_live_bytes gauge\naf_proxy_heap_live_bytes {}",
            crate::alloc_count::live_bytes()
        );
        out
    }
}
