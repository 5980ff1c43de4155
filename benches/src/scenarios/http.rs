//! The three plain-HTTP scenarios: keep-alive ones driven by wrk, new-connection
//! by the harness's own client (see `load::oneshot`).

use super::{Ctx, Scenario, proxy_of};
use crate::error::Result;
use crate::load::wrk::{self, WrkRun};
use crate::load::{LoadResult, oneshot};
use crate::systems::Endpoint;
use crate::systems::Running;
use crate::upstream::{LARGE_PATH, SMALL_PATH};

/// Runs wrk with the scenario's path, connection count and keep-alive.
pub(super) fn run(scenario: Scenario, running: &Running, ctx: &Ctx<'_>) -> Result<LoadResult> {
    let proxy = proxy_of(running);
    // A reverse proxy stands where the upstream is: origin-form requests to its address.
    let upstream = match running.endpoint {
        Endpoint::Reverse(fronts) => fronts.http,
        _ => ctx.upstream.http,
    };
    if scenario == Scenario::HttpNewConn {
        let target = match proxy {
            Some(_) => format!("http://{upstream}{SMALL_PATH}"),
            None => SMALL_PATH.to_string(),
        };
        let request =
            format!("GET {target} HTTP/1.1\r\nHost: {upstream}\r\nConnection: close\r\n\r\n");
        let connect = proxy.unwrap_or(upstream);
        return ctx.rt.block_on(oneshot::run(
            connect,
            request.into_bytes(),
            32,
            ctx.load.duration,
        ));
    }
    let (path, connections) = match scenario {
        Scenario::Http1m => (LARGE_PATH, 16),
        _ => (SMALL_PATH, 64),
    };
    let run = WrkRun {
        connect: proxy.unwrap_or(upstream),
        via_proxy: proxy.is_some(),
        upstream,
        path,
        threads: 2,
        connections,
        duration: ctx.load.duration,
    };
    wrk::run(&run, ctx.work)
}
