//! A decision on the proxy's hot path allocates nothing: counted with a counting allocator.

#![allow(
    clippy::expect_used,
    reason = "test helpers fail the test by panicking, like #[test] functions"
)]

use af_policy::egress::{Catalogue, EgressSpec, Mode, RuleSpec, Target};

fn catalogue_of(n: usize) -> Catalogue {
    let mut rules: Vec<RuleSpec> = (0..n)
        .map(|i| {
            let host = match i % 3 {
                0 => format!("api{i}.example.com"),
                1 => format!("*.svc{i}.example.net"),
                _ => format!("host{i}.example.org:8443"),
            };
            let paths = if i % 7 == 0 {
                vec!["/v1".into()]
            } else {
                vec![]
            };
            let methods = if i % 11 == 0 {
                vec!["POST".into()]
            } else {
                vec![]
            };
            RuleSpec {
                paths,
                methods,
                ..RuleSpec::new(host, Mode::Allow)
            }
        })
        .collect();
    rules.push(RuleSpec::new("*", Mode::Block));
    Catalogue::compile(&EgressSpec {
        default: Some(Mode::Block),
        allow_ipv6: false,
        upstream_roots: Vec::new(),
        rules,
    })
    .expect("compiles")
}

#[test]
fn deciding_ascii_hosts_allocates_nothing() {
    let catalogue = catalogue_of(10_000);
    let targets = [
        ("GET", "api0.example.com", 443, "/v1/users"),
        ("POST", "API3.Example.COM.", 443, "/x"),
        ("GET", "deep.a.svc1.example.net", 443, "/"),
        ("GET", "host2.example.org", 8443, "/"),
        ("GET", "unknown.test", 80, "/"),
        ("GET", "203.0.113.9", 80, "/"),
        ("GET", "", 80, "/"),
    ];
    let counts = allocation_counter::measure(|| {
        for (method, host, port, path) in targets {
            let decision = catalogue.decide(&Target {
                method,
                host,
                port,
                path,
            });
            std::hint::black_box(decision);
            std::hint::black_box(catalogue.decide_host(host, port));
        }
    });
    assert_eq!(counts.count_total, 0, "a decision allocated: {counts:?}");
    // Positive control: the counter does see an allocation, and a Unicode host is one.
    let unicode = allocation_counter::measure(|| {
        std::hint::black_box(catalogue.decide_host("bücher.example", 443));
    });
    assert!(
        unicode.count_total > 0,
        "the allocation counter is not in force"
    );
}
