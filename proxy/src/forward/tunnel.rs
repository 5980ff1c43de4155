//! Untouched byte tunnels (CONNECT and transparent TLS) with large copy buffers and the idle
//! watchdog.

use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt};

use crate::limits::{Activity, IdleIo};

/// How a tunnel ended: bytes sent upstream, bytes received, and the error if any.
pub struct TunnelEnd {
    /// Client to upstream.
    pub up: u64,
    /// Upstream to client.
    pub down: u64,
    /// Why it ended badly.
    pub error: Option<String>,
}

/// Copy both ways until either side closes, an error, or `idle` with no traffic.
/// `replay` is written upstream first (the ClientHello already read from the client).
pub async fn run<C, U>(
    client: &mut C,
    upstream: U,
    replay: &[u8],
    buffer: usize,
    idle: Duration,
    activity: Arc<Activity>,
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
            error: Some(format!("upstream write failed: {e}")),
        };
    }
    let copy = tokio::io::copy_bidirectional_with_sizes(client, &mut upstream, buffer, buffer);
    let result = tokio::select! {
        r = copy => r.map(|_| ()).map_err(|e| e.to_string()),
        () = activity.idle_for(idle) => Err(format!("closed after {} s without traffic", idle.as_secs())),
    };
    TunnelEnd {
        up: upstream.written(),
        down: upstream.read(),
        error: result.err(),
    }
}
