//! The page's HTTP server: HTTP/1.1 on 127.0.0.1 only. Every request is checked before it is
//! routed: it must be sent to this listener's own `Host` (a page on another name that resolves
//! here, DNS rebinding, is refused) and its path must start with the run's secret. No answer
//! carries a CORS header, so no other origin can read one.

use std::convert::Infallible;
use std::future::Future;
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use af_policy::error::{Report, codes};
use bytes::Bytes;
use futures_util::StreamExt;
use http_body_util::combinators::UnsyncBoxBody;
use http_body_util::{BodyExt, Full, StreamBody};
use hyper::body::{Frame, Incoming};
use hyper::header::{self, HeaderValue};
use hyper::service::service_fn;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use serde::Deserialize;
use tokio::net::TcpListener;
use tokio::sync::Semaphore;
use tokio::task::JoinSet;

use super::api::{self, DetailQuery, Failure};
use super::clients::Clients;
use super::{Source, assets};
use crate::secret;

/// The most connections served at once (each live stream holds one); more wait to be
/// accepted.
const MAX_CONNECTIONS: usize = 64;
/// How long to pause after a failed accept (out of file descriptors) before the next.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(100);
/// Bytes of randomness in the run's secret path.
const SECRET_BYTES: usize = 16;

/// The page's policy: only its own scripts and styles (inline styles for the mail shown in
/// the sandboxed frame, which inherits this policy), images only from itself or inline, no
/// plugins, forms or framing by others.
const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline'; \
    img-src 'self' data:; connect-src 'self'; frame-src 'self'; base-uri 'none'; \
    form-action 'none'; frame-ancestors 'none'";

type Body = UnsyncBoxBody<Bytes, Infallible>;

/// The page, bound and ready to serve.
pub struct Ui {
    listener: TcpListener,
    gate: Arc<Gate>,
    page: Arc<Page>,
}

/// What the page's endpoints read: the source and the services' names for its clients.
struct Page {
    source: Source,
    clients: Arc<Clients>,
}

/// What every request must match: this listener's `Host` and the run's secret path.
struct Gate {
    /// `127.0.0.1:PORT`.
    host: String,
    /// `/SECRET`.
    prefix: String,
}

impl Ui {
    /// Listen on 127.0.0.1:`port` (a free port when `None`) to serve `source`, under a new
    /// secret path.
    pub async fn bind(port: Option<u16>, source: Source) -> Result<Self, Report> {
        let port = port.unwrap_or(0);
        let refused = |e: std::io::Error| {
            Report::new(
                &codes::RUN_UI,
                format!("af ui could not listen on 127.0.0.1:{port}: {e}."),
            )
        };
        let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, port))
            .await
            .map_err(refused)?;
        let addr = listener.local_addr().map_err(refused)?;
        let secret = secret::random::<SECRET_BYTES>().map_err(refused)?;
        Ok(Ui {
            listener,
            gate: Arc::new(Gate {
                host: addr.to_string(),
                prefix: format!("/{}", secret::hex(&secret)),
            }),
            page: Arc::new(Page {
                clients: Arc::new(Clients::new(source.environment.clone())),
                source,
            }),
        })
    }

    /// Where it listens.
    pub fn addr(&self) -> SocketAddr {
        self.listener
            .local_addr()
            .unwrap_or_else(|_| SocketAddr::from((Ipv4Addr::LOCALHOST, 0)))
    }

    /// The page's address, secret included: what to open in a browser.
    pub fn url(&self) -> String {
        format!("http://{}{}/", self.gate.host, self.gate.prefix)
    }

    /// Serve until `stop` completes; open connections (live streams) are cut then.
    pub async fn serve(self, stop: impl Future<Output = ()>) {
        let permits = Arc::new(Semaphore::new(MAX_CONNECTIONS));
        let mut connections = JoinSet::new();
        tokio::pin!(stop);
        loop {
            while connections.try_join_next().is_some() {}
            let permit = tokio::select! {
                () = &mut stop => return,
                permit = permits.clone().acquire_owned() => match permit {
                    Ok(permit) => permit,
                    Err(_) => return,
                },
            };
            let stream = tokio::select! {
                () = &mut stop => return,
                accepted = self.listener.accept() => match accepted {
                    Ok((stream, _)) => stream,
                    Err(_) => {
                        tokio::time::sleep(ACCEPT_BACKOFF).await;
                        continue;
                    }
                },
            };
            let gate = self.gate.clone();
            let page = self.page.clone();
            connections.spawn(async move {
                let _permit = permit;
                let service = service_fn(move |req| {
                    let gate = gate.clone();
                    let page = page.clone();
                    async move { Ok::<_, Infallible>(answer(&gate, &page, req).await) }
                });
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), service)
                    .await;
            });
        }
    }
}

