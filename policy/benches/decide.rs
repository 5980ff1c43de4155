//! One decision against catalogues of 10, 1 000 and 10 000 rules.
//!
//! Run with `cargo bench -p af-policy --bench decide`. The goal (issue 14) is at most 30 ns per
//! decision at 10 and at 10 000 rules, with no allocation (`tests/decide_allocates_nothing.rs`);
//! the figure is reported here, never asserted. `examples/decide.rs` makes the same decisions
//! for the side-by-side harness (timed) and for callgrind (instructions, a figure a loaded
//! machine does not move).

use std::hint::black_box;

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};

#[path = "support/mix.rs"]
mod mix;

fn decide(c: &mut Criterion) {
    let mut group = c.benchmark_group("decide");
    for n in [10, 1_000, 10_000] {
        let catalogue = mix::catalogue_of(n);
        for (name, host) in mix::hosts(n) {
            group.bench_with_input(BenchmarkId::new(name, n), &host, |b, host| {
                b.iter(|| catalogue.decide(black_box(&mix::target(host))))
            });
        }
    }
    group.finish();
}

criterion_group!(benches, decide);
criterion_main!(benches);
