//! The scenarios: what load each one sends, and what it reports.

mod connect;
mod dns;
mod http;
mod https;
mod idle;

use std::path::Path;
use std::time::Duration;

use serde::Serialize;

use crate::admin::Admin;
use crate::error::{BenchError, Result};
use crate::load::LoadResult;
use crate::proc;
use crate::systems::{Env, Running, System};
use crate::upstream::Upstream;

/// One scenario of the table, named alike on the command line, in the table and in JSON.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub(crate) enum Scenario {
    /// Plain HTTP, keep-alive connections, small bodies.
    #[value(name = "http-keepalive")]
    #[serde(rename = "http-keepalive")]
    HttpKeepAlive,
    /// Plain HTTP, a new connection per request (`Connection: close`).
    #[value(name = "http-newconn")]
    #[serde(rename = "http-newconn")]
    HttpNewConn,
    /// Plain HTTP, keep-alive, 1 MiB bodies.
    #[value(name = "http-1mib")]
    #[serde(rename = "http-1mib")]
    Http1m,
    /// Bulk bytes through a CONNECT tunnel.
    ConnectBulk,
    /// DNS A queries for random outside names.
    Dns,
    /// Memory per idle keep-alive client connection.
    IdleMemory,
    /// HTTPS through an intercepting proxy.
    InterceptedHttps,
    /// One policy decision, in process (`crate::decision`).
    Decision,
    /// `af up` of the demo against Docker Compose bringing up the same services.
    AfUp,
}

impl Scenario {
    /// Every scenario, in table order.
    pub(crate) const ALL: [Scenario; 9] = [
        Scenario::HttpKeepAlive,
        Scenario::HttpNewConn,
        Scenario::Http1m,
        Scenario::ConnectBulk,
        Scenario::Dns,
        Scenario::IdleMemory,
        Scenario::InterceptedHttps,
        Scenario::Decision,
        Scenario::AfUp,
    ];

    /// Name shown in the table.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Scenario::HttpKeepAlive => "http-keepalive",
            Scenario::HttpNewConn => "http-newconn",
            Scenario::Http1m => "http-1mib",
            Scenario::ConnectBulk => "connect-bulk",
            Scenario::Dns => "dns",
            Scenario::IdleMemory => "idle-memory",
            Scenario::InterceptedHttps => "intercepted-https",
            Scenario::Decision => "decision",
            Scenario::AfUp => "af-up",
        }
    }

    /// Whether the scenario needs this tree's af-proxy built: every one but `decision`, whose
    /// driver is a policy example (af-up's images hold af-proxy too).
    pub(crate) fn needs_af_proxy(self) -> bool {
        self != Scenario::Decision
    }

    /// Unit of the scenario's headline figure.
    pub(crate) fn unit(self) -> Unit {
        match self {
            Scenario::ConnectBulk => Unit::MegabytesPerSec,
            Scenario::Dns => Unit::QueriesPerSec,
            Scenario::IdleMemory => Unit::KibPerConn,
            Scenario::AfUp => Unit::Seconds,
            Scenario::Decision => Unit::Nanoseconds,
            _ => Unit::RequestsPerSec,
        }
    }
}

/// Unit of a headline figure.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub(crate) enum Unit {
    /// Requests per second (higher is better).
    #[serde(rename = "req/s")]
    RequestsPerSec,
    /// Megabytes (10^6) per second (higher is better).
    #[serde(rename = "MB/s")]
    MegabytesPerSec,
    /// DNS queries per second (higher is better).
    #[serde(rename = "qps")]
    QueriesPerSec,
    /// KiB of resident memory per idle connection (lower is better).
    #[serde(rename = "KiB/conn")]
    KibPerConn,
    /// Seconds of wall time (lower is better).
    #[serde(rename = "s")]
    Seconds,
    /// Nanoseconds per operation (lower is better).
    #[serde(rename = "ns")]
    Nanoseconds,
}

impl Unit {
    /// As printed.
    pub(crate) fn label(self) -> &'static str {
        match self {
            Unit::RequestsPerSec => "req/s",
            Unit::MegabytesPerSec => "MB/s",
            Unit::QueriesPerSec => "qps",
            Unit::KibPerConn => "KiB/conn",
            Unit::Seconds => "s",
            Unit::Nanoseconds => "ns",
        }
    }

    /// Whether a larger figure is better.
    pub(crate) fn higher_is_better(self) -> bool {
        !matches!(self, Unit::KibPerConn | Unit::Seconds | Unit::Nanoseconds)
    }
}

/// How hard and how long to push.
#[derive(Debug, Clone)]
pub(crate) struct Load {
    /// Measured duration of each timed run.
    pub duration: Duration,
    /// Idle connections opened in the memory scenario.
    pub idle_connections: usize,
}

/// What a scenario needs besides the system.
pub(crate) struct Ctx<'a> {
    /// Async runtime for the tokio clients.
    pub rt: &'a tokio::runtime::Runtime,
    /// The shared upstream.
    pub upstream: &'a Upstream,
    /// Load settings.
    pub load: &'a Load,
    /// Scratch directory (wrk scripts, the DNS query file).
    pub work: &'a Path,
    /// Addresses passed to systems.
    pub env: &'a Env,
}

