//! A client for the sidecar's admin API (`/healthz`, `/v1/decisions`, `/v1/decisions/follow`,
//! `/v1/inbox`, `/v1/inbox/{seq}`, `/v1/deliver`, `/metrics`), over plain HTTP/1.1 to the address a
//! runtime gives. A coded refusal from the sidecar (`{code, statement, next}`) is passed on
//! as that report.

use std::net::SocketAddr;
use std::pin::Pin;
use std::time::Duration;

use af_policy::error::{CATALOGUE, Report};
use af_sidecar_api::admin::{
    DecisionsQuery, Delivered, Delivery, InboxQuery, MAX_LIMIT, Page, Refusal,
};
use af_sidecar_api::containment::ContainmentPage;
use af_sidecar_api::journal::Record;
use bytes::Bytes;
use futures_util::Stream;
use http_body_util::{BodyExt, Full};
use hyper::{Method, Request, StatusCode};
use hyper_util::rt::TokioIo;
use serde::Serialize;
use tokio::net::TcpStream;

use crate::runtime::RuntimeError;

/// How long to wait for a connection and a response head.
const TIMEOUT: Duration = Duration::from_secs(5);
/// How long a delivery may take: longer than the sidecar's own 30 s, so its coded answer wins.
const DELIVER_TIMEOUT: Duration = Duration::from_secs(35);

/// `?a=1&b=2`, or nothing when every field is unset.
fn query_string(query: &impl Serialize) -> Result<String, RuntimeError> {
    let text = serde_urlencoded::to_string(query).map_err(|e| {
        RuntimeError::AdminUnreachable(format!("the query could not be encoded: {e}"))
    })?;
    Ok(if text.is_empty() {
        text
    } else {
        format!("?{text}")
    })
}

type Body = hyper::body::Incoming;

/// One request; the response whatever its status, or why none came.
async fn exchange(
    addr: SocketAddr,
    method: Method,
    path: &str,
    token: Option<&str>,
    body: Option<Vec<u8>>,
    timeout: Duration,
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
    let mut req = Request::builder()
        .method(method)
        .uri(path)
        .header("host", addr.to_string());
    if let Some(t) = token {
        req = req.header("authorization", format!("Bearer {t}"));
    }
    if body.is_some() {
        req = req.header("content-type", "application/json");
    }
    let req = req
        .body(Full::new(Bytes::from(body.unwrap_or_default())))
        .map_err(|e| unreachable(&e))?;
    let resp = tokio::time::timeout(timeout, sender.send_request(req))
        .await
        .map_err(|e| unreachable(&e))?
        .map_err(|e| unreachable(&e))?;
    Ok(resp)
}

/// One request whose answer must be 200; any other is the sidecar's refusal.
async fn send(
    addr: SocketAddr,
    method: Method,
    path: &str,
    token: Option<&str>,
    body: Option<Vec<u8>>,
    timeout: Duration,
) -> Result<hyper::Response<Body>, RuntimeError> {
    let resp = exchange(addr, method, path, token, body, timeout).await?;
    expect_ok(addr, path, resp).await
}

/// The response when it is 200, else the sidecar's refusal.
async fn expect_ok(
    addr: SocketAddr,
    path: &str,
    resp: hyper::Response<Body>,
) -> Result<hyper::Response<Body>, RuntimeError> {
    if resp.status() != StatusCode::OK {
        let status = resp.status();
        let body = resp
            .into_body()
            .collect()
            .await
            .map(|b| b.to_bytes())
            .unwrap_or_default();
        return Err(refused(addr, path, status, &body));
    }
    Ok(resp)
}

/// The sidecar's own coded refusal when the body is one, else what it answered.
fn refused(addr: SocketAddr, path: &str, status: StatusCode, body: &[u8]) -> RuntimeError {
    let coded = serde_json::from_slice::<Refusal>(body).ok().and_then(|r| {
        let code = CATALOGUE.iter().find(|c| c.code == r.code)?;
        Some(Report::new(code, r.statement).with_next(r.next))
    });
    match coded {
        Some(report) => RuntimeError::AdminRefused(report),
        None => RuntimeError::AdminUnreachable(format!(
            "{addr}{path} answered {status}: {}",
            String::from_utf8_lossy(body).trim()
        )),
    }
}

