//! `decide_ir KIND RULES COUNT`: COUNT decisions of the benchmark's KIND (`exact`, `wildcard`,
//! `miss`) against its catalogue of RULES rules, for callgrind. One decision's instruction
//! count is the difference between a run of COUNT and a run of 0, divided by COUNT:
//!
//! ```sh
//! cargo build --release -p af-policy --example decide_ir
//! valgrind --tool=callgrind target/release/examples/decide_ir exact 10000 1000000
//! ```

use std::hint::black_box;
use std::process::ExitCode;

#[path = "../benches/support/mix.rs"]
mod mix;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [kind, rules, count] = args.as_slice() else {
        eprintln!("usage: decide_ir exact|wildcard|miss RULES COUNT");
        return ExitCode::FAILURE;
    };
    let (Ok(rules), Ok(count)) = (rules.parse::<usize>(), count.parse::<u64>()) else {
        eprintln!("RULES and COUNT are numbers");
        return ExitCode::FAILURE;
    };
    let catalogue = mix::catalogue_of(rules);
    let Some((_, host)) = mix::hosts(rules).into_iter().find(|(k, _)| k == kind) else {
        eprintln!("KIND is exact, wildcard or miss");
        return ExitCode::FAILURE;
    };
    for _ in 0..count {
        black_box(catalogue.decide(black_box(&mix::target(&host))));
    }
    ExitCode::SUCCESS
}
