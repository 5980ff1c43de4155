//! An intercepted connection: complete the handshake, then serve HTTP/2 or HTTP/1.1 (as ALPN
//! chose) and decide every request on its own host. A request that names another host than
//! the connection's is decided for that host: switching to a blocked host is refused. The
//! journal keeps how the connection came: each request records the listener it arrived on,
//! and the connection itself is recorded when it closes.

use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::{Arc, Mutex};

use af_policy::error::codes;
use http::{Request, Response, StatusCode};
use http_body_util::Either;
use hyper::body::Incoming;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio_rustls::server::TlsStream;

use super::HandshakeError;
use crate::answer::body::ProxyBody;
use crate::answer::refusal::Refusal;
use crate::answer::request::{Origin, respond};
use crate::arrive::listener::{Conn, no_single_host, request_authority, serve_h2, serve_http};
use crate::decide::Ticket;
use crate::metrics::Via;
use crate::state::State;

/// Journal a failed interception handshake against the connection's ticket.
fn handshake_failed(ticket: Ticket, error: &HandshakeError) {
    let refusal = match error {
        HandshakeError::ClientRejected { name, .. } => Refusal::new(
            StatusCode::BAD_GATEWAY,
            &codes::NET_CLIENT_REJECTED_CERT,
            "client_rejected_certificate",
            format!("{error}"),
        )
        .with_next(format!(
            "If the client pins certificates, set {name} to allow so it is tunnelled untouched; otherwise make it trust the environment CA (SSL_CERT_FILE)."
        )),
        HandshakeError::Failed(_) => Refusal::new(
            StatusCode::BAD_GATEWAY,
            &codes::NET_INTERCEPT,
            "intercept",
            format!("{error}"),
        ),
    };
    ticket.handshake_failed(&refusal);
}

/// Complete the handshake (within the ClientHello timeout), then serve the connection; a
/// failed handshake is journaled against the connection's ticket.
pub(crate) async fn open<IO>(
    state: Arc<State>,
    conn: Conn,
    ticket: Ticket,
    port: u16,
    handshake: impl Future<Output = Result<TlsStream<IO>, HandshakeError>>,
) where
    IO: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    match tokio::time::timeout(state.tuning.client_hello_timeout, handshake).await {
        Ok(Ok(tls)) => serve(state, conn, tls, ticket, port).await,
        Ok(Err(e)) => handshake_failed(ticket, &e),
        Err(_) => handshake_failed(
            ticket,
            &HandshakeError::Failed("the client did not finish the handshake in time".into()),
        ),
    }
}

/// The connection's own ticket, closed when the connection ends: as the record of the opened
/// connection once a request arrived in it, as a client that refused the certificate if none
/// did.
#[derive(Clone)]
struct ConnectionTicket {
    ticket: SharedTicket,
    asked: Arc<AtomicBool>,
}

impl ConnectionTicket {
    fn new(ticket: Ticket) -> Self {
        Self {
            ticket: SharedTicket::new(ticket),
            asked: Arc::new(AtomicBool::new(false)),
        }
    }

    /// A request arrived inside the connection.
    fn asked(&self) {
        self.asked.store(true, Relaxed);
    }

    /// Close the ticket: the connection ended.
    fn close(&self, host: String) {
        let Some(ticket) = self.ticket.take() else {
            return;
        };
        if self.asked.load(Relaxed) {
            return ticket.intercepted();
        }
        handshake_failed(
            ticket,
            &HandshakeError::ClientRejected {
                name: host,
                why: "it closed the connection after the handshake without sending a request"
                    .into(),
            },
        );
    }
}

/// A ticket the tasks of one connection share, closed by whichever takes it first.
#[derive(Clone)]
struct SharedTicket(Arc<Mutex<Option<Ticket>>>);

impl SharedTicket {
    fn new(ticket: Ticket) -> Self {
        Self(Arc::new(Mutex::new(Some(ticket))))
    }

    /// The ticket, unless another task already took it.
    fn take(&self) -> Option<Ticket> {
        self.0.lock().ok().and_then(|mut t| t.take())
    }
}

