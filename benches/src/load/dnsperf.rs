//! dnsperf against a DNS server, with a generated file of random outside names.

use std::net::{SocketAddr, UdpSocket};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use super::{LoadResult, tail};
use crate::error::{BenchError, Result};

/// Writes `count` A queries for random names under public-looking suffixes.
pub(crate) fn write_queries(dir: &Path, count: usize, seed: u64) -> Result<PathBuf> {
    let mut rng = fastrand::Rng::with_seed(seed);
    let suffixes = ["com", "net", "org", "io", "dev"];
    let mut text = String::with_capacity(count * 32);
    for _ in 0..count {
        let label: String = (0..12)
            .map(|_| rng.alphanumeric().to_ascii_lowercase())
            .collect();
        let suffix = suffixes[rng.usize(..suffixes.len())];
        text.push_str(&format!("{label}.bench-{}.{suffix} A\n", rng.u16(..1000)));
    }
    let path = dir.join("queries.txt");
    std::fs::write(&path, text).map_err(|e| BenchError::io("write dnsperf queries", e))?;
    Ok(path)
}

/// Runs dnsperf for `duration` with `clients` sockets over two threads.
pub(crate) fn run(
    server: SocketAddr,
    queries: &Path,
    duration: Duration,
    clients: u32,
) -> Result<LoadResult> {
    let out = Command::new("dnsperf")
        .arg("-s")
        .arg(server.ip().to_string())
        .arg("-p")
        .arg(server.port().to_string())
        .arg("-d")
        .arg(queries)
        .arg("-l")
        .arg(duration.as_secs().max(1).to_string())
        .arg("-c")
        .arg(clients.to_string())
        .arg("-T")
        .arg("2")
        .arg("-q")
        .arg("256")
        .arg("-t")
        .arg("2")
        .output()
        .map_err(|source| BenchError::Spawn {
            program: "dnsperf".into(),
            source,
        })?;
    if !out.status.success() {
        return Err(BenchError::Load {
            tool: "dnsperf",
            status: out.status.to_string(),
            stderr: tail(&out.stderr),
        });
    }
    parse(&String::from_utf8_lossy(&out.stdout))
}

/// Reads dnsperf's statistics block.
pub(crate) fn parse(stdout: &str) -> Result<LoadResult> {
    let value = |key: &str| -> Result<f64> {
        stdout
            .lines()
            .find_map(|l| l.trim().strip_prefix(key))
            .and_then(|rest| rest.split_whitespace().next())
            .and_then(|v| v.parse::<f64>().ok())
            .ok_or_else(|| BenchError::Parse {
                tool: "dnsperf",
                reason: format!("missing {key:?}"),
            })
    };
    let completed = value("Queries completed:")?;
    let qps = value("Queries per second:")?;
    let secs = value("Run time (s):")?;
    let lost = value("Queries lost:")?;
    let mean = value("Average Latency (s):")?;
    // Anything but NOERROR is an error too: every name has an A answer.
    let noerror = stdout
        .lines()
        .find_map(|l| l.trim().strip_prefix("Response codes:"))
        .and_then(|codes| {
            let mut it = codes.split_whitespace();
            while let Some(tok) = it.next() {
                if tok == "NOERROR" {
                    return it.next()?.parse::<f64>().ok();
                }
            }
            None
        })
        .unwrap_or(0.0);
    Ok(LoadResult {
        ops: completed as u64,
        secs: if qps > 0.0 { completed / qps } else { secs },
        bytes: 0,
        p50_us: None,
        p99_us: None,
        p999_us: None,
        mean_us: Some(mean * 1e6),
        errors: lost as u64 + (completed - noerror).max(0.0) as u64,
    })
}

/// Whether a DNS server at `addr` answers one A query within 200 ms.
pub(crate) fn probe(addr: SocketAddr) -> bool {
    let Ok(sock) = UdpSocket::bind("127.0.0.1:0") else {
        return false;
    };
    if sock
        .set_read_timeout(Some(Duration::from_millis(200)))
        .is_err()
    {
        return false;
    }
    // id 0x4242, RD, one question: probe.example. A IN
    let mut q = vec![0x42, 0x42, 0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0];
    for label in ["probe", "example"] {
        q.push(label.len() as u8);
        q.extend_from_slice(label.as_bytes());
    }
    q.extend_from_slice(&[0, 0, 1, 0, 1]);
    if sock.send_to(&q, addr).is_err() {
        return false;
    }
    let mut buf = [0u8; 512];
    matches!(sock.recv_from(&mut buf), Ok((n, _)) if n >= 12 && buf[..2] == [0x42, 0x42])
}

#[cfg(test)]
mod tests {
    use super::*;

    const OUTPUT: &str = "DNS Performance Testing Tool\nVersion 2.10.0\n\n[Status] Command line: dnsperf -s 127.0.0.1\n[Status] Testing complete (time limit)\n\nStatistics:\n\n  Queries sent:         200100\n  Queries completed:    200000 (99.95%)\n  Queries lost:         100 (0.05%)\n\n  Response codes:       NOERROR 199990 (99.99%), SERVFAIL 10 (0.01%)\n  Average packet size:  request 40, response 56\n  Run time (s):         2.000420\n  Queries per second:   100000.000000\n\n  Average Latency (s):  0.000812 (min 0.000021, max 0.010394)\n  Latency StdDev (s):   0.000410\n\n";

    #[test]
    fn the_statistics_block_is_parsed() {
        let r = parse(OUTPUT).expect("parses");
        assert_eq!(r.ops, 200_000);
        assert!((r.secs - 2.0).abs() < 1e-9);
        assert_eq!(r.errors, 110);
        assert!((r.mean_us.expect("mean") - 812.0).abs() < 1e-6);
    }

    #[test]
    fn the_query_file_has_one_a_query_per_line() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = write_queries(dir.path(), 100, 7).expect("written");
        let text = std::fs::read_to_string(path).expect("read");
        assert_eq!(text.lines().count(), 100);
        assert!(
            text.lines()
                .all(|l| l.ends_with(" A") && l.contains(".bench-"))
        );
    }
}