/// Check a request against the gate, then route it; every answer gets the same headers.
async fn answer(gate: &Gate, page: &Page, req: Request<Incoming>) -> Response<Body> {
    let mut resp = match gate.admit(&req) {
        Ok(path) => {
            let path = path.to_owned();
            route(page, &path, &req).await
        }
        Err(turned) => turned.response(),
    };
    harden(resp.headers_mut());
    resp
}

/// Why the gate turned a request away.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Turned {
    /// Sent to another `Host` (a rebound name) or in absolute form: 421.
    Misdirected,
    /// Without the run's secret: 404, naming nothing.
    NoSecret,
    /// A method the page never sends: 405.
    Method,
}

impl Turned {
    fn status(self) -> StatusCode {
        match self {
            Turned::Misdirected => StatusCode::MISDIRECTED_REQUEST,
            Turned::NoSecret => StatusCode::NOT_FOUND,
            Turned::Method => StatusCode::METHOD_NOT_ALLOWED,
        }
    }

    fn response(self) -> Response<Body> {
        let message = match self {
            Turned::Misdirected => "this server answers only requests sent to its own address",
            Turned::NoSecret => "not found",
            Turned::Method => "only GET is served",
        };
        text(self.status(), message)
    }
}

impl Gate {
    /// The path below the secret, or why the request is turned away.
    fn admit<'r, B>(&self, req: &'r Request<B>) -> Result<&'r str, Turned> {
        let host = req.headers().get(header::HOST).map(HeaderValue::as_bytes);
        if host != Some(self.host.as_bytes()) || req.uri().authority().is_some() {
            return Err(Turned::Misdirected);
        }
        let path = req.uri().path();
        let secret = path.get(..self.prefix.len()).unwrap_or_default();
        let rest = path.get(self.prefix.len()..).unwrap_or_default();
        if !same(secret.as_bytes(), self.prefix.as_bytes()) || !rest.starts_with('/') {
            return Err(Turned::NoSecret);
        }
        if req.method() != Method::GET {
            return Err(Turned::Method);
        }
        Ok(rest)
    }
}

