//! The data listeners. Each accepts, admits the connection under the cap, and hands it to its
//! own module; all of them decide through [`crate::decide`].

pub(crate) mod authority;
pub(crate) mod gate;
pub(crate) mod proxy;
pub(crate) mod transparent_http;
pub(crate) mod transparent_tls;
mod unread;

pub(crate) use authority::{bad_request, no_single_host, request_authority};

use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;

use http::{Method, Request, Response};
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::io::{AsyncRead, AsyncWrite};

use crate::answer::body::ProxyBody;
use crate::answer::request::Origin;
use crate::limits::{Activity, Admitted, IdleIo};
use crate::state::State;
use gate::{Gate, Phase, Tracked};
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

/// Serve HTTP/1.1 on an admitted connection with the configured limits; `origin` and `host`
/// (empty when not known) are what a record of a request that could not be read says.
pub(crate) async fn serve_http<IO, F, Fut>(
    state: &Arc<State>,
    io: IO,
    conn: &Conn,
    origin: Origin,
    host: &str,
    handler: F,
) where
    IO: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    F: Fn(Request<Incoming>) -> Fut + Send + 'static,
    Fut: Future<Output = Response<ProxyBody>> + Send + 'static,
{
    let t = state.tuning;
    let phase = Arc::new(Phase::default());
    let gate = Gate::new(IdleIo::new(io, conn.activity.clone()), phase.clone());
    let svc = service_fn(move |req: Request<Incoming>| {
        phase.serving();
        let connect = req.method() == Method::CONNECT;
        let fut = handler(req);
        let phase = phase.clone();
        async move {
            let resp = fut.await;
            let tunnel = connect && resp.status().is_success();
            Ok::<_, Infallible>(resp.map(|body| Tracked::new(body, phase, tunnel)))
        }
    });
    let mut builder = http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(t.header_read_timeout)
        .max_buf_size(t.max_header_bytes.max(8192))
        .max_header_size(t.max_header_bytes)
        .max_headers(t.max_headers)
        .keep_alive(true);
    let mut served = builder
        .serve_connection(TokioIo::new(gate), svc)
        .with_upgrades();
    // Once the sidecar is stopping, the request being answered finishes and the connection
    // closes instead of waiting for another.
    let stopping = state.drain.stopping();
    tokio::pin!(stopping);
    let mut closing = false;
    let ended = loop {
        tokio::select! {
            r = &mut served => break Ended::Served(r),
            () = conn.activity.idle_for(t.idle_timeout) => break Ended::Idle,
            () = &mut stopping, if !closing => {
                closing = true;
                std::pin::Pin::new(&mut served).graceful_shutdown();
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
    let gate = parts.io.into_inner();
    let answer = unread::answer(state, origin, host, &ended, &gate);
    gate.finish(answer).await;
}
