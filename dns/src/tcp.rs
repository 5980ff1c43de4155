//! DNS over TCP: our accept loop in front of hickory's framing and our handler.
//!
//! hickory-server's own TCP transport (`Server::register_listener`) cannot be bounded: it takes
//! a `tokio::net::TcpListener` (no wrapper can be registered), spawns a task for every
//! connection the kernel hands it with no count, and retries a failed `accept` at once, so
//! running out of file descriptors (EMFILE) makes it spin on a core. Here every connection is
//! admitted under a [`TcpAdmission`] first (the sidecar's own connection cap) and a failed
//! accept backs off. Each admitted connection is read with hickory's framing (`TcpStream`),
//! closed after `tcp_idle_secs` without a whole query (hickory's `TimeoutStream`), and each
//! query is answered as over UDP ([`crate::query`]), one at a time.

use std::{net::SocketAddr, sync::Arc, time::Duration};

use futures_util::StreamExt;
use hickory_server::{
    net::{runtime::iocompat::AsyncIoTokioAsStd, tcp::TcpStream, xfer::Protocol},
    server::{ResponseHandle, TimeoutStream},
};
use tokio::{net::TcpListener, sync::Semaphore, task::JoinSet};

use crate::{handler::Handler, metrics::Metrics, query};

/// Per-connection buffer of responses waiting to be written.
const RESPONSE_BUFFER: usize = 32;
/// Pause after a failed accept (EMFILE and the like), instead of retrying at once.
pub(crate) const ACCEPT_BACKOFF: Duration = Duration::from_millis(50);

/// One admitted connection's place under a cap; dropping it frees the place.
pub type TcpPlace = Box<dyn Send>;

/// Decides whether one more DNS-over-TCP connection may open, so an embedding program can
/// count them under its own connection cap ([`crate::DnsServer::bind_under`]).
pub trait TcpAdmission: Send + Sync {
    /// A place for one connection, held until it closes; `None` closes the connection at once.
    fn admit(&self) -> Option<TcpPlace>;
}

/// af-dns's own cap on DNS-over-TCP connections (`tcp_max_connections`), used when the
/// embedding program shares none.
pub struct TcpLimit(Arc<Semaphore>);

impl TcpLimit {
    /// At most `max` connections open at once.
    pub fn new(max: usize) -> Self {
        Self(Arc::new(Semaphore::new(max)))
    }
}

impl TcpAdmission for TcpLimit {
    fn admit(&self) -> Option<TcpPlace> {
        let permit = self.0.clone().try_acquire_owned().ok()?;
        Some(Box::new(permit))
    }
}

/// What every connection is served with.
pub(crate) struct TcpService {
    pub handler: Arc<Handler>,
    pub admission: Arc<dyn TcpAdmission>,
    pub idle: Duration,
    pub metrics: Metrics,
}

/// Accepts until the task is aborted; connections end with it.
pub(crate) async fn accept_loop(listener: TcpListener, service: TcpService) {
    let service = Arc::new(service);
    let mut connections = JoinSet::new();
    loop {
        let (stream, peer) = match listener.accept().await {
            Ok(accepted) => accepted,
            Err(error) => {
                service.metrics.tcp_accept_failed();
                tracing::warn!(%error, "DNS over TCP: accept failed");
                tokio::time::sleep(ACCEPT_BACKOFF).await;
                continue;
            }
        };
        let Some(place) = service.admission.admit() else {
            service.metrics.tcp_refused();
            drop(stream);
            continue;
        };
        let service = service.clone();
        connections.spawn(async move {
            serve(stream, peer, &service).await;
            drop(place);
        });
        while connections.try_join_next().is_some() {}
    }
}

/// Answers the queries on one connection until the client closes it, it idles past the
/// limit, or a framing error.
async fn serve(stream: tokio::net::TcpStream, peer: SocketAddr, service: &TcpService) {
    let (framed, sender) =
        TcpStream::from_stream_with_buffer_size(AsyncIoTokioAsStd(stream), peer, RESPONSE_BUFFER);
    let mut messages = TimeoutStream::new(framed, service.idle);
    while let Some(Ok(message)) = messages.next().await {
        let (bytes, src) = message.into_parts();
        let response = ResponseHandle::new(src, sender.clone(), Protocol::Tcp);
        query::answer(&service.handler, bytes, src, Protocol::Tcp, response).await;
    }
}
