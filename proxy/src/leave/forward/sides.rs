//! Which side ended a tunnel, and whether that was a failure.
//!
//! A tunnel's copy tags each I/O error with the side it came from ([`Side::tag`]) and notes
//! when a side has finished sending ([`Finished`]). Many clients and servers end a connection
//! with a reset rather than a FIN (a socket closed with bytes still unread, `SO_LINGER` 0): a
//! reset the client makes, or one the upstream makes once the client had finished sending,
//! ends an exchange the client already had, and is a close. Only an upstream that resets or
//! fails while the client is still sending, or an error that is no reset, fails the tunnel
//! ([`ended`]).

use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

use super::tunnel::Closed;

/// A side of a tunnel.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Side {
    /// The service's connection to the sidecar.
    Client,
    /// The sidecar's connection to the upstream.
    Upstream,
}

impl Side {
    /// `error` as this side's.
    pub(crate) fn tag(self, error: io::Error) -> io::Error {
        if side_of(&error).is_some() {
            return error;
        }
        io::Error::new(error.kind(), SideError { side: self, error })
    }
}

/// An I/O error of one side of a tunnel.
#[derive(Debug, thiserror::Error)]
#[error("{}: {error}", match side { Side::Client => "the client", Side::Upstream => "the upstream" })]
struct SideError {
    side: Side,
    error: io::Error,
}

fn side_of(error: &io::Error) -> Option<Side> {
    error
        .get_ref()
        .and_then(|inner| inner.downcast_ref::<SideError>())
        .map(|e| e.side)
}

/// Whether each side has finished sending (its end was read).
#[derive(Debug, Default)]
pub(crate) struct Finished {
    client: AtomicBool,
    upstream: AtomicBool,
}

impl Finished {
    /// `side` has finished sending.
    pub(crate) fn set(&self, side: Side) {
        match side {
            Side::Client => self.client.store(true, Relaxed),
            Side::Upstream => self.upstream.store(true, Relaxed),
        }
    }

    fn client(&self) -> bool {
        self.client.load(Relaxed)
    }
}

/// How a tunnel whose copy returned `copied` ended, given what had `finished`.
pub(crate) fn ended(copied: io::Result<()>, finished: &Finished) -> Closed {
    let Err(error) = copied else {
        return Closed::Done;
    };
    let reset = matches!(
        error.kind(),
        io::ErrorKind::ConnectionReset
            | io::ErrorKind::BrokenPipe
            | io::ErrorKind::ConnectionAborted
    );
    let the_clients_end = side_of(&error) == Some(Side::Client) || finished.client();
    if reset && the_clients_end {
        Closed::Done
    } else {
        Closed::Failed(error.to_string())
    }
}

/// `io` as one side of a tunnel: its errors tagged with the side, its end of sending noted.
pub(crate) struct SideIo<'a, IO> {
    io: IO,
    side: Side,
    finished: &'a Finished,
}

impl<'a, IO> SideIo<'a, IO> {
    /// `io` as `side`, noting its end in `finished`.
    pub(crate) fn new(io: IO, side: Side, finished: &'a Finished) -> Self {
        Self { io, side, finished }
    }

    /// The connection itself.
    pub(crate) fn get_ref(&self) -> &IO {
        &self.io
    }
}

impl<IO: AsyncRead + Unpin> AsyncRead for SideIo<'_, IO> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let side = self.side;
        match Pin::new(&mut self.io).poll_read(cx, buf) {
            Poll::Ready(Ok(())) => {
                if buf.filled().len() == before && buf.remaining() > 0 {
                    self.finished.set(side);
                }
                Poll::Ready(Ok(()))
            }
            Poll::Ready(Err(e)) => Poll::Ready(Err(side.tag(e))),
            Poll::Pending => Poll::Pending,
        }
    }
}

impl<IO: AsyncWrite + Unpin> AsyncWrite for SideIo<'_, IO> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let side = self.side;
        Pin::new(&mut self.io)
            .poll_write(cx, buf)
            .map_err(|e| side.tag(e))
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let side = self.side;
        Pin::new(&mut self.io)
            .poll_flush(cx)
            .map_err(|e| side.tag(e))
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let side = self.side;
        Pin::new(&mut self.io)
            .poll_shutdown(cx)
            .map_err(|e| side.tag(e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reset() -> io::Error {
        io::ErrorKind::ConnectionReset.into()
    }

    #[test]
    fn a_reset_by_the_client_is_its_close() {
        let finished = Finished::default();
        let closed = ended(Err(Side::Client.tag(reset())), &finished);
        assert!(matches!(closed, Closed::Done));
    }

    #[test]
    fn an_upstream_reset_fails_the_tunnel_unless_the_client_had_finished() {
        let finished = Finished::default();
        let Closed::Failed(why) = ended(Err(Side::Upstream.tag(reset())), &finished) else {
            panic!("an upstream reset mid-exchange is a failure");
        };
        assert!(why.starts_with("the upstream: "), "{why}");
        finished.set(Side::Upstream);
        assert!(matches!(
            ended(Err(Side::Upstream.tag(reset())), &finished),
            Closed::Failed(_)
        ));
        finished.set(Side::Client);
        assert!(matches!(
            ended(Err(Side::Upstream.tag(reset())), &finished),
            Closed::Done
        ));
    }

    #[test]
    fn an_error_that_is_no_reset_fails_whichever_side_made_it() {
        let finished = Finished::default();
        finished.set(Side::Client);
        let timed_out = io::Error::from(io::ErrorKind::TimedOut);
        assert!(matches!(
            ended(Err(Side::Client.tag(timed_out)), &finished),
            Closed::Failed(_)
        ));
        assert!(matches!(ended(Ok(()), &finished), Closed::Done));
    }

    #[test]
    fn an_error_is_tagged_once_by_the_side_it_came_from() {
        let tagged = Side::Upstream.tag(Side::Client.tag(reset()));
        assert_eq!(side_of(&tagged), Some(Side::Client));
        assert_eq!(tagged.kind(), io::ErrorKind::ConnectionReset);
    }
}
