//! Load generators: wrk and dnsperf driven as subprocesses, and small tokio
//! clients for what they cannot do (CONNECT tunnels, idle connections,
//! HTTPS through an intercepting proxy).

pub(crate) mod dnsperf;
pub(crate) mod https;
pub(crate) mod idle;
pub(crate) mod oneshot;
pub(crate) mod tunnel;
pub(crate) mod wrk;

use serde::Serialize;

/// What one load run measured, before CPU and memory are added.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub(crate) struct LoadResult {
    /// Requests, queries or connections completed.
    pub ops: u64,
    /// Measured wall time, seconds.
    pub secs: f64,
    /// Payload bytes received.
    pub bytes: u64,
    /// Median latency, microseconds.
    pub p50_us: Option<f64>,
    /// 99th percentile latency, microseconds.
    pub p99_us: Option<f64>,
    /// 99.9th percentile latency, microseconds.
    pub p999_us: Option<f64>,
    /// Mean latency, microseconds (dnsperf gives no percentiles).
    pub mean_us: Option<f64>,
    /// Failed requests: connect, read, write, timeout, non-2xx/3xx status, lost queries.
    pub errors: u64,
}

/// The last lines of a tool's stderr, for error messages.
pub(crate) fn tail(text: &[u8]) -> String {
    let text = String::from_utf8_lossy(text);
    let lines: Vec<&str> = text.lines().rev().take(4).collect();
    lines.into_iter().rev().collect::<Vec<_>>().join(" | ")
}
