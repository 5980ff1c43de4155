//! Holding back hyper's own answers, so the sidecar gives its coded one.
//!
//! hyper answers a request head it cannot read (400, or 431 for one too large) by itself, with
//! an empty body and none of the sidecar's headers, and has no hook to change that answer. It
//! writes it only between requests: before the first request of a connection, or after a
//! response has been written and flushed whole. A [`Gate`] sits between hyper and the client
//! and holds back whatever hyper writes at those times, which is never anything but that
//! answer; when the connection ends, [`Gate::finish`] drops it in favour of the sidecar's (or
//! lets it through, if the sidecar has none to give).
//!
//! The service tells the gate where a request stands through [`Phase`]: serving from the call
//! until the response body is dropped (hyper drops it once the last byte is encoded), then
//! ending until the next flush has written it all, then between requests again (with part of
//! the next head read, or not: only then can the connection park, `park.rs`). A CONNECT
//! answered 2xx, or a protocol switched (101), turns the gate off: the connection carries
//! another protocol's bytes.

use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering::Relaxed};
use std::task::{Context, Poll, ready};
use std::time::Duration;

use hyper::body::{Body, Frame, SizeHint};
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt, ReadBuf};

/// Most bytes held back. hyper's own answer is a status line and two headers; anything longer
/// is not that, and is let through.
const MAX_HELD: usize = 1024;

/// Between requests, nothing of the next one read yet.
const BETWEEN: u8 = 0;
const SERVING: u8 = 1;
const ENDING: u8 = 2;
const OFF: u8 = 3;
/// Between requests, part of the next one read.
const HEAD: u8 = 4;

/// Where the connection's current request stands, shared by the gate and the service.
#[derive(Debug, Default)]
pub(crate) struct Phase {
    now: AtomicU8,
    /// The request being answered, or last answered, came with a body: hyper may still be
    /// reading it after the answer.
    body: AtomicBool,
}

impl Phase {
    /// A request was handed to the service: let its answer through. `body` when the request
    /// has a body to read.
    pub(crate) fn serving(&self, body: bool) {
        self.body.store(body, Relaxed);
        let _ = self
            .now
            .fetch_update(Relaxed, Relaxed, |p| (p != OFF).then_some(SERVING));
    }

    /// Whether hyper's connection is between requests with nothing of the next one read and
    /// no body of the last one left to read: it can be dropped and the socket kept (`park.rs`).
    pub(crate) fn parkable(&self) -> bool {
        self.get() == BETWEEN && !self.body.load(Relaxed)
    }

    /// The response's body was dropped: once flushed, the connection is between requests.
    fn ending(&self) {
        let _ = self.now.compare_exchange(SERVING, ENDING, Relaxed, Relaxed);
    }

    /// The response was flushed whole: between requests again.
    fn flushed(&self) {
        let _ = self.now.compare_exchange(ENDING, BETWEEN, Relaxed, Relaxed);
    }

    /// Bytes of the next request arrived.
    fn head_begun(&self) {
        let _ = self.now.compare_exchange(BETWEEN, HEAD, Relaxed, Relaxed);
    }

    /// The connection became a tunnel: never hold anything back again.
    fn off(&self) {
        self.now.store(OFF, Relaxed);
    }

    fn get(&self) -> u8 {
        self.now.load(Relaxed)
    }
}

/// A response body that tells the [`Phase`] when hyper is done with it.
pub(crate) struct Tracked<B> {
    inner: B,
    phase: Arc<Phase>,
}

impl<B> Tracked<B> {
    /// Wrap the body of a response to a request; `tunnel` when the connection becomes a
    /// tunnel after it (a CONNECT answered 2xx).
    pub(crate) fn new(inner: B, phase: Arc<Phase>, tunnel: bool) -> Self {
        if tunnel {
            phase.off();
        }
        Self { inner, phase }
    }
}

