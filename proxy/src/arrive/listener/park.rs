//! Between requests, a cleartext HTTP/1.1 connection holds none of hyper's buffers (issue 14).
//!
//! hyper keeps a connection's read buffer (8 to 16 KiB), its write buffer (8 KiB) and the box
//! for the answer being made for as long as the connection lasts, so a kept-alive client that
//! goes quiet would hold them all for nothing. Instead the connection looks every [`LOOK`]:
//! when no request is being answered, none of the next one has been read and the last one
//! came without a body, hyper's connection is shut gracefully (between requests that only
//! drops it: the gate keeps the socket open) and the socket alone waits for the client's next
//! bytes, which a new hyper connection then reads. A busy connection is parked at most once
//! per look, which costs it one new hyper connection.
//!
//! A TLS stream does not park: its session may already hold plaintext read from the socket.

use std::io;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio_rustls::server::TlsStream;

/// How often a connection looks whether it can park.
pub(super) const LOOK: Duration = Duration::from_millis(100);

/// An IO hyper serves HTTP/1.1 on.
pub(crate) trait Serve: AsyncRead + AsyncWrite + Unpin + Send + 'static {
    /// The IO as one that can wait for the client's next request alone, when it can.
    fn parking(&mut self) -> Option<&mut dyn Park> {
        None
    }
}

/// An IO that can wait for its client's next bytes without any of hyper's buffers.
pub(crate) trait Park: Send + Sync {
    /// Ready once the client has sent something, or closed.
    fn poll_readable(&self, cx: &mut Context<'_>) -> Poll<io::Result<()>>;

    /// Put back what hyper read and did not use, to be read again before anything else.
    fn unread(&mut self, bytes: Bytes);
}

impl<IO: AsyncRead + AsyncWrite + Unpin + Send + 'static> Serve for TlsStream<IO> {}