/// One measured run of one system in one scenario.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Measurement {
    /// System name.
    pub system: String,
    /// Scenario.
    pub scenario: Scenario,
    /// Round number, from 0.
    pub round: u32,
    /// Headline figure in `unit`.
    pub value: f64,
    /// Its unit.
    pub unit: Unit,
    /// What the load generator saw.
    pub load: LoadResult,
    /// CPU seconds (user + system) the system's processes used during the run.
    pub cpu_secs: Option<f64>,
    /// CPU seconds per 10k requests/queries, or per GB for a tunnel.
    pub cpu_per_unit: Option<f64>,
    /// Peak resident memory (VmHWM) of the system's processes, KiB.
    pub peak_rss_kib: Option<u64>,
    /// Heap allocations per request, query or tunnel, for a system that counts them.
    pub allocs_per_op: Option<f64>,
    /// KiB of heap held per open connection (idle-memory), for a system that counts it: what
    /// the program holds, apart from what its allocator keeps resident.
    pub heap_kib_per_op: Option<f64>,
    /// Instructions per operation, counted by callgrind (`decision`).
    pub instructions_per_op: Option<f64>,
}

/// The counter an af-proxy built with the `alloc-count` feature shows on `/metrics`.
const ALLOCATIONS: &str = "af_proxy_allocations_total";
/// The gauge of heap bytes held the same build shows.
const HEAP_BYTES: &str = "af_proxy_heap_live_bytes";

/// One of the sidecar's allocation figures, when it counts them (`af-proxy (allocs)`).
fn allocation_figure(running: &Running, ctx: &Ctx<'_>, name: &str) -> Result<Option<f64>> {
    match running.admin {
        Some(addr) => ctx.rt.block_on(Admin::new(addr).metric_if_shown(name)),
        None => Ok(None),
    }
}

/// Starts `system`, runs `scenario` against it, stops it.
pub(crate) fn measure(
    scenario: Scenario,
    system: &dyn System,
    round: u32,
    ctx: &Ctx<'_>,
) -> Result<Measurement> {
    let running = system.start(ctx.env)?;
    let pid = running.pid();
    let before = pid.map(proc::sample).transpose()?;
    let allocs_before = allocation_figure(&running, ctx, ALLOCATIONS)?;
    let mut heap_kib_per_op = None;
    let (load, value) = match scenario {
        Scenario::HttpKeepAlive | Scenario::HttpNewConn | Scenario::Http1m => {
            let r = http::run(scenario, &running, ctx)?;
            let v = r.ops as f64 / r.secs;
            (r, v)
        }
        Scenario::ConnectBulk => {
            let r = connect::run(&running, ctx)?;
            let v = r.bytes as f64 / 1e6 / r.secs;
            (r, v)
        }
        Scenario::Dns => {
            let r = dns::run(&running, ctx)?;
            let v = r.ops as f64 / r.secs;
            (r, v)
        }
        Scenario::IdleMemory => {
            let heap = || allocation_figure(&running, ctx, HEAP_BYTES);
            let idle = idle::run(&running, ctx, heap)?;
            heap_kib_per_op = idle.heap_kib_per_conn;
            (idle.load, idle.rss_kib_per_conn)
        }
        Scenario::InterceptedHttps => {
            let r = https::run(&running, ctx)?;
            let v = r.ops as f64 / r.secs;
            (r, v)
        }
        Scenario::AfUp | Scenario::Decision => {
            return Err(BenchError::Protocol(format!(
                "{} measures no system (crate::stacks, crate::decision)",
                scenario.name()
            )));
        }
    };
    let after = pid.map(proc::sample).transpose()?;
    let allocs_after = allocation_figure(&running, ctx, ALLOCATIONS)?;
    drop(running);
    let allocs_per_op = allocs_before
        .zip(allocs_after)
        .filter(|_| load.ops > 0)
        .map(|(b, a)| (a - b) / load.ops as f64);
    let cpu_secs = before.zip(after).map(|(b, a)| a.cpu_secs - b.cpu_secs);
    let cpu_per_unit = cpu_secs.and_then(|cpu| match scenario {
        Scenario::IdleMemory => None,
        Scenario::ConnectBulk => (load.bytes > 0).then(|| cpu / (load.bytes as f64 / 1e9)),
        _ => (load.ops > 0).then(|| cpu * 10_000.0 / load.ops as f64),
    });
    if value.is_nan() || load.ops == 0 {
        return Err(BenchError::Protocol(format!(
            "{} completed nothing ({} errors)",
            scenario.name(),
            load.errors
        )));
    }
    Ok(Measurement {
        system: system.name().to_string(),
        scenario,
        round,
        value,
        unit: scenario.unit(),
        load,
        cpu_secs,
        cpu_per_unit,
        peak_rss_kib: after.map(|a| a.hwm_kib),
        allocs_per_op,
        heap_kib_per_op,
        instructions_per_op: None,
    })
}

/// The forward proxy address of a running system, or `None` for direct.
fn proxy_of(running: &Running) -> Option<std::net::SocketAddr> {
    match running.endpoint {
        crate::systems::Endpoint::Proxy(addr) => Some(addr),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::ValueEnum;

    #[test]
    fn a_scenario_has_one_name_on_the_command_line_in_the_table_and_in_json() {
        for scenario in Scenario::ALL {
            let name = scenario.name();
            let parsed = Scenario::from_str(name, false)
                .unwrap_or_else(|e| panic!("--scenarios {name}: {e}"));
            assert_eq!(parsed, scenario);
            assert_eq!(
                serde_json::to_value(scenario).expect("serializes"),
                serde_json::Value::String(name.to_owned())
            );
        }
    }
}
