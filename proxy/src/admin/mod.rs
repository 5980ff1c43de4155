//! The admin API, on its own listener and never mixed with the data path.
//!
//! `GET /healthz` (no token), and with `Authorization: Bearer <token>`: `GET /readyz`,
//! `GET /v1/decisions`, `GET /v1/decisions/follow` (NDJSON stream), `GET /metrics`,
//! `GET /v1/inbox`, `GET /v1/inbox/{seq}` ([`inbox`]), `POST /v1/deliver` ([`deliver`](mod@deliver))
//! and `GET /v1/containment` ([`containment`]; the watchers report on their own listener,
//! [`report`]).

pub(crate) mod containment;
pub(crate) mod deliver;
pub(crate) mod inbox;
pub(crate) mod report;

use std::convert::Infallible;
use std::sync::Arc;

use af_policy::error::{Report, codes};
use af_sidecar_api::admin::{DEFAULT_LIMIT, Delivery, MAX_LIMIT, Ready, Refusal};
use bytes::Bytes;
use futures_util::stream;
use http::{HeaderValue, Method, Request, Response, StatusCode, header};
use http_body_util::combinators::UnsyncBoxBody;
use http_body_util::{BodyExt, Full, StreamBody};
use hyper::body::{Frame, Incoming};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::TcpListener;
use tokio::sync::{Semaphore, mpsc};

use crate::drain::Drain;
use crate::metrics::Metrics;
use crate::record::journal::{Journal, Query};

type AdminBody = UnsyncBoxBody<Bytes, Infallible>;

/// What the admin API serves from.
pub(crate) struct Admin {
    /// The journal.
    pub journal: Journal,
    /// The admin API's connection and follow tasks, stopped after the data path's.
    pub drain: Drain,
    /// Counters.
    pub metrics: Arc<Metrics>,
    /// `Bearer <token>`, precomputed.
    pub expected_auth: Vec<u8>,
    /// Where `POST /v1/deliver` may deliver.
    pub inside: deliver::Inside,
    /// The containment watchers' reports, when the section is configured.
    pub containment: Option<Arc<containment::Watchers>>,
}

/// Largest `POST /v1/deliver` request body.
const MAX_DELIVERY_BYTES: usize = 2 * 1024 * 1024;

/// Admin connections open at once; past it a new one is closed at once. The admin API is for
/// the orchestrator and a few followers, and its connections are not under the data
/// listeners' `limits.max_connections`, so it has its own bound.
pub const MAX_CONNECTIONS: usize = 64;

/// Accept admin connections until the admin API's drain is stopping.
pub(crate) async fn accept_loop(listener: TcpListener, admin: Arc<Admin>) {
    let open = Arc::new(Semaphore::new(MAX_CONNECTIONS));
    let drain = admin.drain.clone();
    let stopping = drain.stopping();
    tokio::pin!(stopping);
    loop {
        let accepted = tokio::select! {
            accepted = listener.accept() => accepted,
            () = &mut stopping => return,
        };
        let (stream, peer) = match accepted {
            Ok(x) => x,
            Err(e) => {
                tracing::warn!(error = %e, "admin accept failed");
                tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                continue;
            }
        };
        let Ok(place) = open.clone().try_acquire_owned() else {
            tracing::warn!(%peer, max = MAX_CONNECTIONS, "admin: too many connections, closed");
            continue;
        };
        let admin = admin.clone();
        drain.spawn(async move {
            let _place = place;
            let svc = service_fn(move |req| {
                let admin = admin.clone();
                async move { Ok::<_, Infallible>(route(&admin, req).await) }
            });
            // Follow streams stay open; only the request head is timed.
            let _ = http1::Builder::new()
                .timer(TokioTimer::new())
                .header_read_timeout(std::time::Duration::from_secs(10))
                .serve_connection(TokioIo::new(stream), svc)
                .await;
        });
    }
}

