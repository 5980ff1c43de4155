//! Limits that protect the sidecar: the client and upstream connection caps and the idle
//! watchdog. The header, ClientHello and dial timeouts live where they apply (listeners,
//! guard).

use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::task::{Context, Poll};
use std::time::Duration;

use hyper_util::client::legacy::connect::{Connected, Connection};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::time::Instant;

use crate::metrics::Metrics;

/// The cap on client connections open at once across the data listeners.
#[derive(Clone)]
pub(crate) struct ConnectionLimit {
    permits: Arc<Semaphore>,
    /// Connections being answered "at the limit" at once; beyond this they are just closed,
    /// so a flood cannot pile up refusal tasks.
    refusing: Arc<Semaphore>,
    metrics: Arc<Metrics>,
}

/// Most connections answered with a 503 at the same time.
const MAX_REFUSING: usize = 256;

/// One admitted connection; dropping it frees its place.
pub(crate) struct Admitted {
    _permit: OwnedSemaphorePermit,
    metrics: Arc<Metrics>,
}

impl Drop for Admitted {
    fn drop(&mut self) {
        self.metrics.connection_closed();
    }
}

impl ConnectionLimit {
    /// A cap of `max` connections.
    pub(crate) fn new(max: usize, metrics: Arc<Metrics>) -> Self {
        Self {
            permits: Arc::new(Semaphore::new(max)),
            refusing: Arc::new(Semaphore::new(MAX_REFUSING)),
            metrics,
        }
    }

    /// A place to answer one refused connection, or `None` when too many are being answered.
    pub(crate) fn try_refusing(&self) -> Option<OwnedSemaphorePermit> {
        self.refusing.clone().try_acquire_owned().ok()
    }

    /// Admit a connection, or `None` at the cap (counted as a refusal).
    pub(crate) fn try_admit(&self) -> Option<Admitted> {
        match self.permits.clone().try_acquire_owned() {
            Ok(permit) => {
                self.metrics.connection_opened();
                Some(Admitted {
                    _permit: permit,
                    metrics: self.metrics.clone(),
                })
            }
            Err(_) => {
                self.metrics.connection_limit_refusal();
                None
            }
        }
    }
}

/// The cap on upstream connections open at once: every guard dial takes a place and holds it
/// until the connection closes, idle pooled connections included, so no client (an HTTP/2
/// client with many streams, many tunnels) can make the sidecar hold more.
#[derive(Clone)]
pub(crate) struct UpstreamLimit {
    permits: Arc<Semaphore>,
    max: usize,
    metrics: Arc<Metrics>,
}

/// One upstream connection's place; dropping it frees the place.
pub(crate) struct UpstreamPlace {
    _permit: OwnedSemaphorePermit,
    metrics: Arc<Metrics>,
}

impl Drop for UpstreamPlace {
    fn drop(&mut self) {
        self.metrics.upstream_closed();
    }
}

impl UpstreamLimit {
    /// A cap of `max` upstream connections.
    pub(crate) fn new(max: usize, metrics: Arc<Metrics>) -> Self {
        Self {
            permits: Arc::new(Semaphore::new(max)),
            max,
            metrics,
        }
    }

    /// The cap.
    pub(crate) fn max(&self) -> usize {
        self.max
    }

    /// A place for one more upstream connection, or `None` at the cap (counted as a refusal).
    pub(crate) fn try_take(&self) -> Option<UpstreamPlace> {
        match self.permits.clone().try_acquire_owned() {
            Ok(permit) => {
                self.metrics.upstream_opened();
                Some(UpstreamPlace {
                    _permit: permit,
                    metrics: self.metrics.clone(),
                })
            }
            Err(_) => {
                self.metrics.upstream_limit_refusal();
                None
            }
        }
    }
}

/// An upstream connection holding its place under the [`UpstreamLimit`] until it is dropped.
pub(crate) struct UpstreamConn {
    stream: TcpStream,
    _place: UpstreamPlace,
}

impl UpstreamConn {
    /// `stream`, holding `place`.
    pub(crate) fn new(stream: TcpStream, place: UpstreamPlace) -> Self {
        Self {
            stream,
            _place: place,
        }
    }

    /// The socket itself, for splicing.
    pub(crate) fn socket(&self) -> &TcpStream {
        &self.stream
    }
}

impl AsyncRead for UpstreamConn {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_read(cx, buf)
    }
}

impl AsyncWrite for UpstreamConn {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.stream).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.stream).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.stream.is_write_vectored()
    }
}

impl Connection for UpstreamConn {
    fn connected(&self) -> Connected {
        self.stream.connected()
    }
}