/// Equal bytes, compared in time that does not depend on where they first differ.
fn same(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// What `GET api/events` is asked.
#[derive(Debug, Default, Deserialize)]
struct EventsQuery {
    /// Records after this sequence number.
    since: Option<u64>,
}

async fn route(page: &Page, path: &str, req: &Request<Incoming>) -> Response<Body> {
    let (source, clients) = (&page.source, &page.clients);
    let query = req.uri().query().unwrap_or_default();
    let found = match path {
        "/api/records" => api::records(source, clients).await,
        "/api/messages" => api::messages(source).await,
        "/api/overview" => api::overview(source).await,
        "/api/events" => return events(page, query, req).await,
        "/api/har" => {
            return match api::har(source).await {
                Ok(value) => attachment(json(StatusCode::OK, &value), "af.har"),
                Err(failure) => refusal(&failure),
            };
        }
        _ => {
            if let Some(asset) = assets::find(path) {
                return respond(StatusCode::OK, asset.content_type, Bytes::from(asset.body));
            }
            match numbered(path) {
                Some(("records", seq)) => match serde_urlencoded::from_str::<DetailQuery>(query) {
                    Ok(q) => api::record(source, clients, seq, &q).await,
                    Err(e) => return text(StatusCode::BAD_REQUEST, &e.to_string()),
                },
                Some(("messages", seq)) => api::message(source, seq).await,
                _ => return text(StatusCode::NOT_FOUND, "not found"),
            }
        }
    };
    match found {
        Ok(value) => json(StatusCode::OK, &value),
        Err(failure) => refusal(&failure),
    }
}

/// `/api/{kind}/{seq}` as its kind and number.
fn numbered(path: &str) -> Option<(&str, u64)> {
    let (kind, seq) = path.strip_prefix("/api/")?.split_once('/')?;
    Some((kind, seq.parse().ok()?))
}

/// The live stream, resumed after `Last-Event-ID` when the browser reconnects.
async fn events(page: &Page, query: &str, req: &Request<Incoming>) -> Response<Body> {
    let asked = serde_urlencoded::from_str::<EventsQuery>(query)
        .ok()
        .and_then(|q| q.since);
    let resumed = req
        .headers()
        .get("last-event-id")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    let since = asked.max(resumed).unwrap_or(0);
    match api::events(&page.source, page.clients.clone(), since).await {
        Ok(stream) => {
            let body = StreamBody::new(stream.map(|chunk| chunk.map(Frame::data)));
            let mut resp = Response::new(BodyExt::boxed_unsync(body));
            resp.headers_mut().insert(
                header::CONTENT_TYPE,
                HeaderValue::from_static("text/event-stream"),
            );
            resp
        }
        Err(failure) => refusal(&failure),
    }
}

fn refusal(failure: &Failure) -> Response<Body> {
    json(failure.status, &failure.report)
}

fn json(status: StatusCode, value: &impl serde::Serialize) -> Response<Body> {
    match serde_json::to_vec(value) {
        Ok(body) => respond(status, "application/json", Bytes::from(body)),
        Err(e) => text(StatusCode::INTERNAL_SERVER_ERROR, &e.to_string()),
    }
}

/// `resp` offered as a download named `file`.
fn attachment(mut resp: Response<Body>, file: &'static str) -> Response<Body> {
    if let Ok(value) = HeaderValue::from_str(&format!("attachment; filename=\"{file}\"")) {
        resp.headers_mut()
            .insert(header::CONTENT_DISPOSITION, value);
    }
    resp
}

fn text(status: StatusCode, message: &str) -> Response<Body> {
    respond(
        status,
        "text/plain; charset=utf-8",
        Bytes::from(format!("{message}\n")),
    )
}

fn respond(status: StatusCode, content_type: &'static str, body: Bytes) -> Response<Body> {
    let mut resp = Response::new(Full::new(body).boxed_unsync());
    *resp.status_mut() = status;
    resp.headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    resp
}

/// The headers every answer carries: never cached, never sniffed, never framed or read by
/// another origin, and no `Referer` naming the secret path when a link in a message is opened.
fn harden(headers: &mut hyper::HeaderMap) {
    for (name, value) in [
        (header::CACHE_CONTROL, "no-store"),
        (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
        (header::REFERRER_POLICY, "no-referrer"),
        (header::X_FRAME_OPTIONS, "DENY"),
        (header::CONTENT_SECURITY_POLICY, CSP),
        (
            header::HeaderName::from_static("cross-origin-resource-policy"),
            "same-origin",
        ),
        (
            header::HeaderName::from_static("cross-origin-opener-policy"),
            "same-origin",
        ),
    ] {
        headers.insert(name, HeaderValue::from_static(value));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_compare_equal_only_when_every_byte_is() {
        assert!(same(b"/abc", b"/abc"));
        assert!(!same(b"/abd", b"/abc"));
        assert!(!same(b"/ab", b"/abc"));
    }

    #[test]
    fn only_requests_to_its_own_host_under_the_secret_are_admitted() {
        let gate = Gate {
            host: "127.0.0.1:4000".to_owned(),
            prefix: "/s3cret".to_owned(),
        };
        let status = |host: &str, method: Method, path: &str| {
            let req = Request::builder()
                .method(method)
                .uri(path)
                .header(header::HOST, host)
                .body(())
                .expect("a request");
            gate.admit(&req).map(str::to_owned).map_err(Turned::status)
        };
        let own = "127.0.0.1:4000";
        assert_eq!(
            status(own, Method::GET, "/s3cret/api/records"),
            Ok("/api/records".to_owned())
        );
        assert_eq!(status(own, Method::GET, "/s3cret/"), Ok("/".to_owned()));
        let misdirected = Err(StatusCode::MISDIRECTED_REQUEST);
        assert_eq!(
            status("evil.test:4000", Method::GET, "/s3cret/"),
            misdirected
        );
        assert_eq!(
            status("localhost:4000", Method::GET, "/s3cret/"),
            misdirected
        );
        assert_eq!(
            status(own, Method::GET, "http://127.0.0.1:4000/s3cret/"),
            misdirected
        );
        for path in ["/", "/s3cret", "/s3cretx/", "/s3cre/", "/api/records"] {
            assert_eq!(
                status(own, Method::GET, path),
                Err(StatusCode::NOT_FOUND),
                "{path}"
            );
        }
        assert_eq!(
            status(own, Method::POST, "/s3cret/api/records"),
            Err(StatusCode::METHOD_NOT_ALLOWED)
        );
    }

    #[test]
    fn numbered_paths_name_their_kind_and_seq() {
        assert_eq!(numbered("/api/records/12"), Some(("records", 12)));
        assert_eq!(numbered("/api/messages/7"), Some(("messages", 7)));
        assert_eq!(numbered("/api/records/x"), None);
        assert_eq!(numbered("/records/1"), None);
    }
}
