//! The data listeners. Each accepts, admits the connection under the cap, and hands it to its
//! own module; all of them decide through [`crate::decide`].

pub(crate) mod authority;
pub(crate) mod gate;
mod h2;
mod park;
mod preface;
pub(crate) mod proxy;
pub(crate) mod transparent_http;
pub(crate) mod transparent_tls;
mod unread;

pub(crate) use authority::{bad_request, no_single_host, request_authority};
pub(crate) use h2::serve_h2;

use std::convert::Infallible;
use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};

use futures_util::FutureExt;
use http::{Method, Request, Response, StatusCode};
use hyper::body::{Body, Incoming};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::upgrade::Upgraded;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::TcpStream;

use crate::answer::body::ProxyBody;
use crate::answer::request::Origin;
use crate::leave::forward::tunnel;
use crate::limits::{Activity, Admitted, IdleIo};
use crate::metrics::Unanswered;
use crate::state::State;
use gate::{Gate, Phase, Tracked};
pub(crate) use park::Serve;
use preface::{Replay, Speaks};
use unread::Ended;

/// One admitted client connection.
#[derive(Clone)]
pub(crate) struct Conn {
    /// The client's address.
    pub peer: SocketAddr,
    /// Its place under the connection cap, held until the last tunnel on it ends.
    pub admitted: Arc<Admitted>,
    /// Its traffic, for the idle watchdog.
    pub activity: Arc<Activity>,
}

/// Serve a cleartext listener's connection (the proxy port, transparent HTTP): HTTP/2 with
/// prior knowledge when it opens with the HTTP/2 preface, HTTP/1.1 otherwise; every request,
/// or stream, through `handler`. A connection that ends before its first request is counted
/// unanswered: `idle` if it sent nothing in time, `incomplete` if it closed.
pub(crate) async fn serve_cleartext<F, Fut>(
    state: &Arc<State>,
    stream: TcpStream,
    conn: &Conn,
    origin: Origin,
    handler: F,
) where
    F: Fn(Request<Incoming>) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Response<ProxyBody>> + Send + 'static,
{
    // Pinned here, so a connection that timed out is counted before its socket (held by the
    // sniff) closes: a client that sees it closed sees it counted.
    let sniffing = tokio::time::timeout(state.tuning.header_read_timeout, preface::sniff(stream));
    tokio::pin!(sniffing);
    let sniffed = tokio::select! {
        sniffed = &mut sniffing => sniffed,
        () = state.drain.stopping() => return,
    };
    match sniffed {
        Ok(Ok((Speaks::Http1, io))) => serve_http(state, io, conn, origin, "", handler).await,
        Ok(Ok((Speaks::Http2, io))) => {
            let asked = Arc::new(AtomicBool::new(false));
            let seen = asked.clone();
            let handler = move |req| {
                seen.store(true, Relaxed);
                handler(req)
            };
            serve_h2(state, conn, io, handler).await;
            if !asked.load(Relaxed) {
                state.metrics.unanswered(Unanswered::Incomplete);
            }
        }
        Ok(Err(e)) => {
            tracing::debug!(error = %e, peer = %conn.peer, "client connection failed before a request");
            state.metrics.unanswered(Unanswered::Incomplete);
        }
        Err(_) => state.metrics.unanswered(Unanswered::Idle),
    }
}

/// What hyper serves HTTP/1.1 on for a cleartext listener (`serve_cleartext`).
type Cleartext = TokioIo<Gate<IdleIo<Replay<TcpStream>>>>;

/// The client end of a CONNECT tunnel and the bytes to send upstream before any other. Over
/// HTTP/1.1 that is the client's own socket, unwrapped so the tunnel can splice it, and the
/// bytes already read from it but not yet used: hyper's read buffer (what the client sent
/// right behind the CONNECT head), then what the preface sniff still holds. Anything else (a
/// CONNECT stream of HTTP/2) is tunnelled as hyper hands it over.
pub(crate) async fn tunnel_client(upgraded: Upgraded) -> io::Result<(tunnel::Client, Vec<u8>)> {
    let parts = match upgraded.downcast::<Cleartext>() {
        Ok(parts) => parts,
        Err(upgraded) => return Ok((tunnel::Client::Upgraded(TokioIo::new(upgraded)), Vec::new())),
    };
    let gate = parts.io.into_inner();
    let (socket, sniffed) = gate.into_tunnel().await?.into_inner().into_parts();
    let mut replay = parts.read_buf.to_vec();
    replay.extend_from_slice(&sniffed);
    Ok((tunnel::Client::Socket(socket), replay))
}

