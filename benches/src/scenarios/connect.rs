//! Bulk bytes through one CONNECT tunnel (direct: straight from the source).

use super::{Ctx, proxy_of};
use crate::error::Result;
use crate::load::{LoadResult, tunnel};
use crate::systems::Running;

/// One tunnel, downloading for the run's duration.
pub(super) fn run(running: &Running, ctx: &Ctx<'_>) -> Result<LoadResult> {
    ctx.rt.block_on(tunnel::bulk(
        proxy_of(running),
        ctx.upstream.bulk,
        1,
        ctx.load.duration,
    ))
}
