//! Resident memory per idle keep-alive client connection.

use std::time::Duration;

use super::{Ctx, proxy_of};
use crate::error::{BenchError, Result};
use crate::load::{LoadResult, idle};
use crate::proc;
use crate::systems::Running;
use crate::upstream::SMALL_PATH;

/// What the idle connections cost the system.
pub(super) struct Idle {
    /// The connections that stayed open, and those that did not as errors.
    pub load: LoadResult,
    /// Resident memory gained per open connection, KiB.
    pub rss_kib_per_conn: f64,
    /// Heap held per open connection, KiB, when `heap` reads a figure.
    pub heap_kib_per_conn: Option<f64>,
}

/// Opens the idle connections and measures what they cost; `heap` reads the bytes of heap the
/// system holds, for a system that counts them.
pub(super) fn run(
    running: &Running,
    ctx: &Ctx<'_>,
    heap: impl Fn() -> Result<Option<f64>>,
) -> Result<Idle> {
    let (Some(proxy), Some(pid)) = (proxy_of(running), running.pid()) else {
        return Err(BenchError::Protocol(
            "idle memory needs a proxy process".into(),
        ));
    };
    let url = format!("http://{}{SMALL_PATH}", ctx.upstream.http);
    let host = ctx.upstream.http.to_string();
    let count = ctx.load.idle_connections;
    // Warm up: buffers, pools and lazily built state exist before "before".
    let (warm, _) = ctx.rt.block_on(idle::open(proxy, &url, &host, 64, 16))?;
    drop(warm);
    std::thread::sleep(Duration::from_millis(500));
    let before = proc::sample(pid)?;
    let heap_before = heap()?;
    let (conns, failed) = ctx.rt.block_on(idle::open(proxy, &url, &host, count, 64))?;
    std::thread::sleep(Duration::from_secs(1));
    let after = proc::sample(pid)?;
    let heap_after = heap()?;
    // A proxy that drops idle client connections holds no memory for them:
    // count only the ones still open, and report the others as errors.
    let closed = ctx.rt.block_on(idle::closed(&conns));
    let open = conns.len() - closed;
    ctx.rt.block_on(async move { drop(conns) });
    if open == 0 {
        return Err(BenchError::Protocol(format!(
            "of {count} idle connections none stayed open ({failed} not set up, {closed} closed by the proxy)"
        )));
    }
    let per_conn = |kib: f64| kib / open as f64;
    Ok(Idle {
        load: LoadResult {
            ops: open as u64,
            secs: 1.0,
            errors: (failed + closed) as u64,
            ..LoadResult::default()
        },
        rss_kib_per_conn: per_conn(after.rss_kib.saturating_sub(before.rss_kib) as f64),
        heap_kib_per_conn: heap_before
            .zip(heap_after)
            .map(|(b, a)| per_conn((a - b) / 1024.0)),
    })
}