async fn get_json<T: serde::de::DeserializeOwned>(
    addr: SocketAddr,
    path: &str,
    token: &str,
) -> Result<T, RuntimeError> {
    let resp = send(addr, Method::GET, path, Some(token), None, TIMEOUT).await?;
    read_json(resp).await
}

async fn read_body(resp: hyper::Response<Body>) -> Result<Bytes, RuntimeError> {
    Ok(resp
        .into_body()
        .collect()
        .await
        .map_err(|e| RuntimeError::AdminUnreachable(e.to_string()))?
        .to_bytes())
}

async fn read_json<T: serde::de::DeserializeOwned>(
    resp: hyper::Response<Body>,
) -> Result<T, RuntimeError> {
    let body = read_body(resp).await?;
    serde_json::from_slice(&body).map_err(|e| {
        RuntimeError::AdminUnreachable(format!("the answer is not the expected JSON: {e}"))
    })
}

/// `GET /healthz`.
pub async fn healthz(addr: SocketAddr) -> Result<(), RuntimeError> {
    send(addr, Method::GET, "/healthz", None, None, TIMEOUT)
        .await
        .map(|_| ())
}

/// `GET /v1/decisions`.
pub async fn decisions(
    addr: SocketAddr,
    token: &str,
    query: &DecisionsQuery,
) -> Result<Page, RuntimeError> {
    let path = format!("/v1/decisions{}", query_string(query)?);
    get_json(addr, &path, token).await
}

/// Every decision so far, page by page.
pub async fn all_decisions(
    addr: SocketAddr,
    token: &str,
    query: &DecisionsQuery,
) -> Result<Vec<Record>, RuntimeError> {
    let mut q = DecisionsQuery {
        limit: Some(MAX_LIMIT),
        ..query.clone()
    };
    let mut out = Vec::new();
    loop {
        let page = decisions(addr, token, &q).await?;
        let full = page.records.len() >= MAX_LIMIT;
        out.extend(page.records);
        if !full {
            return Ok(out);
        }
        q.since = Some(page.next_since);
    }
}

/// The newest `n` decisions matching `query`, oldest first (what `tail` would show): asked of
/// the sidecar in one page when `n` fits one, else read whole and cut.
pub async fn newest_decisions(
    addr: SocketAddr,
    token: &str,
    query: &DecisionsQuery,
    n: usize,
) -> Result<Vec<Record>, RuntimeError> {
    if n <= MAX_LIMIT {
        let q = DecisionsQuery {
            limit: Some(n),
            newest: true,
            ..query.clone()
        };
        return Ok(decisions(addr, token, &q).await?.records);
    }
    let mut all = all_decisions(addr, token, query).await?;
    let older = all.len().saturating_sub(n);
    all.drain(..older);
    Ok(all)
}

/// `GET /v1/inbox`: captured messages (records of kind `message`) after `since` whose
/// recipients and subject contain `to` and `subject` (case-insensitive); when more match than
/// `limit`, the newest, oldest first. `next_since` is the sidecar's committed position.
pub async fn inbox(
    addr: SocketAddr,
    token: &str,
    query: &InboxQuery,
) -> Result<Page, RuntimeError> {
    let path = format!("/v1/inbox{}", query_string(query)?);
    get_json(addr, &path, token).await
}

/// `GET /v1/inbox/{seq}`: one captured message, `None` when the journal holds none by that
/// number (never captured, or evicted with its segment).
pub async fn inbox_message(
    addr: SocketAddr,
    token: &str,
    seq: u64,
) -> Result<Option<Record>, RuntimeError> {
    let path = format!("/v1/inbox/{seq}");
    let resp = exchange(addr, Method::GET, &path, Some(token), None, TIMEOUT).await?;
    if resp.status() == StatusCode::NOT_FOUND {
        return Ok(None);
    }
    read_json(expect_ok(addr, &path, resp).await?)
        .await
        .map(Some)
}

