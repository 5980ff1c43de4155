//! HTTPS through an intercepting proxy (direct: straight to the upstream's TLS; a reverse
//! proxy: to its TLS front end, which re-encrypts to the upstream).

use super::{Ctx, proxy_of};
use crate::error::Result;
use crate::load::{LoadResult, https};
use crate::systems::{Endpoint, Running};

/// 32 keep-alive HTTPS clients for the run's duration.
pub(super) fn run(running: &Running, ctx: &Ctx<'_>) -> Result<LoadResult> {
    let ca = running
        .ca_cert
        .clone()
        .unwrap_or_else(|| ctx.upstream.cert.clone());
    let tls = https::connector(&ca)?;
    let upstream = match running.endpoint {
        Endpoint::Reverse(fronts) => fronts.https,
        _ => ctx.upstream.https,
    };
    ctx.rt.block_on(https::run(
        proxy_of(running),
        upstream,
        tls,
        32,
        ctx.load.duration,
    ))
}
