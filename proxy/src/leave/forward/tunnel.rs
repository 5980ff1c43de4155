//! Untouched byte tunnels (CONNECT and transparent TLS) under the idle watchdog and the drain
//! deadline. Between two TCP sockets on Linux the kernel moves the bytes (`splice.rs`);
//! otherwise, or when its pipes cannot be made, they are copied through large buffers.

use std::future::Future;
use std::io;
use std::sync::Arc;

use af_policy::error::codes;
use hyper::upgrade::Upgraded;
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;

use super::sides::{self, Finished, Side, SideIo};
use crate::decide::Ticket;
use crate::limits::{Activity, IdleIo, UpstreamConn};
use crate::metrics::TunnelCopy;
use crate::state::State;

/// The client end of a tunnel.
pub(crate) enum Client {
    /// The client's own socket: spliced to the upstream's on Linux.
    Socket(TcpStream),
    /// A connection hyper took over that is not a bare socket (a CONNECT stream of HTTP/2).
    Upgraded(TokioIo<Upgraded>),
}

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

/// Carry bytes both ways until both sides close, an error, `limits.idle_timeout_ms` with no
/// traffic, or the drain cut. `replay` (bytes already read from the client: the ClientHello, or
/// what followed a CONNECT head) is written upstream first. The upstream keeps its place under
/// the upstream cap until the tunnel ends.
pub(crate) async fn run(
    client: Client,
    mut upstream: UpstreamConn,
    replay: &[u8],
    state: &State,
    activity: Arc<Activity>,
) -> TunnelEnd {
    if !replay.is_empty() {
        if let Err(e) = upstream.write_all(replay).await {
            return TunnelEnd {
                up: 0,
                down: 0,
                closed: Closed::Failed(format!("upstream write failed: {e}")),
            };
        }
        activity.touch();
    }
    let mut end = match client {
        Client::Socket(socket) => match zero_copy(&socket, &upstream, state, &activity).await {
            Ok(end) => end,
            Err(e) => {
                tracing::debug!(error = %e, "no pipe for a tunnel: copying it through buffers");
                state.metrics.tunnel(TunnelCopy::Buffered);
                buffered(socket, upstream, state, activity).await
            }
        },
        Client::Upgraded(io) => {
            state.metrics.tunnel(TunnelCopy::Buffered);
            buffered(io, upstream, state, activity).await
        }
    };
    end.up += replay.len() as u64;
    end
}

/// Splice the two sockets; `Err` when no pipe could be made, before any byte moved.
#[cfg(target_os = "linux")]
async fn zero_copy(
    client: &TcpStream,
    upstream: &UpstreamConn,
    state: &State,
    activity: &Activity,
) -> io::Result<TunnelEnd> {
    use super::splice::{Moved, Pipes, pump};
    use std::sync::atomic::Ordering::Relaxed;
    let pipes = Pipes::new(state.tuning.tunnel_buffer_bytes)?;
    state.metrics.tunnel(TunnelCopy::Splice);
    let moved = Moved::default();
    let finished = Finished::default();
    let pumped = pump(
        client,
        upstream.socket(),
        &pipes,
        &moved,
        &finished,
        activity,
    );
    let closed = watched(pumped, &finished, state, activity).await;
    Ok(TunnelEnd {
        up: moved.up.load(Relaxed),
        down: moved.down.load(Relaxed),
        closed,
    })
}

/// No splice(2) here: always the buffered copy.
#[cfg(not(target_os = "linux"))]
async fn zero_copy(
    _: &TcpStream,
    _: &UpstreamConn,
    _: &State,
    _: &Activity,
) -> io::Result<TunnelEnd> {
    Err(io::ErrorKind::Unsupported.into())
}

/// Copy through a buffer of `limits.tunnel_buffer_bytes` each way, counting what the
/// upstream was sent and sent back (a tunnel without splice, a switched protocol's relay).
pub(crate) async fn buffered<C, U>(
    client: C,
    upstream: U,
    state: &State,
    activity: Arc<Activity>,
) -> TunnelEnd
where
    C: AsyncRead + AsyncWrite + Unpin,
    U: AsyncRead + AsyncWrite + Unpin,
{
    let buffer = state.tuning.tunnel_buffer_bytes;
    let finished = Finished::default();
    let mut client = SideIo::new(client, Side::Client, &finished);
    let upstream = IdleIo::new(upstream, activity.clone());
    let mut upstream = SideIo::new(upstream, Side::Upstream, &finished);
    let copy = tokio::io::copy_bidirectional_with_sizes(&mut client, &mut upstream, buffer, buffer);
    let closed = watched(async { copy.await.map(drop) }, &finished, state, &activity).await;
    TunnelEnd {
        up: upstream.get_ref().written(),
        down: upstream.get_ref().read(),
        closed,
    }
}

/// How `copy` ended ([`sides::ended`]: a reset that ends the client's exchange is a close),
/// or the idle watchdog, or the drain cut, whichever came first.
async fn watched(
    copy: impl Future<Output = io::Result<()>>,
    finished: &Finished,
    state: &State,
    activity: &Activity,
) -> Closed {
    let idle = state.tuning.idle_timeout;
    tokio::select! {
        r = copy => sides::ended(r, finished),
        () = activity.idle_for(idle) => Closed::Failed(format!("closed after {} s without traffic", idle.as_secs())),
        () = state.drain.cut() => Closed::Cut,
    }
}
