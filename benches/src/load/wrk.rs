//! wrk, closed-loop saturation, through a forward proxy or straight at the upstream.
//!
//! Through a proxy wrk connects to the proxy's address and a Lua script sets
//! the absolute-form target; its `done` hook prints one machine-readable line
//! with the counts and the 50/99/99.9 percentiles (wrk's `--latency` stops at 99).

use std::net::SocketAddr;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use super::{LoadResult, tail};
use crate::error::{BenchError, Result};

/// Marker of the line the Lua `done` hook prints.
const MARKER: &str = "AFBENCH";

/// One wrk run.
#[derive(Debug, Clone)]
pub(crate) struct WrkRun<'a> {
    /// Where wrk connects: the proxy, or the upstream itself.
    pub connect: SocketAddr,
    /// Whether `connect` is a forward proxy (absolute-form target).
    pub via_proxy: bool,
    /// The upstream's address.
    pub upstream: SocketAddr,
    /// Request path on the upstream.
    pub path: &'a str,
    /// wrk threads.
    pub threads: u32,
    /// Open connections.
    pub connections: u32,
    /// Measured duration.
    pub duration: Duration,
}

/// The Lua script for a run.
pub(crate) fn script(run: &WrkRun<'_>) -> String {
    let target = if run.via_proxy {
        format!("http://{}{}", run.upstream, run.path)
    } else {
        run.path.to_string()
    };
    format!(
        r#"wrk.method = "GET"
wrk.path = "{target}"
wrk.headers["Host"] = "{host}"
done = function(summary, latency, requests)
  local e = summary.errors
  io.write(string.format("{MARKER} requests=%d duration_us=%d bytes=%d errors=%d p50=%d p99=%d p999=%d mean=%.1f\n",
    summary.requests, summary.duration, summary.bytes,
    e.connect + e.read + e.write + e.status + e.timeout,
    latency:percentile(50), latency:percentile(99), latency:percentile(99.9), latency.mean))
end
"#,
        host = run.upstream
    )
}

/// Runs wrk; the script is written into `dir`.
pub(crate) fn run(run: &WrkRun<'_>, dir: &Path) -> Result<LoadResult> {
    let script_path = dir.join("wrk.lua");
    std::fs::write(&script_path, script(run)).map_err(|e| BenchError::io("write wrk script", e))?;
    let out = Command::new("wrk")
        .arg("-t")
        .arg(run.threads.to_string())
        .arg("-c")
        .arg(run.connections.to_string())
        .arg("-d")
        .arg(format!("{}s", run.duration.as_secs().max(1)))
        .arg("--timeout")
        .arg("5s")
        .arg("-s")
        .arg(&script_path)
        .arg(format!("http://{}/", run.connect))
        .output()
        .map_err(|source| BenchError::Spawn {
            program: "wrk".into(),
            source,
        })?;
    if !out.status.success() {
        return Err(BenchError::Load {
            tool: "wrk",
            status: out.status.to_string(),
            stderr: tail(&out.stderr),
        });
    }
    parse(&String::from_utf8_lossy(&out.stdout))
}

/// Reads the `done` hook's line out of wrk's output.
pub(crate) fn parse(stdout: &str) -> Result<LoadResult> {
    let line = stdout
        .lines()
        .find_map(|l| l.strip_prefix(MARKER))
        .ok_or_else(|| BenchError::Parse {
            tool: "wrk",
            reason: format!("no {MARKER} line in output"),
        })?;
    let field = |name: &str| -> Result<f64> {
        line.split_whitespace()
            .find_map(|kv| kv.strip_prefix(name)?.strip_prefix('='))
            .and_then(|v| v.parse::<f64>().ok())
            .ok_or_else(|| BenchError::Parse {
                tool: "wrk",
                reason: format!("missing {name}"),
            })
    };
    let ops = field("requests")? as u64;
    Ok(LoadResult {
        ops,
        secs: field("duration_us")? / 1e6,
        bytes: field("bytes")? as u64,
        p50_us: Some(field("p50")?),
        p99_us: Some(field("p99")?),
        p999_us: Some(field("p999")?),
        mean_us: Some(field("mean")?),
        errors: field("errors")? as u64,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const OUTPUT: &str = "Running 2s test @ http://127.0.0.1:40000/\n  2 threads and 64 connections\n  Thread Stats   Avg      Stdev     Max   +/- Stdev\n    Latency   1.10ms  300.00us  10.00ms   90.00%\n  40000 requests in 2.00s, 9.00MB read\nRequests/sec:  20000.00\nTransfer/sec:      4.50MB\nAFBENCH requests=40000 duration_us=2000123 bytes=9437184 errors=3 p50=1012 p99=2950 p999=8100 mean=1100.5\n";

    #[test]
    fn the_done_line_is_parsed() {
        let r = parse(OUTPUT).expect("parses");
        assert_eq!(r.ops, 40_000);
        assert_eq!(r.errors, 3);
        assert_eq!(r.bytes, 9_437_184);
        assert!((r.secs - 2.000123).abs() < 1e-9);
        assert_eq!(
            (r.p50_us, r.p99_us, r.p999_us),
            (Some(1012.0), Some(2950.0), Some(8100.0))
        );
    }

    #[test]
    fn output_without_the_done_line_is_an_error() {
        assert!(parse("Requests/sec: 1\n").is_err());
    }

    #[test]
    fn a_proxied_run_uses_the_absolute_form_and_a_direct_one_the_origin_form() {
        let run = WrkRun {
            connect: "127.0.0.1:3128".parse().expect("addr"),
            via_proxy: true,
            upstream: "127.0.0.1:8080".parse().expect("addr"),
            path: "/small",
            threads: 1,
            connections: 1,
            duration: Duration::from_secs(1),
        };
        let s = script(&run);
        assert!(s.contains("wrk.path = \"http://127.0.0.1:8080/small\""));
        let direct = WrkRun {
            via_proxy: false,
            ..run
        };
        assert!(script(&direct).contains("wrk.path = \"/small\""));
    }
}
