//! Idle keep-alive connections held open through a proxy.

use std::net::SocketAddr;
use std::sync::Arc;

use serde::Serialize;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::Semaphore;

use super::tunnel::find_head_end;
use crate::error::{BenchError, Result};

/// Opens `count` client connections to `proxy`, each completing one
/// keep-alive request for `url` (absolute form), and returns the ones that
/// did (within 10 s each) and how many did not. At most `parallel` are being
/// set up at once, so the proxy's upstream pool stays small and the
/// measurement is about client connections.
pub(crate) async fn open(
    proxy: SocketAddr,
    url: &str,
    host: &str,
    count: usize,
    parallel: usize,
) -> Result<(Vec<TcpStream>, usize)> {
    let request = Arc::new(format!("GET {url} HTTP/1.1\r\nHost: {host}\r\n\r\n").into_bytes());
    let gate = Arc::new(Semaphore::new(parallel));
    let mut tasks = Vec::with_capacity(count);
    for _ in 0..count {
        let (request, gate) = (request.clone(), gate.clone());
        tasks.push(tokio::spawn(async move {
            let _permit = gate.acquire_owned().await;
            tokio::time::timeout(std::time::Duration::from_secs(10), one(proxy, &request)).await
        }));
    }
    let mut conns = Vec::with_capacity(count);
    let mut failed = 0;
    for t in tasks {
        match t
            .await
            .map_err(|e| BenchError::Protocol(format!("idle task: {e}")))?
        {
            Ok(Ok(conn)) => conns.push(conn),
            _ => failed += 1,
        }
    }
    Ok((conns, failed))
}

/// One connection, one request, the whole response read, connection kept.
async fn one(proxy: SocketAddr, request: &[u8]) -> Result<TcpStream> {
    let mut s = TcpStream::connect(proxy)
        .await
        .map_err(|e| BenchError::io(format!("connect {proxy}"), e))?;
    exchange(&mut s, request).await.map_err(|failure| {
        BenchError::Protocol(format!("idle-test request: {}", failure.describe()))
    })?;
    Ok(s)
}

/// Why a keep-alive exchange failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "kebab-case")]
pub(crate) enum Failure {
    /// The far side closed the connection before a whole answer.
    Closed,
    /// An answer other than 200 (its status).
    Status(u16),
    /// An answer without a readable head or `content-length`.
    Malformed,
    /// A read or write failed.
    Io,
}

impl Failure {
    /// As a sentence fragment.
    pub(crate) fn describe(self) -> String {
        match self {
            Failure::Closed => "the proxy closed the connection".into(),
            Failure::Status(code) => format!("answered {code}"),
            Failure::Malformed => "an answer without a readable head or content-length".into(),
            Failure::Io => "a read or write failed".into(),
        }
    }
}

/// Sends `request` on `s` and reads its whole 200 answer, leaving the connection open.
pub(crate) async fn exchange(
    s: &mut TcpStream,
    request: &[u8],
) -> std::result::Result<(), Failure> {
    s.write_all(request).await.map_err(|_| Failure::Io)?;
    let mut buf = Vec::with_capacity(1024);
    let mut chunk = [0u8; 4096];
    loop {
        let n = s.read(&mut chunk).await.map_err(|_| Failure::Io)?;
        if n == 0 {
            return Err(Failure::Closed);
        }
        buf.extend_from_slice(&chunk[..n]);
        if let Some(end) = find_head_end(&buf) {
            let head = String::from_utf8_lossy(&buf[..end]).to_ascii_lowercase();
            let status = head
                .split_whitespace()
                .nth(1)
                .and_then(|c| c.parse::<u16>().ok())
                .ok_or(Failure::Malformed)?;
            if status != 200 {
                return Err(Failure::Status(status));
            }
            let len = head
                .lines()
                .find_map(|l| l.strip_prefix("content-length:"))
                .and_then(|v| v.trim().parse::<usize>().ok())
                .ok_or(Failure::Malformed)?;
            if buf.len() - end >= len {
                return Ok(());
            }
        }
    }
}

/// How many of `conns` the far side has closed (EOF or error within 100 ms).
pub(crate) async fn closed(conns: &[TcpStream]) -> usize {
    let checks = conns.iter().map(|s| async move {
        let mut byte = [0u8; 1];
        matches!(
            tokio::time::timeout(std::time::Duration::from_millis(100), s.peek(&mut byte)).await,
            Ok(Ok(0)) | Ok(Err(_))
        )
    });
    futures_util::future::join_all(checks)
        .await
        .into_iter()
        .filter(|c| *c)
        .count()
}
