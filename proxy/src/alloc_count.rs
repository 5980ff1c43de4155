//! Allocations counted (feature `alloc-count`): the binary's allocator, jemalloc, wrapped in a
//! counter that `GET /metrics` shows as `af_proxy_allocations_total`, so the benchmark harness
//! can divide the allocations of a run by its requests.

use stats_alloc::StatsAlloc;
use tikv_jemallocator::Jemalloc;

#[global_allocator]
static ALLOCATOR: StatsAlloc<Jemalloc> = StatsAlloc::new(Jemalloc);

/// Allocations since the process started; a reallocation counts as one (it may move).
pub(crate) fn total() -> u64 {
    let stats = ALLOCATOR.stats();
    u64::try_from(stats.allocations + stats.reallocations).unwrap_or(u64::MAX)
}
