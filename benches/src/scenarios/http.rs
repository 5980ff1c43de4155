//! The three plain-HTTP scenarios, driven by wrk.

use super::{Ctx, Scenario, proxy_of};
use crate::error::Result;
use crate::load::LoadResult;
use crate::load::wrk::{self, WrkRun};
use crate::systems::Running;
use crate::upstream::{LARGE_PATH, SMALL_PATH};

/// Runs wrk with the scenario's path, connection count and keep-alive.
pub fn run(scenario: Scenario, running: &Running, ctx: &Ctx<'_>) -> Result<LoadResult> {
    let proxy = proxy_of(running);
    let (path, close, connections) = match scenario {
        Scenario::HttpNewConn => (SMALL_PATH, true, 32),
        Scenario::Http1m => (LARGE_PATH, false, 16),
        _ => (SMALL_PATH, false, 64),
    };
    let run = WrkRun {
        connect: proxy.unwrap_or(ctx.upstream.http),
        via_proxy: proxy.is_some(),
        upstream: ctx.upstream.http,
        path,
        close,
        threads: 2,
        connections,
        duration: ctx.load.duration,
    };
    wrk::run(&run, ctx.work)
}