/// File descriptors kept beyond the client and upstream connections: listeners, the journal,
/// admin connections, the resolver's sockets.
const FD_RESERVE: u64 = 1024;
/// File descriptors a tunnel spliced by the kernel holds beyond its two sockets: two pipes,
/// two ends each. A tunnel holds an upstream connection, so there are at most
/// `max_upstream_connections` of them.
const FD_PER_SPLICED_TUNNEL: u64 = 4;

/// Raise the process's open-files soft limit to its hard limit (as nginx's
/// `worker_rlimit_nofile` and Go's runtime do: the default soft limit of 1024 is far below what
/// a proxy holds), and warn when the connection caps can still outgrow it: one descriptor per
/// client connection (DNS over TCP included), one per upstream connection and the pipes of a
/// spliced tunnel on each upstream connection. Returns the limit now in force, or `None` when
/// the platform does not say.
pub(crate) fn raise_open_files_limit(max_connections: usize, max_upstream: usize) -> Option<u64> {
    let limit = match rlimit::increase_nofile_limit(u64::MAX) {
        Ok(limit) => limit,
        Err(e) => {
            tracing::warn!(error = %e, "the open-files limit could not be read or raised");
            return None;
        }
    };
    let needed = (max_connections as u64)
        .saturating_add((max_upstream as u64).saturating_mul(1 + FD_PER_SPLICED_TUNNEL))
        .saturating_add(FD_RESERVE);
    if limit < needed {
        tracing::warn!(
            limit,
            needed,
            max_connections,
            max_upstream,
            "the open-files limit is below what limits.max_connections and limits.max_upstream_connections need: accepts and dials will fail before the caps; raise the hard limit (ulimit -Hn, the container's nofile) or lower the caps"
        );
    }
    Some(limit)
}

/// How many times per idle timeout the watchdog looks at a connection's activity.
const LOOKS_PER_TIMEOUT: u32 = 8;

/// Whether a connection moved a byte since its idle watchdog last looked. Moving a byte costs
/// one relaxed store and no clock read; the watchdog reads the clock a few times per timeout,
/// so an idle connection is closed between `timeout` and an eighth of it more after its last
/// byte.
#[derive(Debug, Default)]
pub(crate) struct Activity(AtomicBool);

impl Activity {
    /// A connection that has not moved a byte yet.
    pub(crate) fn new() -> Arc<Self> {
        Arc::default()
    }

    /// Something moved now.
    pub(crate) fn touch(&self) {
        self.0.store(true, Relaxed);
    }

    /// Resolves once nothing has moved for `timeout`.
    pub(crate) async fn idle_for(&self, timeout: Duration) {
        let look = (timeout / LOOKS_PER_TIMEOUT).max(Duration::from_millis(1));
        let mut since = Instant::now();
        loop {
            tokio::time::sleep(look).await;
            let now = Instant::now();
            if self.0.swap(false, Relaxed) {
                since = now;
            } else if now - since >= timeout {
                return;
            }
        }
    }
}

/// An IO wrapper that records activity for the idle watchdog and counts bytes.
pub(crate) struct IdleIo<T> {
    inner: T,
    activity: Arc<Activity>,
    read: u64,
    written: u64,
}

impl<T> IdleIo<T> {
    /// Wrap `inner`, recording into `activity`.
    pub(crate) fn new(inner: T, activity: Arc<Activity>) -> Self {
        Self {
            inner,
            activity,
            read: 0,
            written: 0,
        }
    }

    /// The wrapped IO.
    pub(crate) fn into_inner(self) -> T {
        self.inner
    }

    /// The wrapped IO, in place.
    pub(crate) fn get_mut(&mut self) -> &mut T {
        &mut self.inner
    }

    /// Bytes read through this wrapper.
    pub(crate) fn read(&self) -> u64 {
        self.read
    }

    /// Bytes written through this wrapper.
    pub(crate) fn written(&self) -> u64 {
        self.written
    }
}

impl<T: AsyncRead + Unpin> AsyncRead for IdleIo<T> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let res = Pin::new(&mut self.inner).poll_read(cx, buf);
        let n = buf.filled().len() - before;
        if matches!(res, Poll::Ready(Ok(()))) && n > 0 {
            self.read += n as u64;
            self.activity.touch();
        }
        res
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for IdleIo<T> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let res = Pin::new(&mut self.inner).poll_write(cx, buf);
        if let Poll::Ready(Ok(n)) = res {
            self.written += n as u64;
            self.activity.touch();
        }
        res
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let res = Pin::new(&mut self.inner).poll_write_vectored(cx, bufs);
        if let Poll::Ready(Ok(n)) = res {
            self.written += n as u64;
            self.activity.touch();
        }
        res
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }
}
