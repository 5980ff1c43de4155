//! The transparent TLS listener's peek: any bytes a client sends first are read as a ClientHello
//! or refused as not TLS. What was read is kept whole for the replay upstream (nothing is
//! consumed), the name is a DNS name or an IP literal, and how TCP cut the bytes does not change the outcome.
#![no_main]

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use af_fuzz::runtime;
use af_proxy::fuzzing::{Hello, read_client_hello};
use libfuzzer_sys::fuzz_target;
use rustls_pki_types::DnsName;
use tokio::io::{AsyncRead, ReadBuf};

/// The client's bytes, handed over at most `step` at a time, then end of stream.
struct Trickle<'a> {
    rest: &'a [u8],
    step: usize,
}

impl AsyncRead for Trickle<'_> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        _: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let n = self.rest.len().min(self.step).min(buf.remaining());
        let (now, later) = self.rest.split_at(n);
        buf.put_slice(now);
        self.rest = later;
        Poll::Ready(Ok(()))
    }
}

/// What the peek made of `bytes` read `step` at a time: the server name (`Ok(None)` for a hello
/// without one) or not TLS; and the bytes kept for replay.
fn peek(bytes: &[u8], step: usize) -> (Result<Option<String>, ()>, Vec<u8>) {
    let mut client = Trickle { rest: bytes, step };
    match runtime().block_on(read_client_hello(&mut client)) {
        Ok(Hello::Parsed { sni, bytes, .. }) => (Ok(sni), bytes),
        Ok(Hello::NotTls(_)) => (Err(()), Vec::new()),
        Err(e) => panic!("reading from memory failed: {e}"),
    }
}

fuzz_target!(|input: &[u8]| {
    let Some((&cut, bytes)) = input.split_first() else {
        return;
    };
    let (whole, kept) = peek(bytes, usize::MAX);
    if whole.is_ok() {
        assert!(
            bytes.starts_with(&kept),
            "the replay is what the client sent"
        );
        assert!(!kept.is_empty());
    }
    if let Ok(Some(name)) = &whole {
        // A host name, or the IP literal a hello names (decided as that address).
        assert!(
            DnsName::try_from(name.as_str()).is_ok() || name.parse::<std::net::IpAddr>().is_ok(),
            "SNI {name:?}"
        );
    }
    let (cut_up, kept_cut_up) = peek(bytes, usize::from(cut % 64) + 1);
    assert_eq!(
        whole, cut_up,
        "the outcome depends on how the bytes were cut"
    );
    if cut_up.is_ok() {
        assert!(
            bytes.starts_with(&kept_cut_up),
            "the replay is what the client sent"
        );
    }
});
