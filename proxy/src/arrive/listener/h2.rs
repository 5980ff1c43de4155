//! Serving HTTP/2 on an admitted connection: inside an opened TLS connection (ALPN `h2`) and
//! on the cleartext listeners (prior knowledge). Every stream is one request, handed to the
//! listener's handler and decided on its own `:authority`. A gRPC call the sidecar refuses is
//! answered in gRPC's terms ([`grpc`]).

use std::convert::Infallible;
use std::future::Future;

use futures_util::FutureExt;
use futures_util::future::Either;
use http::{Request, Response};
use hyper::body::Incoming;
use hyper::server::conn::http2;
use hyper::service::service_fn;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::io::{AsyncRead, AsyncWrite};

use super::Conn;
use crate::answer::body::ProxyBody;
use crate::answer::grpc;
use crate::limits::IdleIo;
use crate::metrics::Unanswered;
use crate::state::State;

/// HTTP/2 streams a client may open at once on one connection.
const MAX_CONCURRENT_STREAMS: u32 = 100;

/// Serve HTTP/2 on `io` until the connection closes or idles out.
pub(crate) async fn serve_h2<IO, F, Fut>(state: &State, conn: &Conn, io: IO, handler: F)
where
    IO: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    F: Fn(Request<Incoming>) -> Fut + Send + 'static,
    Fut: Future<Output = Response<ProxyBody>> + Send + 'static,
{
    let t = state.tuning;
    let io = TokioIo::new(IdleIo::new(io, conn.activity.clone()));
    // A gRPC call's refusals are answered in gRPC's terms; every other stream as it is.
    let svc = service_fn(move |req| {
        let answered = if grpc::asked(&req) {
            Either::Left(handler(req).then(grpc::answer))
        } else {
            Either::Right(handler(req))
        };
        answered.map(Ok::<_, Infallible>)
    });
    // Streams run on the drain, tracked with the connection's task.
    let mut builder = http2::Builder::new(state.drain.clone());
    builder
        .timer(TokioTimer::new())
        .max_concurrent_streams(MAX_CONCURRENT_STREAMS)
        // RFC 8441: WebSockets over HTTP/2 (`upgrade.rs`).
        .enable_connect_protocol()
        .max_header_list_size(u32::try_from(t.max_header_bytes).unwrap_or(u32::MAX));
    let served = builder.serve_connection(io, svc);
    tokio::pin!(served);
    // Once the sidecar is stopping: GOAWAY, the open streams finish, no new one starts.
    let stopping = state.drain.stopping();
    tokio::pin!(stopping);
    let mut closing = false;
    loop {
        tokio::select! {
            r = &mut served => {
                if let Err(e) = r {
                    tracing::debug!(error = %e, peer = %conn.peer, "HTTP/2 connection ended with an error");
                }
                return;
            }
            () = conn.activity.idle_for(t.idle_timeout) => {
                state.metrics.unanswered(Unanswered::Idle);
                tracing::debug!(peer = %conn.peer, "HTTP/2 connection idle, closed");
                return;
            }
            () = &mut stopping, if !closing => {
                closing = true;
                served.as_mut().graceful_shutdown();
            }
        }
    }
}