/// Serve HTTP/1.1 on an admitted connection with the configured limits; `origin` and `host`
/// (empty when not known) are what a record of a request that could not be read says. A
/// connection whose IO can wait alone parks between requests (`park.rs`).
pub(crate) async fn serve_http<IO, F, Fut>(
    state: &Arc<State>,
    io: IO,
    conn: &Conn,
    origin: Origin,
    host: &str,
    handler: F,
) where
    IO: Serve,
    F: Fn(Request<Incoming>) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Response<ProxyBody>> + Send + 'static,
{
    let t = state.tuning;
    let phase = Arc::new(Phase::default());
    let mut gate = Gate::new(IdleIo::new(io, conn.activity.clone()), phase.clone());
    let handler = Arc::new(handler);
    let parked = phase.clone();
    // The answer is mapped rather than awaited in an `async` block, which would hold the
    // handler's future twice over in the one allocation hyper keeps per connection for it.
    let svc = service_fn(move |req: Request<Incoming>| {
        phase.serving(!req.body().is_end_stream());
        let connect = req.method() == Method::CONNECT;
        let phase = phase.clone();
        handler(req).map(move |resp| {
            // A CONNECT answered 2xx, or a protocol switched (101): the connection carries
            // bytes of another protocol from now on, and the gate lets every one through.
            let tunnel = (connect && resp.status().is_success())
                || resp.status() == StatusCode::SWITCHING_PROTOCOLS;
            Ok::<_, Infallible>(resp.map(|body| Tracked::new(body, phase, tunnel)))
        })
    });
    let mut builder = http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(t.header_read_timeout)
        .max_buf_size(t.max_header_bytes.max(8192))
        .max_header_size(t.max_header_bytes)
        .max_headers(t.max_headers)
        .keep_alive(true);
    let idle = conn.activity.idle_for(t.idle_timeout);
    tokio::pin!(idle);
    // Once the sidecar is stopping, the request being answered finishes and the connection
    // closes instead of waiting for another.
    let stopping = state.drain.stopping();
    tokio::pin!(stopping);
    let mut closing = false;
    let ended = loop {
        let parks = gate.io_mut().get_mut().parking().is_some();
        let mut served = builder
            .serve_connection(TokioIo::new(gate), svc.clone())
            .with_upgrades();
        let look = tokio::time::sleep(park::LOOK);
        tokio::pin!(look);
        let mut parking = false;
        let ended = loop {
            tokio::select! {
                r = &mut served => break Ended::Served(r),
                () = &mut idle => break Ended::Idle,
                () = &mut stopping, if !closing => {
                    closing = true;
                    std::pin::Pin::new(&mut served).graceful_shutdown();
                }
                () = &mut look, if parks && !parking && !closing => {
                    if parked.parkable() {
                        parking = true;
                        std::pin::Pin::new(&mut served).graceful_shutdown();
                    } else {
                        look.as_mut().reset(tokio::time::Instant::now() + park::LOOK);
                    }
                }
            }
        };
        if let Ended::Served(Err(e)) = &ended {
            tracing::debug!(error = %e, peer = %conn.peer, "client connection ended with an error");
        }
        // None: the connection became a tunnel, which owns it now.
        let Some(parts) = served.into_parts() else {
            return;
        };
        gate = parts.io.into_inner();
        if closing || !parking || !matches!(ended, Ended::Served(Ok(()))) {
            break ended;
        }
        let Some(park) = gate.io_mut().get_mut().parking() else {
            break ended;
        };
        park.unread(parts.read_buf);
        state.metrics.parked();
        // Parked: the socket alone waits, as hyper would have, for the next head to begin.
        tokio::select! {
            _ = std::future::poll_fn(|cx| park.poll_readable(cx)) => {}
            () = tokio::time::sleep(t.header_read_timeout) => break Ended::Idle,
            () = &mut idle => break Ended::Idle,
            () = &mut stopping => break Ended::Served(Ok(())),
        }
    };
    let answer = unread::answer(state, origin, host, &ended, &gate);
    gate.finish(answer).await;
}