impl<B: Body + Unpin> Body for Tracked<B> {
    type Data = B::Data;
    type Error = B::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Self::Data>, Self::Error>>> {
        Pin::new(&mut self.inner).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

impl<B> Drop for Tracked<B> {
    fn drop(&mut self) {
        self.phase.ending();
    }
}

/// The IO hyper serves a client connection through.
pub(crate) struct Gate<T> {
    inner: T,
    phase: Arc<Phase>,
    /// What hyper wrote between requests, not yet sent.
    held: Vec<u8>,
    /// Bytes read since the last response (or the start): the head hyper is waiting for.
    read_between: u64,
}

impl<T> Gate<T> {
    /// Gate `inner`; the service reports through `phase`.
    pub(crate) fn new(inner: T, phase: Arc<Phase>) -> Self {
        Self {
            inner,
            phase,
            held: Vec::new(),
            read_between: 0,
        }
    }

    /// Whether no request is being answered: a whole answer may be written now.
    pub(crate) fn between_requests(&self) -> bool {
        matches!(self.phase.get(), BETWEEN | HEAD)
    }

    /// The IO under the gate, in place.
    pub(crate) fn io_mut(&mut self) -> &mut T {
        &mut self.inner
    }

    /// Whether the client had sent part of a request since the last answer.
    pub(crate) fn head_started(&self) -> bool {
        self.read_between > 0
    }
}

impl<T: AsyncRead + AsyncWrite + Unpin> Gate<T> {
    /// End the connection: send `answer` in place of whatever was held back when there is
    /// one and no request is being answered; otherwise what was held back. Then close.
    pub(crate) async fn finish(mut self, answer: Option<Vec<u8>>) {
        let reply = match answer {
            Some(answer) if self.between_requests() => answer,
            _ => std::mem::take(&mut self.held),
        };
        if reply.is_empty() {
            let _ = tokio::time::timeout(Duration::from_secs(1), self.inner.shutdown()).await;
        } else {
            answer_and_close(&mut self.inner, &reply).await;
        }
    }

    /// The connection under the gate, once a CONNECT made it a tunnel, with anything held back
    /// written first (nothing is: the gate holds only hyper's own answers between requests,
    /// after which hyper closes rather than hands the connection over).
    pub(crate) async fn into_tunnel(mut self) -> io::Result<T> {
        self.inner.write_all(&self.held).await?;
        Ok(self.inner)
    }

    /// Send what is held back, once hyper writes outside a time between requests.
    fn poll_release(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        while !self.held.is_empty() {
            let n = ready!(Pin::new(&mut self.inner).poll_write(cx, &self.held))?;
            if n == 0 {
                return Poll::Ready(Err(io::ErrorKind::WriteZero.into()));
            }
            self.held.drain(..n);
        }
        Poll::Ready(Ok(()))
    }

    /// Whether to hold `len` more bytes back; past the bound the gate opens for good.
    fn holds(&mut self, len: usize) -> bool {
        if !self.between_requests() {
            return false;
        }
        if self.held.len() + len > MAX_HELD {
            self.phase.off();
            return false;
        }
        true
    }
}

impl<T: AsyncRead + Unpin> AsyncRead for Gate<T> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let res = Pin::new(&mut self.inner).poll_read(cx, buf);
        let read = buf.filled().len() - before;
        if read > 0 && self.between_requests() {
            self.read_between += read as u64;
            self.phase.head_begun();
        }
        res
    }
}

