//! HTTPS through an intercepting proxy (direct: straight to the upstream's TLS).

use super::{Ctx, proxy_of};
use crate::error::Result;
use crate::load::{LoadResult, https};
use crate::systems::Running;

/// 32 keep-alive HTTPS clients for the run's duration.
pub(super) fn run(running: &Running, ctx: &Ctx<'_>) -> Result<LoadResult> {
    let ca = running
        .ca_cert
        .clone()
        .unwrap_or_else(|| ctx.upstream.cert.clone());
    let tls = https::connector(&ca)?;
    ctx.rt.block_on(https::run(
        proxy_of(running),
        ctx.upstream.https,
        tls,
        32,
        ctx.load.duration,
    ))
}
