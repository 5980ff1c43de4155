//! DNS A queries for random outside names, driven by dnsperf.

use super::Ctx;
use crate::error::{BenchError, Result};
use crate::load::{LoadResult, dnsperf};
use crate::systems::{Endpoint, Running};

/// dnsperf with 16 clients against the system's DNS listener.
pub(super) fn run(running: &Running, ctx: &Ctx<'_>) -> Result<LoadResult> {
    let server = match (running.endpoint, running.dns) {
        (Endpoint::Dns(addr), _) | (_, Some(addr)) => addr,
        _ => return Err(BenchError::Protocol("system has no DNS listener".into())),
    };
    let queries = ctx.work.join("queries.txt");
    if !queries.is_file() {
        dnsperf::write_queries(ctx.work, 100_000, 0x5eed)?;
    }
    dnsperf::run(server, &queries, ctx.load.duration, 16)
}
