//! A new connection per request: connect, one `Connection: close` request,
//! read the whole response, drop. Closed loop over a fixed number of
//! workers; the latency includes the connect.
//!
//! wrk is not used here: it ignores the `Connection: close` it sends and
//! counts a proxy that closes without echoing the header (tinyproxy,
//! privoxy) as a read error on every request.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use super::LoadResult;
use super::tunnel::find_head_end;
use crate::error::{BenchError, Result};

/// Runs `workers` clients against `connect` for `duration`; `request` is
/// sent verbatim on every new connection.
pub(crate) async fn run(
    connect: SocketAddr,
    request: Vec<u8>,
    workers: usize,
    duration: Duration,
) -> Result<LoadResult> {
    let request = Arc::new(request);
    let deadline = Instant::now() + duration;
    let start = Instant::now();
    let tasks: Vec<_> = (0..workers)
        .map(|_| {
            let request = request.clone();
            tokio::spawn(async move {
                let mut hist = histogram()?;
                let (mut bytes, mut errors) = (0u64, 0u64);
                while Instant::now() < deadline {
                    let t0 = Instant::now();
                    match tokio::time::timeout(Duration::from_secs(5), one(connect, &request)).await
                    {
                        Ok(Ok(n)) => {
                            hist.saturating_record(t0.elapsed().as_micros() as u64);
                            bytes += n;
                        }
                        _ => errors += 1,
                    }
                }
                Ok::<_, BenchError>((hist, bytes, errors))
            })
        })
        .collect();
    let mut all = histogram()?;
    let mut result = LoadResult::default();
    for t in tasks {
        let (hist, bytes, errors) = t
            .await
            .map_err(|e| BenchError::Protocol(format!("worker: {e}")))??;
        all.add(&hist)
            .map_err(|e| BenchError::Protocol(e.to_string()))?;
        result.bytes += bytes;
        result.errors += errors;
    }
    result.secs = start.elapsed().as_secs_f64();
    result.ops = all.len();
    if !all.is_empty() {
        result.p50_us = Some(all.value_at_quantile(0.5) as f64);
        result.p99_us = Some(all.value_at_quantile(0.99) as f64);
        result.p999_us = Some(all.value_at_quantile(0.999) as f64);
        result.mean_us = Some(all.mean());
    }
    Ok(result)
}

/// 1 µs to 60 s, 3 significant digits.
pub(crate) fn histogram() -> Result<Histogram<u64>> {
    Histogram::new_with_bounds(1, 60_000_000, 3).map_err(|e| BenchError::Protocol(e.to_string()))
}

/// One connection, one request; returns the body length.
async fn one(connect: SocketAddr, request: &[u8]) -> Result<u64> {
    let mut s = TcpStream::connect(connect)
        .await
        .map_err(|e| BenchError::io("connect", e))?;
    let _ = s.set_nodelay(true);
    s.write_all(request)
        .await
        .map_err(|e| BenchError::io("send", e))?;
    let mut buf = Vec::with_capacity(4096);
    let mut chunk = [0u8; 16 * 1024];
    let mut expected: Option<(usize, usize)> = None;
    loop {
        let n = s
            .read(&mut chunk)
            .await
            .map_err(|e| BenchError::io("read", e))?;
        if n == 0 {
            return match expected {
                None => Err(BenchError::Protocol("closed before a full response".into())),
                Some((end, _)) => Ok((buf.len() - end) as u64),
            };
        }
        buf.extend_from_slice(&chunk[..n]);
        if expected.is_none()
            && let Some(end) = find_head_end(&buf)
        {
            let head = String::from_utf8_lossy(&buf[..end]).to_ascii_lowercase();
            if !head.starts_with("http/1.1 200") && !head.starts_with("http/1.0 200") {
                return Err(BenchError::Protocol("status not 200".into()));
            }
            let len = head
                .lines()
                .find_map(|l| l.strip_prefix("content-length:"))
                .and_then(|v| v.trim().parse::<usize>().ok())
                .unwrap_or(usize::MAX);
            expected = Some((end, len));
        }
        if let Some((end, len)) = expected
            && buf.len() - end >= len
        {
            return Ok(len as u64);
        }
    }
}