async fn route(admin: &Admin, req: Request<Incoming>) -> Response<AdminBody> {
    let path = req.uri().path();
    if path == "/healthz" {
        return text(StatusCode::OK, "text/plain; charset=utf-8", "ok\n".into());
    }
    if !bearer(&admin.expected_auth, req.headers()) {
        let report = Report::new(
            &codes::NET_UNAUTHORIZED,
            "The admin API needs the environment's admin token as a Bearer token.",
        );
        let mut resp = error(StatusCode::UNAUTHORIZED, &report);
        resp.headers_mut()
            .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
        return resp;
    }
    if req.method() == Method::POST && path == "/v1/deliver" {
        return deliver(admin, req).await;
    }
    if req.method() != Method::GET {
        let report = Report::new(
            &codes::NET_ADMIN_BAD_REQUEST,
            format!("{} {path} is not supported.", req.method()),
        )
        .with_next("Use GET, or POST /v1/deliver.");
        return error(StatusCode::METHOD_NOT_ALLOWED, &report);
    }
    if let Some(seq) = path.strip_prefix("/v1/inbox/") {
        return inbox_message(admin, seq).await;
    }
    let query = req.uri().query().unwrap_or("");
    match path {
        "/readyz" => {
            let ready = Ready {
                ready: true,
                committed: admin.journal.committed(),
            };
            text(StatusCode::OK, "application/json", json_line(&ready))
        }
        "/metrics" => text(
            StatusCode::OK,
            "text/plain; version=0.0.4",
            admin.metrics.render(),
        ),
        "/v1/decisions" => match parse_query(query, true) {
            Ok(q) => decisions(admin, q).await,
            Err(report) => error(StatusCode::BAD_REQUEST, &report),
        },
        "/v1/decisions/follow" => match parse_query(query, false) {
            Ok(q) => follow(admin, q.query),
            Err(report) => error(StatusCode::BAD_REQUEST, &report),
        },
        "/v1/inbox" => match inbox::InboxQuery::parse(query) {
            Ok(q) => inbox_list(admin, &q).await,
            Err(report) => error(StatusCode::BAD_REQUEST, &report),
        },
        "/v1/containment" => match &admin.containment {
            Some(watchers) => text(
                StatusCode::OK,
                "application/json",
                json_line(&watchers.page()),
            ),
            None => {
                let report = Report::new(
                    &codes::NET_ADMIN_BAD_REQUEST,
                    "This sidecar has no containment watchers: its document has no containment section.",
                )
                .with_next("Containment is watched on the Kubernetes runtime; see docs/kubernetes-runtime.md.");
                error(StatusCode::NOT_FOUND, &report)
            }
        },
        _ => {
            let report = Report::new(
                &codes::NET_ADMIN_BAD_REQUEST,
                format!("{path} is not an admin API route."),
            )
            .with_next("Use /healthz, /readyz, /metrics, /v1/decisions, /v1/decisions/follow, /v1/inbox, /v1/deliver or /v1/containment.");
            error(StatusCode::NOT_FOUND, &report)
        }
    }
}

/// Whether `headers` carry exactly `expected` (`Bearer <token>`) as their authorization.
fn bearer(expected: &[u8], headers: &http::HeaderMap) -> bool {
    let Some(got) = headers.get(header::AUTHORIZATION) else {
        return false;
    };
    let got = got.as_bytes();
    // Constant time in the token's content.
    got.len() == expected.len()
        && got
            .iter()
            .zip(expected)
            .fold(0u8, |acc, (a, b)| acc | (a ^ b))
            == 0
}

/// What `/v1/decisions` (or its follow stream) was asked for.
#[derive(Debug, Clone)]
pub(crate) struct DecisionsQuery {
    /// The records to read.
    pub query: Query,
    /// Return the newest `limit` matches (like `tail`) rather than the first after `since`.
    pub newest: bool,
}