impl<T: AsyncRead + AsyncWrite + Unpin> AsyncWrite for Gate<T> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        if self.holds(buf.len()) {
            self.held.extend_from_slice(buf);
            return Poll::Ready(Ok(buf.len()));
        }
        ready!(self.poll_release(cx))?;
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let len = bufs.iter().map(|b| b.len()).sum();
        if self.holds(len) {
            for b in bufs {
                self.held.extend_from_slice(b);
            }
            return Poll::Ready(Ok(len));
        }
        ready!(self.poll_release(cx))?;
        Pin::new(&mut self.inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        if !self.between_requests() {
            ready!(self.poll_release(cx))?;
        }
        let ending = self.phase.get() == ENDING;
        ready!(Pin::new(&mut self.inner).poll_flush(cx))?;
        // hyper flushes only once everything it buffered is written: the response is out.
        if ending {
            self.phase.flushed();
            self.read_between = 0;
        }
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        // Between requests the connection is closed by `finish`, after the sidecar's answer.
        if self.between_requests() {
            return Poll::Ready(Ok(()));
        }
        ready!(self.poll_release(cx))?;
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

/// Write `reply`, close, and read what the client still sends for a moment, so that closing
/// does not reset the connection before the client has read the answer.
pub(crate) async fn answer_and_close<S: AsyncRead + AsyncWrite + Unpin>(
    stream: &mut S,
    reply: &[u8],
) {
    let _ = tokio::time::timeout(Duration::from_secs(1), async {
        stream.write_all(reply).await?;
        stream.shutdown().await?;
        // Read into a buffer of the copy's own, made now: one in this future would be carried
        // by every connection's task for its whole life.
        tokio::io::copy(stream, &mut tokio::io::sink()).await
    })
    .await;
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncReadExt;

    #[tokio::test]
    async fn between_requests_writes_are_held_and_a_response_passes_until_flushed() {
        let phase = Arc::new(Phase::default());
        let (client, server) = tokio::io::duplex(4096);
        let mut gate = Gate::new(server, phase.clone());
        gate.write_all(b"HTTP/1.1 400 Bad Request\r\n\r\n")
            .await
            .expect("held");
        assert!(!gate.held.is_empty() && gate.between_requests());
        // A request: its response goes out as written, after nothing held.
        gate.held.clear();
        phase.serving(false);
        gate.write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok")
            .await
            .expect("passes");
        let body = Tracked::new(
            http_body_util::Empty::<bytes::Bytes>::new(),
            phase.clone(),
            false,
        );
        drop(body);
        // Not yet flushed: still the response's bytes.
        gate.write_all(b"").await.expect("passes");
        assert!(!gate.between_requests());
        gate.flush().await.expect("flushed");
        assert!(gate.between_requests());
        gate.write_all(b"HTTP/1.1 431 x\r\n\r\n")
            .await
            .expect("held");
        assert!(!gate.held.is_empty());
        gate.finish(Some(b"HTTP/1.1 431 coded\r\n\r\n".to_vec()))
            .await;
        let mut got = String::new();
        let mut client = client;
        client.read_to_string(&mut got).await.expect("read");
        assert_eq!(
            got,
            "HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nokHTTP/1.1 431 coded\r\n\r\n"
        );
    }

    #[tokio::test]
    async fn a_tunnel_and_an_overlong_write_are_never_held() {
        let phase = Arc::new(Phase::default());
        let (mut client, server) = tokio::io::duplex(8192);
        let mut gate = Gate::new(server, phase.clone());
        phase.serving(false);
        drop(Tracked::new(
            http_body_util::Empty::<bytes::Bytes>::new(),
            phase.clone(),
            true,
        ));
        gate.flush().await.expect("flushed");
        gate.write_all(b"tunnel bytes").await.expect("passes");
        assert!(gate.held.is_empty());
        let mut buf = [0u8; 12];
        client.read_exact(&mut buf).await.expect("read");
        assert_eq!(&buf, b"tunnel bytes");

        let phase = Arc::new(Phase::default());
        let (mut client, server) = tokio::io::duplex(8192);
        let mut gate = Gate::new(server, phase);
        gate.write_all(&[b'x'; MAX_HELD + 1]).await.expect("passes");
        assert!(gate.held.is_empty());
        let mut buf = vec![0u8; MAX_HELD + 1];
        client.read_exact(&mut buf).await.expect("read");
    }

    #[tokio::test]
    async fn a_connection_is_parkable_only_between_requests_with_nothing_left_to_read() {
        let phase = Arc::new(Phase::default());
        let (mut client, server) = tokio::io::duplex(4096);
        let mut gate = Gate::new(server, phase.clone());
        assert!(phase.parkable(), "a new connection with nothing read");
        // Part of a head arrives: hyper holds it.
        client.write_all(b"GET / HT").await.expect("write");
        let mut buf = [0u8; 8];
        gate.read_exact(&mut buf).await.expect("read");
        assert!(!phase.parkable() && gate.between_requests());
        let answer = |body| {
            phase.serving(body);
            assert!(!phase.parkable(), "serving");
            drop(Tracked::new(
                http_body_util::Empty::<bytes::Bytes>::new(),
                phase.clone(),
                false,
            ));
            assert!(!phase.parkable(), "answered, not yet flushed");
        };
        answer(false);
        gate.flush().await.expect("flushed");
        assert!(
            phase.parkable(),
            "flushed, nothing of the next request read"
        );
        // A request with a body: hyper may still be reading it after the answer.
        answer(true);
        gate.flush().await.expect("flushed");
        assert!(!phase.parkable());
        phase.serving(false);
        drop(Tracked::new(
            http_body_util::Empty::<bytes::Bytes>::new(),
            phase.clone(),
            true,
        ));
        assert!(!phase.parkable(), "a tunnel never parks");
    }
}