/// `GET /v1/containment`: every containment watcher the sidecar heard from; `None` when the
/// sidecar runs no watchers (its document has no containment section).
pub async fn containment(
    addr: SocketAddr,
    token: &str,
) -> Result<Option<ContainmentPage>, RuntimeError> {
    let path = "/v1/containment";
    let resp = exchange(addr, Method::GET, path, Some(token), None, TIMEOUT).await?;
    if resp.status() == StatusCode::NOT_FOUND {
        return Ok(None);
    }
    read_json(expect_ok(addr, path, resp).await?)
        .await
        .map(Some)
}

/// `GET /metrics`: the sidecar's counters, as Prometheus text.
pub async fn metrics(addr: SocketAddr, token: &str) -> Result<String, RuntimeError> {
    let resp = send(addr, Method::GET, "/metrics", Some(token), None, TIMEOUT).await?;
    let body = read_body(resp).await?;
    Ok(String::from_utf8_lossy(&body).into_owned())
}

/// `POST /v1/deliver`: the sidecar sends the request to the service and returns its answer.
pub async fn deliver(
    addr: SocketAddr,
    token: &str,
    delivery: &Delivery,
) -> Result<Delivered, RuntimeError> {
    let body = serde_json::to_vec(delivery).map_err(|e| {
        RuntimeError::AdminUnreachable(format!("the delivery could not be encoded: {e}"))
    })?;
    let resp = send(
        addr,
        Method::POST,
        "/v1/deliver",
        Some(token),
        Some(body),
        DELIVER_TIMEOUT,
    )
    .await?;
    read_json(resp).await
}

/// `GET /v1/decisions/follow`: one record per item, as they are journaled.
pub async fn follow(
    addr: SocketAddr,
    token: &str,
    query: &DecisionsQuery,
) -> Result<Pin<Box<dyn Stream<Item = Result<Record, RuntimeError>> + Send>>, RuntimeError> {
    let unlimited = DecisionsQuery {
        limit: None,
        newest: false,
        ..query.clone()
    };
    let path = format!("/v1/decisions/follow{}", query_string(&unlimited)?);
    let resp = send(addr, Method::GET, &path, Some(token), None, TIMEOUT).await?;
    let body = resp.into_body();
    let stream =
        futures_util::stream::unfold((body, Vec::<u8>::new()), |(mut body, mut buf)| async move {
            loop {
                if let Some(pos) = buf.iter().position(|b| *b == b'\n') {
                    let line: Vec<u8> = buf.drain(..=pos).collect();
                    let item = serde_json::from_slice::<Record>(&line).map_err(|e| {
                        RuntimeError::AdminUnreachable(format!(
                            "a followed record is not a journal record: {e}"
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
    fn queries_are_encoded_and_unset_fields_left_out() {
        let q = DecisionsQuery {
            since: Some(4),
            limit: Some(10),
            newest: true,
            blocked: Some(true),
            host: Some("a b.test".into()),
        };
        assert_eq!(
            query_string(&q).expect("encodes"),
            "?since=4&limit=10&newest=true&blocked=true&host=a+b.test"
        );
        assert_eq!(
            query_string(&DecisionsQuery::default()).expect("encodes"),
            ""
        );
        let inbox = InboxQuery {
            to: Some("alice+test@example.com".into()),
            subject: Some("Verify & go".into()),
            ..InboxQuery::default()
        };
        assert_eq!(
            query_string(&inbox).expect("encodes"),
            "?to=alice%2Btest%40example.com&subject=Verify+%26+go"
        );
    }

    #[test]
    fn a_coded_refusal_is_passed_on_and_anything_else_is_unreachable() {
        let addr = SocketAddr::from(([127, 0, 0, 1], 9));
        let body =
            br#"{"code":"AF-NET-021","statement":"No message 7.","next":"Run af inbox list."}"#;
        match refused(addr, "/v1/inbox/7", StatusCode::NOT_FOUND, body) {
            RuntimeError::AdminRefused(r) => {
                assert_eq!(r.code.code, "AF-NET-021");
                assert_eq!(r.statement, "No message 7.");
                assert_eq!(r.next, "Run af inbox list.");
            }
            other => panic!("{other:?}"),
        }
        let plain = refused(addr, "/x", StatusCode::BAD_GATEWAY, b"upstream gone");
        assert!(
            matches!(&plain, RuntimeError::AdminUnreachable(m) if m.contains("502 Bad Gateway: upstream gone")),
            "{plain:?}"
        );
    }
}