/// Parse `since`, `limit` and `newest` (only when `with_limit`), `blocked`, `host`; anything
/// else is refused.
pub(crate) fn parse_query(query: &str, with_limit: bool) -> Result<DecisionsQuery, Report> {
    let mut newest = false;
    let mut q = Query {
        since: 0,
        limit: DEFAULT_LIMIT,
        ..Query::default()
    };
    for pair in query.split('&').filter(|p| !p.is_empty()) {
        let (name, raw) = pair.split_once('=').unwrap_or((pair, ""));
        let value = percent_decode(raw)
            .ok_or_else(|| bad(name, raw, "it is not valid percent-encoded UTF-8"))?;
        match name {
            "since" => {
                q.since = value
                    .parse()
                    .map_err(|_| bad(name, &value, "expected a sequence number"))?
            }
            "limit" if with_limit => {
                q.limit = value
                    .parse()
                    .ok()
                    .filter(|n| (1..=MAX_LIMIT).contains(n))
                    .ok_or_else(|| bad(name, &value, &format!("expected 1 to {MAX_LIMIT}")))?;
            }
            "blocked" => q.blocked = Some(boolean(name, &value)?),
            "newest" if with_limit => newest = boolean(name, &value)?,
            "host" if !value.is_empty() => q.host = Some(value),
            _ => {
                let known = if with_limit {
                    "since, limit, newest, blocked, host"
                } else {
                    "since, blocked, host"
                };
                return Err(bad(name, &value, &format!("known parameters are {known}")));
            }
        }
    }
    Ok(DecisionsQuery { query: q, newest })
}

fn bad(name: &str, value: &str, want: &str) -> Report {
    Report::new(
        &codes::NET_ADMIN_BAD_REQUEST,
        format!("The query parameter {name}={value:?} is not valid: {want}."),
    )
    .with_next(format!("Correct {name}."))
}

fn boolean(name: &str, value: &str) -> Result<bool, Report> {
    match value {
        "true" => Ok(true),
        "false" => Ok(false),
        _ => Err(bad(name, value, "expected true or false")),
    }
}

fn percent_decode(s: &str) -> Option<String> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'%' => {
                let hex = s.get(i + 1..i + 3)?;
                out.push(u8::from_str_radix(hex, 16).ok()?);
                i += 3;
            }
            b'+' => {
                out.push(b' ');
                i += 1;
            }
            c => {
                out.push(c);
                i += 1;
            }
        }
    }
    String::from_utf8(out).ok()
}

async fn decisions(admin: &Admin, q: DecisionsQuery) -> Response<AdminBody> {
    let committed = admin.journal.committed();
    let DecisionsQuery { query: q, newest } = q;
    let (since, limit) = (q.since, q.limit);
    if newest {
        // The newest matches up to `committed`: the next page starts after all of it.
        return match admin.journal.newest(q, |_| true).await {
            Ok(lines) => records_page(admin, &lines, committed.max(since), committed),
            Err(e) => journal_unreadable(&e),
        };
    }
    match admin.journal.query(q).await {
        Ok(lines) => {
            let last = lines.last().map(|(seq, _)| *seq);
            // A full page resumes after its last record; a short one has seen everything
            // committed, filtered or not.
            let next_since = match last {
                Some(seq) if lines.len() >= limit => seq,
                _ => committed.max(since).max(last.unwrap_or(0)),
            };
            records_page(admin, &lines, next_since, committed)
        }
        Err(e) => journal_unreadable(&e),
    }
}

/// `GET /v1/inbox`: the newest matching messages; `next_since` is everything committed.
async fn inbox_list(admin: &Admin, q: &inbox::InboxQuery) -> Response<AdminBody> {
    let committed = admin.journal.committed();
    match inbox::messages(&admin.journal, q).await {
        Ok(lines) => records_page(admin, &lines, committed.max(q.since), committed),
        Err(e) => journal_unreadable(&e),
    }
}

