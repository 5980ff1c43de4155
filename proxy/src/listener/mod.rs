//! The data listeners. Each accepts, admits the connection under the cap, and hands it to its
//! own module; all of them decide through [`crate::decide`].

pub mod authority;
pub mod proxy;
pub mod transparent_http;
pub mod transparent_tls;

pub use authority::{bad_request, no_single_host, request_authority};

use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use af_policy::error::codes;
use http::{Request, Response, StatusCode};
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use crate::answer::Refusal;
use crate::decide::{Ask, refuse_undecided};
use crate::forward::http::ProxyBody;
use crate::limits::{Activity, Admitted, IdleIo};
use crate::metrics::Via;
use crate::state::State;

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

/// Accept forever on `listener`, serving each admitted connection as `via`.
pub async fn accept_loop(listener: TcpListener, state: Arc<State>, via: Via) {
    loop {
        let (stream, peer) = match listener.accept().await {
            Ok(x) => x,
            Err(e) => {
                // Out of file descriptors and the like: back off instead of spinning.
                tracing::warn!(error = %e, listener = via.as_str(), "accept failed");
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let _ = stream.set_nodelay(true);
        let state = state.clone();
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
                    Via::Proxy => tokio::spawn(proxy::serve(state, stream, conn)),
                    Via::Transparent => tokio::spawn(transparent_http::serve(state, stream, conn)),
                    Via::Tls => tokio::spawn(transparent_tls::serve(state, stream, conn)),
                    Via::Smtp => tokio::spawn(crate::smtp::serve(state, stream, conn)),
                    // Not a listener: requests inside an opened TLS connection.
                    Via::Intercept => continue,
                };
            }
            None => match state.limit.try_refusing() {
                Some(slot) => {
                    tokio::spawn(async move {
                        refuse_at_limit(state, stream, peer, via, true).await;
                        drop(slot);
                    });
                }
                None => refuse_at_limit(state, stream, peer, via, false).await,
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
        let _ = tokio::time::timeout(Duration::from_secs(1), async {
            stream.write_all(&reply).await?;
            stream.shutdown().await?;
            // Drain what the client sent so closing does not reset the connection before it
            // reads the answer.
            let mut sink = [0u8; 4096];
            while stream.read(&mut sink).await? > 0 {}
            Ok::<_, std::io::Error>(())
        })
        .await;
    }
}

/// Serve HTTP/1.1 on an admitted connection with the configured limits.
pub async fn serve_http<F, Fut>(state: &Arc<State>, stream: TcpStream, conn: &Conn, handler: F)
where
    F: Fn(Request<Incoming>) -> Fut + Send + 'static,
    Fut: Future<Output = Response<ProxyBody>> + Send + 'static,
{
    let t = state.tuning;
    let io = TokioIo::new(IdleIo::new(stream, conn.activity.clone()));
    let svc = service_fn(move |req| {
        let fut = handler(req);
        async move { Ok::<_, Infallible>(fut.await) }
    });
    let mut builder = http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(t.header_read_timeout)
        .max_buf_size(t.max_header_bytes.max(8192))
        .max_header_size(t.max_header_bytes)
        .keep_alive(true);
    let served = builder.serve_connection(io, svc).with_upgrades();
    tokio::select! {
        r = served => {
            if let Err(e) = r {
                tracing::debug!(error = %e, peer = %conn.peer, "client connection ended with an error");
            }
        }
        () = conn.activity.idle_for(t.idle_timeout) => {
            tracing::debug!(peer = %conn.peer, "client connection idle, closed");
        }
    }
}
