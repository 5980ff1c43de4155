//! The catalogue and the three requests the decision benchmarks measure, shared by the
//! criterion bench (`benches/decide.rs`) and the driver the harness and callgrind run
//! (`examples/decide.rs`).

use af_policy::egress::{Catalogue, EgressSpec, Mode, RuleSpec, Target};

fn rule(host: String, mode: Mode, paths: Vec<String>) -> RuleSpec {
    RuleSpec {
        paths,
        ..RuleSpec::new(host, mode)
    }
}

/// A realistic mix of `n` rules: exact hosts, wildcard suffixes, ports, some path rules, one `*`.
pub(crate) fn catalogue_of(n: usize) -> Catalogue {
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
    .unwrap_or_else(|problems| panic!("the benchmark catalogue compiles: {problems:?}"))
}

/// The measured hosts for a catalogue of `n` rules: (`exact`, `wildcard`, `miss`) with the host
/// each asks for.
pub(crate) fn hosts(n: usize) -> [(&'static str, String); 3] {
    [
        ("exact", format!("api{}.example.com", (n / 4) * 4 - 4)),
        (
            "wildcard",
            format!("a.b.tenant{}.example.net", (n / 4) * 4 - 3),
        ),
        ("miss", "www.unknown-host.test".to_owned()),
    ]
}

/// The request every measured decision is for, to `host`.
pub(crate) fn target(host: &str) -> Target<'_> {
    Target {
        method: "GET",
        host,
        port: 443,
        path: "/v1/users/42",
    }
}
