//! The data listeners. Each accepts, admits the connection under the cap, and hands it to its
//! own module; all of them decide through [`crate::decide`].

pub mod authority;
mod gate;
pub mod proxy;
pub mod transparent_http;
pub mod transparent_tls;
mod unread;

pub use authority::{bad_request, no_single_host, request_authority};

use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use af_policy::error::codes;
use http::{Method, Request, Response, StatusCode};
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use crate::answer::refusal::Refusal;
use crate::answer::request::Origin;
use crate::decide::{Ask, refuse_undecided};
use crate::leave::forward::http::ProxyBody;
use crate::limits::{Activity, Admitted, IdleIo};
use crate::metrics::Via;
use crate::state::State;
use gate::{Gate, Phase, Tracked};
use unread::Ended;

/// One admitted client connection.
#[derive(Clone)]
pub struct Conn {
    /// The client's address.
    pub peer: SocketAddr,
    /// Its place under the connection cap, held until the last tunnel on it ends.
    pub admitted: Arc<Admitted>,
    /// Its traffic, for the idle watchdog.
    pub activity: Arc<Activity>,
}

/// Accept on `listener` until the sidecar is stopping, serving each admitted connection as
/// `via` on the drain. The listener closes on return, so later connections are refused.
pub async fn accept_loop(listener: TcpListener, state: Arc<State>, via: Via) {
    let stopping = state.drain.stopping();
    tokio::pin!(stopping);
    loop {
        let accepted = tokio::select! {
            accepted = listener.accept() => accepted,
            () = &mut stopping => return,
        };
        let (stream, peer) = match accepted {
            Ok(x) => x,
            Err(e) => {
                // Out of file descriptors and the like: back off instead of spinning.
                tracing::warn!(error = %e, listener = via.as_str(), "accept failed");
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let _ = stream.set_nodelay(true);
        let drain = &state.drain;
        match state.limit.try_admit() {
            Some(admitted) => {
                let conn = Conn {
                    peer,
                    admitted: Arc::new(admitted),
                    activity: Activity::new(),
                };
                // One task per listener kind, each the size of its own future: a task that
                // matched on the kind would be as large as the largest (TLS interception,
                // about 10 KiB) for every idle plain-HTTP connection.
                match via {
                    Via::Proxy => drain.spawn(proxy::serve(state.clone(), stream, conn)),
                    Via::Transparent => {
                        drain.spawn(transparent_http::serve(state.clone(), stream, conn));
                    }
                    Via::Tls => drain.spawn(transparent_tls::serve(state.clone(), stream, conn)),
                    Via::Smtp => {
                        drain.spawn(crate::arrive::smtp::serve(state.clone(), stream, conn))
                    }
                    // Not a listener: requests inside an opened TLS connection.
                    Via::Intercept => {}
                }
            }
            None => match state.limit.try_refusing() {
                Some(slot) => {
                    let state = state.clone();
                    drain.spawn(async move {
                        refuse_at_limit(state, stream, peer, via, true).await;
                        drop(slot);
                    });
                }
                None => refuse_at_limit(state.clone(), stream, peer, via, false).await,
            },
        }
    }
}

/// At the connection cap: journal, answer HTTP clients 503 without parsing (when `answer`),
/// close.
async fn refuse_at_limit(
    state: Arc<State>,
    mut stream: TcpStream,
    peer: SocketAddr,
    via: Via,
    answer: bool,
) {
    let refusal = Refusal::new(
        StatusCode::SERVICE_UNAVAILABLE,
        &codes::NET_CONNECTION_LIMIT,
        "connection_limit",
        "The sidecar is at its connection limit and refused this connection",
    );
    let ask = Ask {
        via,
        client: peer,
        method: "",
        host: "",
        port: 0,
        path: "",
        tunnel: via == Via::Tls,
    };
    refuse_undecided(&state, &ask, &refusal);
    let reply = match via {
        Via::Tls | Via::Intercept => None,
        // A mail client reads an SMTP reply, not an HTTP one.
        Via::Smtp => Some(format!("421 4.3.2 {}\r\n", refusal.statement).into_bytes()),
        Via::Proxy | Via::Transparent => Some(refusal.raw_close_response()),
    };
    if let Some(reply) = reply.filter(|_| answer) {
        answer_and_close(&mut stream, &reply).await;
    }
}

/// Serve HTTP/1.1 on an admitted connection with the configured limits; `origin` and `host`
/// (empty when not known) are what a record of a request that could not be read says.
pub async fn serve_http<IO, F, Fut>(
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

/// Write `reply`, close, and read what the client still sends for a moment, so that closing
/// does not reset the connection before the client has read the answer.
async fn answer_and_close<S: AsyncRead + AsyncWrite + Unpin>(stream: &mut S, reply: &[u8]) {
    let _ = tokio::time::timeout(Duration::from_secs(1), async {
        stream.write_all(reply).await?;
        stream.shutdown().await?;
        let mut sink = [0u8; 4096];
        while stream.read(&mut sink).await? > 0 {}
        Ok::<_, std::io::Error>(())
    })
    .await;
}
