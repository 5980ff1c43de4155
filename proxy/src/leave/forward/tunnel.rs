//! Untouched byte tunnels (CONNECT and transparent TLS) with large copy buffers, the idle
//! watchdog and the drain deadline.

use std::sync::Arc;
use std::time::Duration;

use af_policy::error::codes;
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt};

use crate::decide::Ticket;
use crate::drain::Drain;
use crate::limits::{Activity, IdleIo};

/// How a tunnel ended: bytes sent upstream, bytes received, and why.
pub(crate) struct TunnelEnd {
    /// Client to upstream.
    pub up: u64,
    /// Upstream to client.
    pub down: u64,
    /// Why it ended.
    pub closed: Closed,
}

/// Why a tunnel ended.
pub(crate) enum Closed {
    /// A side closed.
    Done,
    /// An error, or the idle watchdog.
    Failed(String),
    /// The sidecar stopped and its drain deadline passed.
    Cut,
}

impl TunnelEnd {
    /// Close the tunnel's ticket with how it ended; `status` is what the client was answered
    /// (200 for a CONNECT, none on the transparent TLS listener).
    pub(crate) fn close(self, ticket: Ticket, status: Option<u16>) {
        let TunnelEnd { up, down, closed } = self;
        match closed {
            Closed::Done => ticket.tunnelled(status, up, down),
            Closed::Failed(error) => {
                ticket.upstream_failed(status, &codes::NET_UPSTREAM, "tunnel", error, up, down);
            }
            Closed::Cut => ticket.cut(status, up, down),
        }
    }
}

/// Copy both ways until either side closes, an error, `idle` with no traffic, or the cut of
/// `drain`. `replay` is written upstream first (the ClientHello already read from the client).
pub(crate) async fn run<C, U>(
    client: &mut C,
    upstream: U,
    replay: &[u8],
    buffer: usize,
    idle: Duration,
    activity: Arc<Activity>,
    drain: &Drain,
) -> TunnelEnd
where
    C: AsyncRead + AsyncWrite + Unpin + ?Sized,
    U: AsyncRead + AsyncWrite + Unpin,
{
    let mut upstream = IdleIo::new(upstream, activity.clone());
    if !replay.is_empty()
        && let Err(e) = upstream.write_all(replay).await
    {
        return TunnelEnd {
            up: 0,
            down: 0,
            closed: Closed::Failed(format!("upstream write failed: {e}")),
        };
    }
    let copy = tokio::io::copy_bidirectional_with_sizes(client, &mut upstream, buffer, buffer);
    let closed = tokio::select! {
        r = copy => r.map_or_else(|e| Closed::Failed(e.to_string()), |_| Closed::Done),
        () = activity.idle_for(idle) => Closed::Failed(format!("closed after {} s without traffic", idle.as_secs())),
        () = drain.cut() => Closed::Cut,
    };
    TunnelEnd {
        up: upstream.written(),
        down: upstream.read(),
        closed,
    }
}