/// `GET /v1/inbox/{seq}`: one message.
async fn inbox_message(admin: &Admin, seq: &str) -> Response<AdminBody> {
    let Ok(seq) = seq.parse::<u64>() else {
        let report = Report::new(
            &codes::NET_ADMIN_BAD_REQUEST,
            format!("{seq:?} is not a message number."),
        )
        .with_next("Use the seq `af inbox list` shows.");
        return error(StatusCode::BAD_REQUEST, &report);
    };
    match inbox::message(&admin.journal, seq).await {
        Ok(Some(line)) => {
            let mut resp = Response::new(Full::new(line).boxed_unsync());
            resp.headers_mut().insert(
                header::CONTENT_TYPE,
                HeaderValue::from_static("application/json"),
            );
            resp
        }
        Ok(None) => {
            let report = Report::new(
                &codes::NET_ADMIN_BAD_REQUEST,
                format!("No captured message has number {seq}; it never existed or was evicted with the oldest journal segment."),
            )
            .with_next("Run `af inbox list` to see the messages kept.");
            error(StatusCode::NOT_FOUND, &report)
        }
        Err(e) => journal_unreadable(&e),
    }
}

/// `POST /v1/deliver`: one request to a service inside the environment.
async fn deliver(admin: &Admin, req: Request<Incoming>) -> Response<AdminBody> {
    let body = match http_body_util::Limited::new(req.into_body(), MAX_DELIVERY_BYTES)
        .collect()
        .await
    {
        Ok(body) => body.to_bytes(),
        Err(e) => {
            let report = Report::new(
                &codes::NET_ADMIN_BAD_REQUEST,
                format!("The delivery request could not be read: {e}."),
            );
            return error(StatusCode::BAD_REQUEST, &report);
        }
    };
    let delivery: Delivery = match serde_json::from_slice(&body) {
        Ok(d) => d,
        Err(e) => {
            let report = Report::new(
                &codes::NET_ADMIN_BAD_REQUEST,
                format!("The delivery request is not valid JSON of the documented shape: {e}."),
            )
            .with_next(
                "Send {\"service\", \"port\", \"path\", \"method\", \"headers\", \"body\"}.",
            );
            return error(StatusCode::BAD_REQUEST, &report);
        }
    };
    match admin.inside.deliver(delivery).await {
        Ok(done) => text(StatusCode::OK, "application/json", json_line(&done)),
        Err(report) => error(StatusCode::BAD_GATEWAY, &report),
    }
}

fn journal_unreadable(e: &std::io::Error) -> Response<AdminBody> {
    let report = Report::new(
        &codes::NET_JOURNAL,
        format!("The journal could not be read: {e}."),
    );
    error(StatusCode::INTERNAL_SERVER_ERROR, &report)
}

/// The `/v1/decisions` document around `lines`.
fn records_page(
    admin: &Admin,
    lines: &[(u64, Bytes)],
    next_since: u64,
    committed: u64,
) -> Response<AdminBody> {
    let mut body = Vec::with_capacity(lines.iter().map(|(_, l)| l.len() + 1).sum::<usize>() + 256);
    body.extend_from_slice(b"{\"records\":[");
    for (i, (_, line)) in lines.iter().enumerate() {
        if i > 0 {
            body.push(b',');
        }
        body.extend_from_slice(line);
    }
    let losses = serde_json::to_string(&admin.metrics.journal_losses()).unwrap_or_default();
    let tail =
        format!("],\"next_since\":{next_since},\"committed\":{committed},\"losses\":{losses}}}\n");
    body.extend_from_slice(tail.as_bytes());
    let mut resp = Response::new(Full::new(Bytes::from(body)).boxed_unsync());
    resp.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    resp
}

