//! Telling HTTP/2 with prior knowledge (h2c, RFC 9113 §3.3) from HTTP/1.1 on a cleartext
//! listener: the client's first bytes are compared with the HTTP/2 connection preface, then
//! handed back unread to whichever server speaks them.
//!
//! hyper-util's `auto` server makes the same comparison, but its connection cannot be taken
//! apart afterwards, and the HTTP/1.1 path needs that to answer a head hyper could not read
//! with the sidecar's coded refusal (`gate.rs`). So the bytes are read here and replayed.
//! A connection that parks between requests (`park.rs`) puts back hyper's unused bytes here.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::{Buf, Bytes, BytesMut};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;

use super::park::{Park, Serve};

/// The client connection preface of HTTP/2 (RFC 9113 §3.4).
const PREFACE: &[u8; 24] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

/// Which protocol a cleartext client speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Speaks {
    /// HTTP/1.x (or something that is not the preface, which HTTP/1.1 then refuses).
    Http1,
    /// HTTP/2 with prior knowledge.
    Http2,
}

/// Read until the first bytes are the whole preface or differ from it (or the client closes).
/// Returns what the client speaks and the stream with those bytes put back. Fails only when
/// reading fails.
pub(crate) async fn sniff<IO: AsyncRead + Unpin>(mut io: IO) -> io::Result<(Speaks, Replay<IO>)> {
    let mut head = [0u8; PREFACE.len()];
    let mut filled = 0;
    let speaks = loop {
        if filled == PREFACE.len() {
            break Speaks::Http2;
        }
        let n = io.read(&mut head[filled..]).await?;
        filled += n;
        if n == 0 || head[..filled] != PREFACE[..filled] {
            break Speaks::Http1;
        }
    };
    Ok((
        speaks,
        Replay {
            unread: Bytes::copy_from_slice(&head[..filled]),
            inner: io,
        },
    ))
}

/// A stream whose first bytes, already read, are read again before the rest.
#[derive(Debug)]
pub(crate) struct Replay<IO> {
    /// Read from `inner` and not yet read again: the sniffed bytes, or what hyper put back.
    unread: Bytes,
    inner: IO,
}

impl<IO> Replay<IO> {
    /// The stream, and the bytes not yet read again (they come before its own).
    pub(crate) fn into_parts(self) -> (IO, Bytes) {
        (self.inner, self.unread)
    }

    /// Put back `bytes`, read from here before anything still unread, to be read again first.
    /// They are copied: `bytes` is a view of hyper's whole read buffer, empty or not, and
    /// keeping it would keep the buffer that parking lets go of.
    fn put_back(&mut self, bytes: Bytes) {
        if bytes.is_empty() {
            return;
        }
        let mut both = BytesMut::with_capacity(bytes.len() + self.unread.len());
        both.extend_from_slice(&bytes);
        both.extend_from_slice(&self.unread);
        self.unread = both.freeze();
    }
}

impl Serve for Replay<TcpStream> {
    fn parking(&mut self) -> Option<&mut dyn Park> {
        Some(self)
    }
}

impl Park for Replay<TcpStream> {
    fn poll_readable(&self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        if self.unread.is_empty() {
            self.inner.poll_read_ready(cx)
        } else {
            Poll::Ready(Ok(()))
        }
    }

    fn unread(&mut self, bytes: Bytes) {
        self.put_back(bytes);
    }
}

impl<IO: AsyncRead + Unpin> AsyncRead for Replay<IO> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        if !self.unread.is_empty() {
            let n = self.unread.len().min(buf.remaining());
            buf.put_slice(&self.unread[..n]);
            self.unread.advance(n);
            return Poll::Ready(Ok(()));
        }
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl<IO: AsyncWrite + Unpin> AsyncWrite for Replay<IO> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncWriteExt;

    async fn sniffed(sent: &[&[u8]]) -> (Speaks, Vec<u8>) {
        let (mut client, server) = tokio::io::duplex(1024);
        for part in sent {
            client.write_all(part).await.expect("write");
        }
        drop(client);
        let (speaks, mut replay) = sniff(server).await.expect("sniffed");
        let mut back = Vec::new();
        replay.read_to_end(&mut back).await.expect("replayed");
        (speaks, back)
    }

    #[tokio::test]
    async fn the_preface_is_http2_and_every_byte_is_read_again() {
        let sent = [&PREFACE[..5], &PREFACE[5..], b"\0\0\0\x04"];
        let (speaks, back) = sniffed(&sent).await;
        assert_eq!(speaks, Speaks::Http2);
        assert_eq!(back, sent.concat());
    }

    #[tokio::test]
    async fn anything_else_is_http1_as_soon_as_it_differs_and_is_read_again() {
        let (speaks, back) = sniffed(&[b"GET / HTTP/1.1\r\n\r\n"]).await;
        assert_eq!(speaks, Speaks::Http1);
        assert_eq!(back, b"GET / HTTP/1.1\r\n\r\n");
        // A start of the preface, then the client closes: not HTTP/2.
        let (speaks, back) = sniffed(&[b"PRI * HT"]).await;
        assert_eq!((speaks, back.as_slice()), (Speaks::Http1, &b"PRI * HT"[..]));
        let (speaks, back) = sniffed(&[]).await;
        assert_eq!((speaks, back.len()), (Speaks::Http1, 0));
    }

    #[tokio::test]
    async fn bytes_put_back_are_read_before_what_is_still_unread_then_the_stream() {
        let (mut client, server) = tokio::io::duplex(1024);
        client
            .write_all(b"GET / HTTP/1.1\r\n")
            .await
            .expect("write");
        let (_, mut replay) = sniff(server).await.expect("sniffed");
        let mut first = [0u8; 4];
        replay.read_exact(&mut first).await.expect("read");
        assert_eq!(&first, b"GET ");
        // What hyper read and did not use goes back ahead of the unread rest of the sniff.
        replay.put_back(Bytes::from_static(b"GET "));
        client
            .write_all(b"Host: a.test\r\n\r\n")
            .await
            .expect("write");
        drop(client);
        let mut back = Vec::new();
        replay.read_to_end(&mut back).await.expect("replayed");
        assert_eq!(back, b"GET / HTTP/1.1\r\nHost: a.test\r\n\r\n");
        replay.put_back(Bytes::from_static(b"GET /next"));
        let mut again = Vec::new();
        replay.read_to_end(&mut again).await.expect("replayed");
        assert_eq!(again, b"GET /next");
    }

    #[tokio::test]
    async fn what_is_put_back_keeps_nothing_of_the_buffer_it_came_from() {
        let (_, mut replay) = sniff(tokio::io::empty()).await.expect("sniffed");
        let hyper_buffer = Bytes::from(vec![b'x'; 16 * 1024]);
        replay.put_back(hyper_buffer.slice(0..0));
        replay.put_back(hyper_buffer.slice(..3));
        assert!(hyper_buffer.is_unique(), "the read buffer is still held");
        let mut back = Vec::new();
        replay.read_to_end(&mut back).await.expect("replayed");
        assert_eq!(back, b"xxx");
    }
}
