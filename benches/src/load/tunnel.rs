//! CONNECT tunnels: opening one, and pulling bulk data through it.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use super::LoadResult;
use crate::error::{BenchError, Result};

/// Opens a TCP stream to `target`, through the forward proxy `proxy` with
/// CONNECT when there is one. Returns the stream and any tunnel bytes that
/// arrived with the proxy's answer.
pub(crate) async fn open(
    proxy: Option<SocketAddr>,
    target: SocketAddr,
) -> Result<(TcpStream, Vec<u8>)> {
    let Some(proxy) = proxy else {
        let s = TcpStream::connect(target)
            .await
            .map_err(|e| BenchError::io(format!("connect {target}"), e))?;
        let _ = s.set_nodelay(true);
        return Ok((s, Vec::new()));
    };
    let mut s = TcpStream::connect(proxy)
        .await
        .map_err(|e| BenchError::io(format!("connect proxy {proxy}"), e))?;
    let _ = s.set_nodelay(true);
    let req = format!("CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n\r\n");
    s.write_all(req.as_bytes())
        .await
        .map_err(|e| BenchError::io("send CONNECT", e))?;
    let mut buf = Vec::with_capacity(1024);
    let mut chunk = [0u8; 1024];
    loop {
        let n = s
            .read(&mut chunk)
            .await
            .map_err(|e| BenchError::io("read CONNECT answer", e))?;
        if n == 0 {
            return Err(BenchError::Protocol("proxy closed the CONNECT".into()));
        }
        buf.extend_from_slice(&chunk[..n]);
        if let Some(end) = find_head_end(&buf) {
            let head = String::from_utf8_lossy(&buf[..end]);
            let status = head.split_whitespace().nth(1).unwrap_or("");
            if !status.starts_with('2') {
                let line = head.lines().next().unwrap_or("").to_string();
                return Err(BenchError::Protocol(format!("CONNECT refused: {line}")));
            }
            return Ok((s, buf[end..].to_vec()));
        }
        if buf.len() > 64 * 1024 {
            return Err(BenchError::Protocol("CONNECT answer head too long".into()));
        }
    }
}

/// Index just past the blank line that ends an HTTP head.
pub(crate) fn find_head_end(buf: &[u8]) -> Option<usize> {
    buf.windows(4).position(|w| w == b"\r\n\r\n").map(|i| i + 4)
}

/// Reads from the bulk source through `streams` tunnels for `duration`.
pub(crate) async fn bulk(
    proxy: Option<SocketAddr>,
    source: SocketAddr,
    streams: usize,
    duration: Duration,
) -> Result<LoadResult> {
    let mut conns = Vec::with_capacity(streams);
    for _ in 0..streams {
        conns.push(open(proxy, source).await?);
    }
    let start = Instant::now();
    let deadline = tokio::time::Instant::now() + duration;
    let tasks: Vec<_> = conns
        .into_iter()
        .map(|(mut s, early)| {
            tokio::spawn(async move {
                let mut total = early.len() as u64;
                let mut buf = vec![0u8; 256 * 1024];
                loop {
                    match tokio::time::timeout_at(deadline, s.read(&mut buf)).await {
                        Ok(Ok(0)) | Ok(Err(_)) => return (total, 1u64),
                        Ok(Ok(n)) => total += n as u64,
                        Err(_) => return (total, 0),
                    }
                }
            })
        })
        .collect();
    let mut result = LoadResult::default();
    for t in tasks {
        let (bytes, errors) = t
            .await
            .map_err(|e| BenchError::Protocol(format!("tunnel task: {e}")))?;
        result.bytes += bytes;
        result.errors += errors;
    }
    result.secs = start.elapsed().as_secs_f64();
    result.ops = streams as u64;
    Ok(result)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_head_ends_at_the_blank_line() {
        let buf = b"HTTP/1.1 200 Connection established\r\n\r\nDATA";
        let end = find_head_end(buf).expect("complete");
        assert_eq!(&buf[end..], b"DATA");
        assert_eq!(find_head_end(b"HTTP/1.1 200 OK\r\n"), None);
    }
}
