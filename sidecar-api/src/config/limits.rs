//! How the sidecar is bounded: the journal on disk, and the limits and timeouts of the data
//! path.

use std::num::NonZeroU32;
use std::path::PathBuf;
use std::time::Duration;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The journal.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct JournalConfig {
    /// Directory of segment files (created if missing), default `/var/lib/af/journal`.
    pub dir: PathBuf,
    /// Segment size in bytes, default 8 MiB.
    pub segment_bytes: u64,
    /// Segments kept, default 8 (so 64 MiB in all).
    pub max_segments: usize,
    /// Queue between request tasks and the writer, default 65536 records.
    pub queue: usize,
    /// Least time between two commits (each a write and an fsync), default 2 ms: under load
    /// the records of an interval share one commit; a record reaches the disk at most this
    /// long after the previous commit. 0 commits as soon as anything is queued. Left out of
    /// a document when at its default, so a sidecar from before it reads the document as it
    /// did.
    #[serde(skip_serializing_if = "JournalConfig::is_default_commit_interval")]
    pub commit_interval_ms: u64,
    /// Refusals made before a request could be decided (an unreadable or late head, a bad
    /// port, no SNI, the connection limit) journaled per second, ten times as many at once;
    /// past it they are answered and counted, not journaled, so a flood of them cannot push
    /// decisions out of the bounded journal. Default 50.
    pub undecided_per_second: NonZeroU32,
}

impl JournalConfig {
    /// Where the journal lives when `dir` is not given.
    pub const DEFAULT_DIR: &str = "/var/lib/af/journal";
    /// `commit_interval_ms` when not given.
    pub const DEFAULT_COMMIT_INTERVAL_MS: u64 = 2;

    fn is_default_commit_interval(ms: &u64) -> bool {
        *ms == Self::DEFAULT_COMMIT_INTERVAL_MS
    }
}

impl Default for JournalConfig {
    fn default() -> Self {
        Self {
            dir: PathBuf::from(Self::DEFAULT_DIR),
            segment_bytes: 8 * 1024 * 1024,
            max_segments: 8,
            queue: 65_536,
            commit_interval_ms: Self::DEFAULT_COMMIT_INTERVAL_MS,
            undecided_per_second: super::non_zero_u32(50),
        }
    }
}

/// Limits and timeouts.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct Limits {
    /// Client connections open at once across the data listeners, default 4096.
    pub max_connections: usize,
    /// Largest request head (start line and headers), default 64 KiB.
    pub max_header_bytes: usize,
    /// Most header fields in a request head, default 100 (8 to 10 000).
    pub max_headers: usize,
    /// Time to receive a request head, default 10 s.
    pub header_read_timeout_ms: u64,
    /// A connection or tunnel with no traffic either way is closed after this, default 300 s.
    pub idle_timeout_ms: u64,
    /// Time to receive a TLS ClientHello, default 5 s.
    pub client_hello_timeout_ms: u64,
    /// Time to connect to one upstream address, default 10 s.
    pub upstream_connect_timeout_ms: u64,
    /// Time to resolve a name, default 5 s.
    pub resolve_timeout_ms: u64,
    /// Time for a whole dial, resolution and every address included, default 15 s; the
    /// addresses left share what remains. Past it: 504 AF-NET-019.
    pub dial_timeout_ms: u64,
    /// Upstream connections open at once (pooled HTTP and HTTPS, idle ones included, tunnels,
    /// model calls), default 4096. Past it a dial is refused: 503 AF-NET-018.
    pub max_upstream_connections: usize,
    /// Idle pooled upstream connections kept per host, default 256 (fewer than the clients
    /// of a busy host makes every burst reconnect).
    pub pool_max_idle_per_host: usize,
    /// Tunnel copy buffer per direction, default 64 KiB.
    pub tunnel_buffer_bytes: usize,
    /// On SIGTERM or SIGINT, how long open requests and tunnels may go on before they are
    /// closed (each journaled), default 5 s; 0 closes them at once.
    pub drain_timeout_ms: u64,
    /// Threads serving the data listeners, each with its own runtime, its own socket on each
    /// listener's port (SO_REUSEPORT) and its own pooled upstream connections, so no request
    /// is handed to another thread; default 0: one per core the sidecar may use. Left out
    /// of a document when 0, so a sidecar from before it reads the document as it did.
    #[serde(skip_serializing_if = "is_zero")]
    pub data_threads: usize,
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

impl Limits {
    /// `drain_timeout_ms` when not given; runtimes size their stop timeout from it.
    pub const DEFAULT_DRAIN_TIMEOUT_MS: u64 = 5_000;

    /// A timeout in milliseconds, as these fields hold them, as a duration.
    pub fn ms(v: u64) -> Duration {
        Duration::from_millis(v)
    }
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_connections: 4096,
            max_header_bytes: 64 * 1024,
            max_headers: 100,
            header_read_timeout_ms: 10_000,
            idle_timeout_ms: 300_000,
            client_hello_timeout_ms: 5_000,
            upstream_connect_timeout_ms: 10_000,
            resolve_timeout_ms: 5_000,
            dial_timeout_ms: 15_000,
            max_upstream_connections: 4096,
            pool_max_idle_per_host: 256,
            tunnel_buffer_bytes: 64 * 1024,
            drain_timeout_ms: Self::DEFAULT_DRAIN_TIMEOUT_MS,
            data_threads: 0,
        }
    }
}
