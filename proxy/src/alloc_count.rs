//! Allocations counted (feature `alloc-count`): the binary's allocator, jemalloc, wrapped in a
//! counter that `GET /metrics` shows as `af_proxy_allocations_total` and
//! `af_proxy_heap_live_bytes`, so the benchmark harness can divide the allocations of a run by
//! its requests, and the heap an idle connection holds from what the allocator keeps resident.

use stats_alloc::StatsAlloc;
use tikv_jemallocator::Jemalloc;

#[global_allocator]
static ALLOCATOR: StatsAlloc<Jemalloc> = StatsAlloc::new(Jemalloc);

/// Allocations since the process started; a reallocation counts as one (it may move).
pub(crate) fn total() -> u64 {
    let stats = ALLOCATOR.stats();
    u64::try_from(stats.allocations + stats.reallocations).unwrap_or(u64::MAX)
}

/// Bytes allocated and not yet freed: what the program holds, not what the allocator keeps.
pub(crate) fn live_bytes() -> u64 {
    let stats = ALLOCATOR.stats();
    let live = stats.bytes_allocated as i128 - stats.bytes_deallocated as i128
        + stats.bytes_reallocated as i128;
    u64::try_from(live).unwrap_or(0)
}
