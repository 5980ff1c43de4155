//! One decision against catalogues of 10, 1 000 and 10 000 rules.
//!
//! Run with `cargo bench -p af-policy --bench decide`. The goal on the project's 2-core machine
//! is at most 50 ns per decision at 10 000 rules; the figure is reported here, never asserted.

#![allow(
    clippy::expect_used,
    reason = "benchmark setup fails the run by panicking"
)]

use std::hint::black_box;

use af_policy::egress::{Catalogue, EgressSpec, Mode, RuleSpec, Target};
use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};

fn rule(host: String, mode: Mode, paths: Vec<String>) -> RuleSpec {
    RuleSpec {
        paths,
        ..RuleSpec::new(host, mode)
    }
}

/// A realistic mix: exact hosts, wildcard suffixes, ports, some path rules, one `*`.
fn catalogue_of(n: usize) -> Catalogue {
    let mut rules: Vec<RuleSpec> = (0..n)
        .map(|i| match i % 4 {
            0 => rule(format!("api{i}.example.com"), Mode::Allow, vec![]),
            1 => rule(format!("*.tenant{i}.example.net"), Mode::Mock, vec![]),
            2 => rule(format!("svc{i}.example.org:8443"), Mode::Allow, vec![]),
            _ => rule(
                format!("hooks{i}.example.io"),
                Mode::Capture,
                vec!["/v1".into()],
            ),
        })
        .collect();
    rules.push(rule("*".into(), Mode::Block, vec![]));
    Catalogue::compile(&EgressSpec {
        default: Some(Mode::Block),
        allow_ipv6: false,
        upstream_roots: Vec::new(),
        rules,
    })
    .expect("compiles")
}

fn decide(c: &mut Criterion) {
    let mut group = c.benchmark_group("decide");
    for n in [10, 1_000, 10_000] {
        let catalogue = catalogue_of(n);
        let exact = format!("api{}.example.com", (n / 4) * 4 - 4);
        let wildcard = format!("a.b.tenant{}.example.net", (n / 4) * 4 - 3);
        for (name, host) in [
            ("exact", exact.as_str()),
            ("wildcard", wildcard.as_str()),
            ("miss", "www.unknown-host.test"),
        ] {
            group.bench_with_input(BenchmarkId::new(name, n), &host, |b, host| {
                b.iter(|| {
                    catalogue.decide(black_box(&Target {
                        method: "GET",
                        host,
                        port: 443,
                        path: "/v1/users/42",
                    }))
                })
            });
        }
    }
    group.finish();
}

criterion_group!(benches, decide);
criterion_main!(benches);
