//! Resident memory per idle keep-alive client connection.

use std::time::Duration;

use super::{Ctx, proxy_of};
use crate::error::{BenchError, Result};
use crate::load::{LoadResult, idle};
use crate::proc;
use crate::systems::Running;
use crate::upstream::SMALL_PATH;

/// Opens the idle connections and returns (load, KiB per connection).
pub(super) fn run(running: &Running, ctx: &Ctx<'_>) -> Result<(LoadResult, f64)> {
    let (Some(proxy), Some(pid)) = (proxy_of(running), running.pid()) else {
        return Err(BenchError::Protocol(
            "idle memory needs a proxy process".into(),
        ));
    };
    let url = format!("http://{}{SMALL_PATH}", ctx.upstream.http);
    let host = ctx.upstream.http.to_string();
    let count = ctx.load.idle_connections;
    ctx.rt.block_on(async {
        // Warm up: buffers, pools and lazily built state exist before "before".
        let (warm, _) = idle::open(proxy, &url, &host, 64, 16).await?;
        drop(warm);
        tokio::time::sleep(Duration::from_millis(500)).await;
        let before = proc::sample(pid)?;
        let (conns, failed) = idle::open(proxy, &url, &host, count, 64).await?;
        tokio::time::sleep(Duration::from_secs(1)).await;
        let after = proc::sample(pid)?;
        // A proxy that drops idle client connections holds no memory for them:
        // count only the ones still open, and report the others as errors.
        let closed = idle::closed(&conns).await;
        let conns_len = conns.len();
        drop(conns);
        let open = conns_len - closed;
        if open == 0 {
            return Err(BenchError::Protocol(format!(
                "of {count} idle connections none stayed open ({failed} not set up, {closed} closed by the proxy)"
            )));
        }
        let load = LoadResult {
            ops: open as u64,
            secs: 1.0,
            errors: (failed + closed) as u64,
            ..LoadResult::default()
        };
        let per_conn = after.rss_kib.saturating_sub(before.rss_kib) as f64 / open as f64;
        Ok((load, per_conn))
    })
}
