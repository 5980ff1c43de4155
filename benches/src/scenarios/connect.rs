//! Bulk bytes through one CONNECT tunnel (direct: straight from the source; a relay: through
//! its TCP front end).

use super::{Ctx, proxy_of};
use crate::error::Result;
use crate::load::{LoadResult, tunnel};
use crate::systems::{Endpoint, Running};

/// One tunnel, downloading for the run's duration.
pub(super) fn run(running: &Running, ctx: &Ctx<'_>) -> Result<LoadResult> {
    let source = match running.endpoint {
        Endpoint::Reverse(fronts) => fronts.tcp,
        _ => ctx.upstream.bulk,
    };
    ctx.rt.block_on(tunnel::bulk(
        proxy_of(running),
        source,
        1,
        ctx.load.duration,
    ))
}