fn follow(admin: &Admin, mut q: Query) -> Response<AdminBody> {
    let (tx, rx) = mpsc::channel::<Bytes>(64);
    let journal = admin.journal.clone();
    admin.drain.spawn(async move {
        let mut changed = journal.subscribe();
        q.limit = MAX_LIMIT;
        loop {
            let committed = journal.committed();
            let lines = match journal.query(q.clone()).await {
                Ok(lines) => lines,
                Err(e) => {
                    tracing::warn!(error = %e, "follow: journal read failed");
                    return;
                }
            };
            let full = lines.len() >= q.limit;
            // Resume after the last record sent; a short page has also seen everything up to
            // `committed` (filtered out or not), which the query may have passed.
            let last = lines.last().map_or(0, |(seq, _)| *seq);
            q.since = if full {
                last
            } else {
                committed.max(q.since).max(last)
            };
            for (_, line) in lines {
                let mut chunk = Vec::with_capacity(line.len() + 1);
                chunk.extend_from_slice(&line);
                chunk.push(b'\n');
                if tx.send(Bytes::from(chunk)).await.is_err() {
                    return;
                }
            }
            if !full {
                tokio::select! {
                    r = changed.changed() => if r.is_err() { return },
                    () = tx.closed() => return,
                }
            }
        }
    });
    let frames = stream::unfold(rx, |mut rx| async move {
        rx.recv()
            .await
            .map(|b| (Ok::<_, Infallible>(Frame::data(b)), rx))
    });
    let mut resp = Response::new(BodyExt::boxed_unsync(StreamBody::new(frames)));
    resp.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/x-ndjson"),
    );
    resp.headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    resp
}

fn text(status: StatusCode, content_type: &'static str, body: String) -> Response<AdminBody> {
    let mut resp = Response::new(Full::new(Bytes::from(body)).boxed_unsync());
    *resp.status_mut() = status;
    resp.headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    resp
}

/// `value` as one line of JSON.
fn json_line(value: &impl serde::Serialize) -> String {
    let mut line = serde_json::to_string(value).unwrap_or_default();
    line.push('\n');
    line
}

/// A coded JSON error: `{code, statement, next}`.
fn error(status: StatusCode, report: &Report) -> Response<AdminBody> {
    let body = Refusal {
        code: report.code.code.to_owned(),
        statement: report.statement.clone(),
        next: report.next.clone(),
    };
    let mut resp = text(status, "application/json", json_line(&body));
    resp.headers_mut()
        .insert("x-af-code", HeaderValue::from_static(report.code.code));
    resp
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn queries_parse_and_bad_ones_are_coded() {
        let parsed = parse_query(
            "since=5&limit=10&blocked=true&host=api.x.test&newest=true",
            true,
        )
        .expect("valid");
        let q = &parsed.query;
        assert_eq!(
            (
                q.since,
                q.limit,
                q.blocked,
                q.host.as_deref(),
                parsed.newest
            ),
            (5, 10, Some(true), Some("api.x.test"), true)
        );
        for bad in [
            "since=x",
            "limit=0",
            "limit=1001",
            "blocked=yes",
            "newest=1",
            "color=red",
            "host=",
        ] {
            let err = parse_query(bad, true).err();
            assert!(err.is_some_and(|e| e.code.code == "AF-NET-021"), "{bad}");
        }
        assert!(parse_query("limit=5", false).is_err());
        assert!(parse_query("newest=true", false).is_err());
    }

    #[test]
    fn the_contracts_queries_parse_as_the_orchestrator_sends_them() {
        let sent = af_sidecar_api::admin::DecisionsQuery {
            since: Some(5),
            limit: Some(10),
            newest: true,
            blocked: Some(false),
            host: Some("a b.test".into()),
        };
        let text = serde_urlencoded::to_string(&sent).expect("encodes");
        let parsed = parse_query(&text, true).expect("parses");
        let q = &parsed.query;
        assert_eq!(
            (
                q.since,
                q.limit,
                q.blocked,
                q.host.as_deref(),
                parsed.newest
            ),
            (5, 10, Some(false), Some("a b.test"), true)
        );
        let sent = af_sidecar_api::admin::InboxQuery {
            since: Some(3),
            limit: Some(2),
            to: Some("Ada+x@Example.test".into()),
            subject: Some("Verify & go".into()),
        };
        let text = serde_urlencoded::to_string(&sent).expect("encodes");
        let parsed = inbox::InboxQuery::parse(&text).expect("parses");
        assert_eq!(
            (parsed.since, parsed.limit, parsed.to.as_deref()),
            (3, 2, Some("ada+x@example.test"))
        );
        assert_eq!(parsed.subject.as_deref(), Some("verify & go"));
    }
}