/// Serve an opened connection until it closes or idles out. Each request inside is journaled
/// on its own (`via: intercept`, `arrived` naming the connection's listener), and the
/// connection's ticket is journaled `intercepted` when it closes; a connection closed
/// without any request is a client that refused the certificate after the handshake (OkHttp's
/// and Node's pinning check then), journaled as such. One the drain deadline cuts before any
/// request is journaled as `shutdown` when its ticket is dropped.
async fn serve<IO>(state: Arc<State>, conn: Conn, tls: TlsStream<IO>, ticket: Ticket, port: u16)
where
    IO: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let connection_host = ticket.host().to_owned();
    let arrived = ticket.via();
    let own = ConnectionTicket::new(ticket);
    let handler = {
        let (state, conn, own) = (state.clone(), conn.clone(), own.clone());
        let host = connection_host.clone();
        move |req| {
            own.asked();
            handle(
                state.clone(),
                conn.clone(),
                host.clone(),
                arrived,
                port,
                req,
            )
        }
    };
    let origin = Origin {
        via: Via::Intercept,
        arrived: Some(arrived),
        client: conn.peer,
        port,
    };
    serve_opened(&state, &conn, tls, origin, &connection_host, handler).await;
    own.close(connection_host);
}

/// Serve HTTP/2 or HTTP/1.1 on an opened connection, as ALPN chose.
async fn serve_opened<IO, F, Fut>(
    state: &Arc<State>,
    conn: &Conn,
    tls: TlsStream<IO>,
    origin: Origin,
    host: &str,
    handler: F,
) where
    IO: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    F: Fn(Request<Incoming>) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Response<ProxyBody>> + Send + 'static,
{
    if tls.get_ref().1.alpn_protocol() == Some(b"h2".as_slice()) {
        serve_h2(state, conn, tls, handler).await;
    } else {
        serve_http(state, tls, conn, origin, host, handler).await;
    }
}

/// A transparent TLS connection refused on its host, answered inside its TLS: once the
/// handshake completes with a leaf for the name, every request on it is answered with
/// `refusal` (the coded answer a CONNECT refusal gets), and the connection is journaled once,
/// as refused with that status. A client that refuses the certificate, or sends no request,
/// is closed, and the record says so.
pub(crate) async fn refuse<IO>(
    state: Arc<State>,
    conn: Conn,
    ticket: Ticket,
    refusal: Refusal,
    handshake: impl Future<Output = Result<TlsStream<IO>, HandshakeError>>,
) where
    IO: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let closed = |why: String| Refusal {
        statement: format!("{} ({why}, so it was closed unanswered)", refusal.statement),
        ..refusal.clone()
    };
    let tls = match tokio::time::timeout(state.tuning.client_hello_timeout, handshake).await {
        Ok(Ok(tls)) => tls,
        Ok(Err(e)) => return ticket.refused(&closed(e.to_string())),
        Err(_) => {
            return ticket.refused(&closed(
                "the client did not finish the handshake in time".into(),
            ));
        }
    };
    let host = ticket.host().to_owned();
    let own = SharedTicket::new(ticket);
    let handler = {
        let (own, refusal) = (own.clone(), refusal.clone());
        move |_req| {
            let resp = refusal.response().map(Either::Left);
            if let Some(ticket) = own.take() {
                ticket.refused_answering(&refusal);
            }
            std::future::ready(resp)
        }
    };
    let origin = Origin {
        via: Via::Intercept,
        arrived: Some(Via::Tls),
        client: conn.peer,
        port: state.tuning.tls_port,
    };
    serve_opened(&state, &conn, tls, origin, &host, handler).await;
    if let Some(ticket) = own.take() {
        ticket.refused(&closed("the client sent no request".into()));
    }
}

async fn handle(
    state: Arc<State>,
    conn: Conn,
    connection_host: String,
    arrived: Via,
    port: u16,
    req: Request<Incoming>,
) -> Response<ProxyBody> {
    let origin = Origin {
        via: Via::Intercept,
        arrived: Some(arrived),
        client: conn.peer,
        port,
    };
    // HTTP/2 carries the host in the URI; HTTP/1.1 in its one Host header. A request naming
    // none is for the connection's host.
    let (host, authority) = match request_authority(&req) {
        Ok(Some(authority)) => (authority.host().to_owned(), authority.as_str().to_owned()),
        Ok(None) => (connection_host.clone(), connection_host.clone()),
        Err(problem) => return no_single_host(&state, origin, &connection_host, &req, &problem),
    };
    respond(&state, origin, req, &host, &authority).await
}
