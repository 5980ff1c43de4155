//! The decision benchmark's driver: the criterion bench's requests (`benches/support/mix.rs`)
//! decided in a loop, for the side-by-side harness (`af-benches`) and for callgrind.
//!
//! ```sh
//! decide time KIND RULES MILLIS   # ns=<median batch> allocations=<counted> decisions=<made>
//! decide count KIND RULES COUNT   # COUNT decisions and nothing else, for callgrind
//! ```
//!
//! KIND is `exact`, `wildcard` or `miss`; RULES the catalogue's size. One decision's
//! instructions are the difference between a `count` run of COUNT and one of 0, over COUNT.

use std::hint::black_box;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use af_policy::egress::Catalogue;

#[path = "../benches/support/mix.rs"]
mod mix;

/// Decisions per timed batch: a few milliseconds, so the clock's own cost is noise.
const BATCH: u32 = 100_000;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [mode, kind, rules, amount] = args.as_slice() else {
        eprintln!("usage: decide time|count exact|wildcard|miss RULES MILLIS|COUNT");
        return ExitCode::FAILURE;
    };
    let (Ok(rules), Ok(amount)) = (rules.parse::<usize>(), amount.parse::<u64>()) else {
        eprintln!("RULES and MILLIS or COUNT are numbers");
        return ExitCode::FAILURE;
    };
    let catalogue = mix::catalogue_of(rules);
    let Some((_, host)) = mix::hosts(rules).into_iter().find(|(k, _)| k == kind) else {
        eprintln!("KIND is exact, wildcard or miss");
        return ExitCode::FAILURE;
    };
    match mode.as_str() {
        "count" => decide(&catalogue, &host, amount),
        "time" => time(&catalogue, &host, Duration::from_millis(amount)),
        _ => {
            eprintln!("the mode is time or count");
            return ExitCode::FAILURE;
        }
    }
    ExitCode::SUCCESS
}

/// `count` decisions for `host`.
fn decide(catalogue: &Catalogue, host: &str, count: u64) {
    for _ in 0..count {
        black_box(catalogue.decide(black_box(&mix::target(host))));
    }
}

/// Batches of decisions for `host` until `budget` has passed (one batch first, untimed, to
/// warm the caches), then the median batch's nanoseconds per decision and every allocation
/// the timed decisions made.
fn time(catalogue: &Catalogue, host: &str, budget: Duration) {
    decide(catalogue, host, BATCH.into());
    let mut per_decision: Vec<f64> = Vec::with_capacity(1024);
    let mut allocations = 0;
    let started = Instant::now();
    while per_decision.len() < per_decision.capacity()
        && (per_decision.is_empty() || started.elapsed() < budget)
    {
        let mut took = Duration::ZERO;
        let counted = allocation_counter::measure(|| {
            let batch = Instant::now();
            decide(catalogue, host, BATCH.into());
            took = batch.elapsed();
        });
        allocations += counted.count_total;
        per_decision.push(took.as_secs_f64() * 1e9 / f64::from(BATCH));
    }
    per_decision.sort_by(f64::total_cmp);
    let median = per_decision[per_decision.len() / 2];
    let decisions = per_decision.len() as u64 * u64::from(BATCH);
    println!("ns={median:.2} allocations={allocations} decisions={decisions}");
}
