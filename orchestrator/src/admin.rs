//! A client for the sidecar's admin API (`/healthz`, `/v1/decisions`,
//! `/v1/decisions/follow`), over plain HTTP/1.1 to the address a runtime gives.

use std::net::SocketAddr;
use std::pin::Pin;
use std::time::Duration;

use bytes::Bytes;
use futures_util::Stream;
use http_body_util::{BodyExt, Empty};
use hyper::{Request, StatusCode};
use hyper_util::rt::TokioIo;
use serde_json::Value;
use tokio::net::TcpStream;

use crate::runtime::RuntimeError;

/// How long to wait for a connection and a response head.
const TIMEOUT: Duration = Duration::from_secs(5);

/// What to ask for.
#[derive(Debug, Clone, Default)]
pub struct Query {
    /// Records after this sequence number.
    pub since: Option<u64>,
    /// At most this many records (not for follow).
    pub limit: Option<usize>,
    /// Only refused ones.
    pub blocked: bool,
    /// Only this host.
    pub host: Option<String>,
}

impl Query {
    fn to_query_string(&self, with_limit: bool) -> String {
        let mut parts = Vec::new();
        if let Some(s) = self.since {
            parts.push(format!("since={s}"));
        }
        if with_limit && let Some(l) = self.limit {
            parts.push(format!("limit={l}"));
        }
        if self.blocked {
            parts.push("blocked=true".to_owned());
        }
        if let Some(h) = &self.host {
            let enc: String = h
                .bytes()
                .map(|b| {
                    if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
                        (b as char).to_string()
                    } else {
                        format!("%{b:02X}")
                    }
                })
                .collect();
            parts.push(format!("host={enc}"));
        }
        if parts.is_empty() {
            String::new()
        } else {
            format!("?{}", parts.join("&"))
        }
    }
}

/// One page of decisions.
#[derive(Debug, Clone)]
pub struct Page {
    /// The records, oldest first.
    pub records: Vec<Value>,
    /// The sequence number to ask `since` next.
    pub next_since: u64,
}

type Body = hyper::body::Incoming;

async fn get(
    addr: SocketAddr,
    path: &str,
    token: Option<&str>,
) -> Result<hyper::Response<Body>, RuntimeError> {
    let unreachable =
        |e: &dyn std::fmt::Display| RuntimeError::AdminUnreachable(format!("{addr}: {e}"));
    let stream = tokio::time::timeout(TIMEOUT, TcpStream::connect(addr))
        .await
        .map_err(|e| unreachable(&e))?
        .map_err(|e| unreachable(&e))?;
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .map_err(|e| unreachable(&e))?;
    tokio::spawn(conn);
    let mut req = Request::get(path).header("host", addr.to_string());
    if let Some(t) = token {
        req = req.header("authorization", format!("Bearer {t}"));
    }
    let req = req
        .body(Empty::<Bytes>::new())
        .map_err(|e| unreachable(&e))?;
    let resp = tokio::time::timeout(TIMEOUT, sender.send_request(req))
        .await
        .map_err(|e| unreachable(&e))?
        .map_err(|e| unreachable(&e))?;
    if resp.status() != StatusCode::OK {
        let status = resp.status();
        let body = resp
            .into_body()
            .collect()
            .await
            .map(|b| b.to_bytes())
            .unwrap_or_default();
        return Err(RuntimeError::AdminUnreachable(format!(
            "{addr}{path} answered {status}: {}",
            String::from_utf8_lossy(&body).trim()
        )));
    }
    Ok(resp)
}

/// `GET /healthz`.
pub async fn healthz(addr: SocketAddr) -> Result<(), RuntimeError> {
    get(addr, "/healthz", None).await.map(|_| ())
}

/// `GET /v1/decisions`.
pub async fn decisions(addr: SocketAddr, token: &str, query: &Query) -> Result<Page, RuntimeError> {
    let path = format!("/v1/decisions{}", query.to_query_string(true));
    let resp = get(addr, &path, Some(token)).await?;
    let body = resp
        .into_body()
        .collect()
        .await
        .map_err(|e| RuntimeError::AdminUnreachable(e.to_string()))?
        .to_bytes();
    let doc: Value = serde_json::from_slice(&body)
        .map_err(|e| RuntimeError::AdminUnreachable(format!("the answer is not JSON: {e}")))?;
    let records = doc["records"].as_array().cloned().unwrap_or_default();
    let next_since = doc["next_since"].as_u64().unwrap_or(0);
    Ok(Page {
        records,
        next_since,
    })
}

/// Every decision so far, page by page.
pub async fn all_decisions(
    addr: SocketAddr,
    token: &str,
    query: &Query,
) -> Result<Vec<Value>, RuntimeError> {
    let mut q = query.clone();
    q.limit = Some(1000);
    let mut out = Vec::new();
    loop {
        let page = decisions(addr, token, &q).await?;
        let n = page.records.len();
        out.extend(page.records);
        if n < 1000 {
            return Ok(out);
        }
        q.since = Some(page.next_since);
    }
}

/// `GET /v1/decisions/follow`: one record per item, as they are journaled.
pub async fn follow(
    addr: SocketAddr,
    token: &str,
    query: &Query,
) -> Result<Pin<Box<dyn Stream<Item = Result<Value, RuntimeError>> + Send>>, RuntimeError> {
    let path = format!("/v1/decisions/follow{}", query.to_query_string(false));
    let resp = get(addr, &path, Some(token)).await?;
    let body = resp.into_body();
    let stream =
        futures_util::stream::unfold((body, Vec::<u8>::new()), |(mut body, mut buf)| async move {
            loop {
                if let Some(pos) = buf.iter().position(|b| *b == b'\n') {
                    let line: Vec<u8> = buf.drain(..=pos).collect();
                    let item = serde_json::from_slice::<Value>(&line).map_err(|e| {
                        RuntimeError::AdminUnreachable(format!(
                            "a followed record is not JSON: {e}"
                        ))
                    });
                    return Some((item, (body, buf)));
                }
                match body.frame().await {
                    Some(Ok(frame)) => {
                        if let Some(data) = frame.data_ref() {
                            buf.extend_from_slice(data);
                        }
                    }
                    Some(Err(e)) => {
                        return Some((
                            Err(RuntimeError::AdminUnreachable(e.to_string())),
                            (body, Vec::new()),
                        ));
                    }
                    None => return None,
                }
            }
        });
    Ok(Box::pin(stream))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn queries_are_encoded() {
        let q = Query {
            since: Some(4),
            limit: Some(10),
            blocked: true,
            host: Some("a b.test".into()),
        };
        assert_eq!(
            q.to_query_string(true),
            "?since=4&limit=10&blocked=true&host=a%20b.test"
        );
        assert_eq!(
            q.to_query_string(false),
            "?since=4&blocked=true&host=a%20b.test"
        );
        assert_eq!(Query::default().to_query_string(true), "");
    }
}
