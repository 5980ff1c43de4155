//! Table-driven tests for how the catalogue decides, confusable hosts first.

#![allow(
    clippy::expect_used,
    reason = "test helpers fail the test by panicking, like #[test] functions"
)]

use af_policy::egress::{
    Catalogue, EgressSpec, Miss, Mode, Reason, RuleId, RuleSpec, Target, UrlError,
};

fn rule(host: &str, mode: Mode) -> RuleSpec {
    RuleSpec::new(host, mode)
}

fn with_paths(mut rule: RuleSpec, paths: &[&str]) -> RuleSpec {
    rule.paths = paths.iter().map(|p| p.to_string()).collect();
    rule
}

fn with_methods(mut rule: RuleSpec, methods: &[&str]) -> RuleSpec {
    rule.methods = methods.iter().map(|m| m.to_string()).collect();
    rule
}

fn catalogue(default: Option<Mode>, rules: Vec<RuleSpec>) -> Catalogue {
    Catalogue::compile(&EgressSpec {
        default,
        allow_ipv6: false,
        upstream_roots: Vec::new(),
        rules,
    })
    .expect("catalogue compiles")
}

/// (method, host, port, path) → (mode, winning rule index or None for the default)
type Case = (
    &'static str,
    &'static str,
    u16,
    &'static str,
    Mode,
    Option<u32>,
);

fn check(catalogue: &Catalogue, cases: &[Case]) {
    for &(method, host, port, path, mode, rule) in cases {
        let decision = catalogue.decide(&Target {
            method,
            host,
            port,
            path,
        });
        assert_eq!(
            (decision.mode, decision.rule.map(|r| r.0)),
            (mode, rule),
            "{method} {host}:{port}{path}"
        );
    }
}

#[test]
fn confusable_hosts_do_not_match_an_exact_rule() {
    let c = catalogue(None, vec![rule("example.com", Mode::Allow)]);
    check(
        &c,
        &[
            ("GET", "example.com", 443, "/", Mode::Allow, Some(0)),
            ("GET", "EXAMPLE.COM", 443, "/", Mode::Allow, Some(0)),
            ("GET", "Example.Com.", 443, "/", Mode::Allow, Some(0)),
            ("GET", "notexample.com", 443, "/", Mode::Block, None),
            ("GET", "evil-example.com", 443, "/", Mode::Block, None),
            ("GET", "example.com.evil.net", 443, "/", Mode::Block, None),
            ("GET", "www.example.com", 443, "/", Mode::Block, None),
            ("GET", "example.co", 443, "/", Mode::Block, None),
        ],
    );
}

#[test]
fn wildcard_matches_subdomains_but_never_the_apex() {
    let c = catalogue(None, vec![rule("*.example.com", Mode::Allow)]);
    check(
        &c,
        &[
            ("GET", "api.example.com", 443, "/", Mode::Allow, Some(0)),
            ("GET", "a.b.example.com", 443, "/", Mode::Allow, Some(0)),
            ("GET", "API.EXAMPLE.COM.", 443, "/", Mode::Allow, Some(0)),
            ("GET", "example.com", 443, "/", Mode::Block, None),
            ("GET", "notexample.com", 443, "/", Mode::Block, None),
            ("GET", "evil-example.com", 443, "/", Mode::Block, None),
            ("GET", "example.com.evil.net", 443, "/", Mode::Block, None),
        ],
    );
}

#[test]
fn unicode_host_and_its_punycode_form_are_the_same_host() {
    let c = catalogue(
        None,
        vec![
            rule("bücher.example", Mode::Allow),
            rule("xn--caf-dma.example", Mode::Mock),
        ],
    );
    check(
        &c,
        &[
            ("GET", "bücher.example", 443, "/", Mode::Allow, Some(0)),
            (
                "GET",
                "xn--bcher-kva.example",
                443,
                "/",
                Mode::Allow,
                Some(0),
            ),
            (
                "GET",
                "XN--BCHER-KVA.example.",
                443,
                "/",
                Mode::Allow,
                Some(0),
            ),
            ("GET", "café.example", 443, "/", Mode::Mock, Some(1)),
            ("GET", "bucher.example", 443, "/", Mode::Block, None),
        ],
    );
}

#[test]
fn host_port_rules_apply_to_their_port_only() {
    let c = catalogue(
        Some(Mode::Block),
        vec![
            rule("example.com:8443", Mode::Allow),
            rule("example.com", Mode::Mock),
        ],
    );
    check(
        &c,
        &[
            ("GET", "example.com", 8443, "/", Mode::Allow, Some(0)),
            ("GET", "example.com", 443, "/", Mode::Mock, Some(1)),
            ("GET", "example.com", 80, "/", Mode::Mock, Some(1)),
        ],
    );
}

#[test]
fn a_rule_without_a_port_lets_the_web_through_and_a_block_without_one_closes_every_port() {
    let c = catalogue(
        Some(Mode::Block),
        vec![
            rule("allowed.test", Mode::Allow),
            rule("allowed.test:2222", Mode::Allow),
            rule("mocked.test", Mode::Mock),
            rule("*", Mode::Allow),
            rule("closed.test", Mode::Block),
        ],
    );
    check(
        &c,
        &[
            ("GET", "allowed.test", 80, "/", Mode::Allow, Some(0)),
            ("GET", "allowed.test", 443, "/", Mode::Allow, Some(0)),
            ("GET", "allowed.test", 2222, "/", Mode::Allow, Some(1)),
            // `*` covers the web's ports too: 22 falls to the default.
            ("GET", "allowed.test", 22, "/", Mode::Block, None),
            ("GET", "mocked.test", 8443, "/", Mode::Block, None),
            ("GET", "other.test", 443, "/", Mode::Allow, Some(3)),
            ("GET", "other.test", 8080, "/", Mode::Block, None),
            ("GET", "closed.test", 443, "/", Mode::Block, Some(4)),
            ("GET", "closed.test", 22, "/", Mode::Block, Some(4)),
        ],
    );
    let tunnel = c.decide_host("allowed.test", 22);
    assert_eq!((tunnel.mode, tunnel.rule), (Mode::Block, None));
    // Under a default that lets everything through, a portless block still closes every port.
    let open = catalogue(Some(Mode::Allow), vec![rule("closed.test", Mode::Block)]);
    let ssh = open.decide_host("closed.test", 22);
    assert_eq!((ssh.mode, ssh.rule), (Mode::Block, Some(RuleId(0))));
    let any_block = catalogue(Some(Mode::Allow), vec![rule("*", Mode::Block)]);
    assert_eq!(any_block.decide_host("x.test", 5432).mode, Mode::Block);
    // An allowed address opens the guard on the web's ports only.
    let ip = catalogue(None, vec![rule("198.51.100.10", Mode::Allow)]);
    assert!(ip.names_ip("198.51.100.10".parse().unwrap(), 443));
    assert!(!ip.names_ip("198.51.100.10".parse().unwrap(), 6379));
}

#[test]
fn explain_says_a_rule_without_a_port_covers_80_and_443() {
    let c = catalogue(
        None,
        vec![
            rule("allowed.test", Mode::Allow),
            rule("2001:db8::1", Mode::Allow),
        ],
    );
    let e = c.explain("CONNECT", "allowed.test:22").unwrap();
    assert_eq!((e.mode, e.rule.as_str()), (Mode::Block, "default"));
    assert_eq!(e.missed.len(), 1, "{e:?}");
    assert_eq!(e.missed[0].lost_on, Miss::Port);
    assert!(
        e.missed[0].why.contains("covers 80 and 443 only")
            && e.missed[0].why.contains("allowed.test:22"),
        "{}",
        e.missed[0].why
    );
    let v6 = c.explain("CONNECT", "[2001:db8::1]:8443").unwrap();
    assert!(v6.missed[0].why.contains("[2001:db8::1]:8443"), "{v6:?}");
}

#[test]
fn paths_are_prefixes_on_segment_boundaries() {
    let c = catalogue(
        Some(Mode::Allow),
        vec![with_paths(rule("example.com", Mode::Block), &["/admin"])],
    );
    check(
        &c,
        &[
            ("GET", "example.com", 443, "/admin", Mode::Block, Some(0)),
            ("GET", "example.com", 443, "/admin/", Mode::Block, Some(0)),
            (
                "GET",
                "example.com",
                443,
                "/admin/users?x=1",
                Mode::Block,
                Some(0),
            ),
            (
                "GET",
                "example.com",
                443,
                "/administrator",
                Mode::Allow,
                None,
            ),
            ("GET", "example.com", 443, "/", Mode::Allow, None),
        ],
    );
}

#[test]
fn a_non_canonical_path_cannot_slip_past_a_path_rule() {
    let c = catalogue(
        Some(Mode::Allow),
        vec![with_paths(rule("example.com", Mode::Block), &["/admin"])],
    );
    for path in ["/public/../admin", "//admin", "/%61dmin", "/./admin"] {
        let decision = c.decide(&Target {
            method: "GET",
            host: "example.com",
            port: 443,
            path,
        });
        assert_eq!(
            (decision.mode, decision.reason),
            (Mode::Block, Reason::NonCanonicalPath),
            "{path}"
        );
    }
    // A host with no path rules is decided on its host alone, whatever the path.
    let decision = c.decide(&Target {
        method: "GET",
        host: "other.example",
        port: 443,
        path: "/a/../b",
    });
    assert_eq!(
        (decision.mode, decision.reason),
        (Mode::Allow, Reason::Default)
    );
}

#[test]
fn method_rules_add_weight_and_match_case_insensitively() {
    let c = catalogue(
        None,
        vec![
            rule("api.example.com", Mode::Allow),
            with_methods(rule("api.example.com", Mode::Capture), &["post"]),
        ],
    );
    check(
        &c,
        &[
            ("GET", "api.example.com", 443, "/v1", Mode::Allow, Some(0)),
            (
                "POST",
                "api.example.com",
                443,
                "/v1",
                Mode::Capture,
                Some(1),
            ),
            (
                "post",
                "api.example.com",
                443,
                "/v1",
                Mode::Capture,
                Some(1),
            ),
        ],
    );
}

#[test]
fn specificity_decides_not_order() {
    let c = catalogue(
        Some(Mode::Allow),
        vec![
            rule("*", Mode::Block),
            rule("*.example.com", Mode::Mock),
            rule("*.api.example.com", Mode::Capture),
            rule("eu.api.example.com", Mode::Allow),
            with_paths(rule("*.example.com", Mode::Synth), &["/v1"]),
            rule("203.0.113.7", Mode::Allow),
        ],
    );
    check(
        &c,
        &[
            ("GET", "unknown.test", 443, "/", Mode::Block, Some(0)),
            ("GET", "www.example.com", 443, "/", Mode::Mock, Some(1)),
            (
                "GET",
                "us.api.example.com",
                443,
                "/",
                Mode::Capture,
                Some(2),
            ),
            (
                "GET",
                "eu.api.example.com",
                443,
                "/v1",
                Mode::Allow,
                Some(3),
            ),
            ("GET", "www.example.com", 443, "/v1/x", Mode::Synth, Some(4)),
            // The longer wildcard suffix beats the shorter one even with a path.
            (
                "GET",
                "us.api.example.com",
                443,
                "/v1",
                Mode::Capture,
                Some(2),
            ),
            ("GET", "203.0.113.7", 443, "/", Mode::Allow, Some(5)),
            ("GET", "203.0.113.8", 443, "/", Mode::Block, Some(0)),
        ],
    );
}

#[test]
fn equally_specific_rules_go_to_the_first_written() {
    let c = catalogue(
        None,
        vec![
            rule("example.com", Mode::Mock),
            rule("example.com", Mode::Allow),
            rule("a.*.test", Mode::Capture),
            rule("*.b.test", Mode::Synth),
        ],
    );
    check(
        &c,
        &[
            ("GET", "example.com", 443, "/", Mode::Mock, Some(0)),
            // A bounded pattern beats an open one with as many literal labels.
            ("GET", "a.b.test", 443, "/", Mode::Capture, Some(2)),
        ],
    );
}

#[test]
fn ip_literal_rules_match_only_that_address() {
    let c = catalogue(
        None,
        vec![
            rule("198.51.100.10", Mode::Allow),
            rule("[2001:db8::1]:443", Mode::Allow),
            rule("*.example.com", Mode::Allow),
        ],
    );
    check(
        &c,
        &[
            ("GET", "198.51.100.10", 80, "/", Mode::Allow, Some(0)),
            ("GET", "198.51.100.11", 80, "/", Mode::Block, None),
            ("GET", "[2001:db8::1]", 443, "/", Mode::Allow, Some(1)),
            ("GET", "2001:db8::1", 443, "/", Mode::Allow, Some(1)),
            ("GET", "2001:db8::1", 80, "/", Mode::Block, None),
        ],
    );
    assert!(c.names_ip("198.51.100.10".parse().unwrap(), 80));
    assert!(!c.names_ip("198.51.100.11".parse().unwrap(), 80));
    // A rule with a port opens its address on that port only.
    assert!(c.names_ip("2001:db8::1".parse().unwrap(), 443));
    assert!(!c.names_ip("2001:db8::1".parse().unwrap(), 22));
}

#[test]
fn names_ip_counts_only_forwarding_rules() {
    let c = catalogue(None, vec![rule("198.51.100.10", Mode::Mock)]);
    assert!(!c.names_ip("198.51.100.10".parse().unwrap(), 80));
}

#[test]
fn missing_default_is_block_and_invalid_hosts_are_refused() {
    let c = catalogue(None, vec![]);
    check(&c, &[("GET", "example.com", 443, "/", Mode::Block, None)]);
    let c = catalogue(Some(Mode::Allow), vec![]);
    let long = "a".repeat(300);
    for host in ["", ".", long.as_str()] {
        let decision = c.decide(&Target {
            method: "GET",
            host,
            port: 443,
            path: "/",
        });
        assert_eq!(
            (decision.mode, decision.reason),
            (Mode::Block, Reason::InvalidHost)
        );
    }
}

#[test]
fn tls_is_opened_for_answering_modes_and_narrowing_rules() {
    let c = catalogue(
        Some(Mode::Allow),
        vec![
            rule("mail.test", Mode::Capture),
            with_paths(rule("api.test", Mode::Block), &["/admin"]),
            rule("plain.test", Mode::Allow),
            rule("closed.test", Mode::Block),
            with_paths(rule("*.closed.test", Mode::Allow), &["/ok"]),
            rule("x.closed.test", Mode::Block),
        ],
    );
    let open = |host: &str| c.decide_host(host, 443).open_tls;
    assert!(open("mail.test"));
    assert!(open("api.test"));
    assert!(!open("plain.test"));
    assert!(!open("closed.test"));
    // A wildcard path rule cannot outrank an exact host rule, so this host stays a tunnel.
    assert!(!open("x.closed.test"));
    assert!(open("y.closed.test"));
    // No rule takes api.test whole: the rule naming some of its requests is the one that
    // opens it, and the connection is that rule's, not the default's.
    let host_level = c.decide_host("api.test", 443);
    assert_eq!(
        (host_level.mode, host_level.rule, host_level.reason),
        (Mode::Block, Some(RuleId(1)), Reason::Narrowed)
    );
    // Where a rule takes the host whole, it decides the host, narrowed or not.
    let whole = c.decide_host("closed.test", 443);
    assert_eq!((whole.rule, whole.reason), (Some(RuleId(3)), Reason::Rule));
    // Each request inside is decided on its own: outside the paths, the default.
    let inside = |path| {
        c.decide(&Target {
            method: "GET",
            host: "api.test",
            port: 443,
            path,
        })
    };
    assert_eq!(
        (inside("/admin").mode, inside("/admin").rule),
        (Mode::Block, Some(RuleId(1)))
    );
    assert_eq!(
        (inside("/x").mode, inside("/x").reason),
        (Mode::Allow, Reason::Default)
    );
}

#[test]
fn bad_rules_are_reported_together_with_their_field() {
    let mut bad_rate = rule("example.com", Mode::Block);
    bad_rate.rate_limit = Some("10/s".into());
    let problems = Catalogue::compile(&EgressSpec {
        default: None,
        allow_ipv6: false,
        upstream_roots: Vec::new(),
        rules: vec![
            rule("exa*mple.com", Mode::Allow),
            with_paths(rule("ok.com", Mode::Allow), &["admin"]),
            with_methods(rule("ok.com", Mode::Allow), &["GET /"]),
            bad_rate,
        ],
    })
    .unwrap_err();
    let fields: Vec<_> = problems.iter().map(|p| (p.rule, p.field)).collect();
    assert_eq!(
        fields,
        [(0, "host"), (1, "paths"), (2, "methods"), (3, "rate_limit")]
    );
}

#[test]
fn sandbox_is_refused_for_hosts_whose_requests_are_signed() {
    for host in [
        "email.us-east-1.amazonaws.com",
        "*.amazonaws.com",
        "sqs.cn-north-1.amazonaws.com.cn:443",
    ] {
        let problems = Catalogue::compile(&EgressSpec {
            default: None,
            allow_ipv6: false,
            upstream_roots: Vec::new(),
            rules: vec![rule(host, Mode::Sandbox)],
        })
        .unwrap_err();
        assert_eq!((problems[0].rule, problems[0].field), (0, "mode"), "{host}");
        assert!(problems[0].message.contains("Signature V4"), "{host}");
        assert!(problems[0].message.contains("use capture"), "{host}");
    }
    // Positive controls: capture for SES, sandbox for a provider that takes a bearer key.
    Catalogue::compile(&EgressSpec {
        default: None,
        allow_ipv6: false,
        upstream_roots: Vec::new(),
        rules: vec![
            rule("email.us-east-1.amazonaws.com", Mode::Capture),
            rule("api.stripe.com", Mode::Sandbox),
            rule("notamazonaws.com", Mode::Sandbox),
        ],
    })
    .expect("compiles");
}

#[test]
fn explain_lists_every_match_and_why_the_winner_won() {
    let c = catalogue(
        None,
        vec![
            rule("*", Mode::Block),
            rule("*.example.com", Mode::Mock),
            rule("api.example.com", Mode::Allow),
        ],
    );
    let e = c
        .explain("GET", "https://API.example.com/v1/users?page=2")
        .unwrap();
    assert_eq!(
        (e.host.as_str(), e.port, e.path.as_str()),
        ("api.example.com", 443, "/v1/users")
    );
    assert_eq!(e.mode, Mode::Allow);
    assert_eq!(e.rule, "rules[2] api.example.com");
    let order: Vec<_> = e.matched.iter().map(|m| (m.index, m.winner)).collect();
    assert_eq!(order, [(2, true), (1, false), (0, false)]);
    assert!(e.why.contains("rules[2] is more specific"), "{}", e.why);
    assert!(c.explain("GET", "not a url").is_err());
}

#[test]
fn explain_names_the_rules_that_named_the_host_and_what_each_lost_on() {
    let mut charges = rule("api.stripe.com", Mode::Allow);
    charges.paths = vec!["/v1/charges".to_owned()];
    let mut posts = rule("api.stripe.com", Mode::Allow);
    posts.methods = vec!["POST".to_owned()];
    let c = catalogue(
        None,
        vec![
            charges,
            posts,
            rule("api.stripe.com:8443", Mode::Allow),
            rule("other.test", Mode::Allow),
        ],
    );
    let e = c
        .explain("GET", "https://api.stripe.com/v1/refunds")
        .unwrap();
    assert_eq!((e.mode, e.rule.as_str()), (Mode::Block, "default"));
    assert!(e.matched.is_empty());
    let missed: Vec<_> = e.missed.iter().map(|m| (m.index, m.lost_on)).collect();
    assert_eq!(
        missed,
        [(0, Miss::Path), (1, Miss::Method), (2, Miss::Port)]
    );
    assert!(
        e.missed[0]
            .why
            .contains("/v1/refunds is not under any of its paths (/v1/charges)")
    );
    assert!(
        e.missed[1]
            .why
            .contains("GET is not one of its methods (POST)")
    );
    assert!(e.missed[2].why.contains("the request goes to 443"));
    assert!(
        e.why
            .starts_with("rules[0], rules[1] and rules[2] named the host"),
        "{}",
        e.why
    );
    // The control: the path the rule names wins, and nothing is missed on the path.
    let e = c
        .explain("GET", "https://api.stripe.com/v1/charges/ch_1")
        .unwrap();
    assert_eq!(e.rule, "rules[0] api.stripe.com");
    assert!(e.missed.iter().all(|m| m.lost_on != Miss::Path));
}

#[test]
fn explain_reads_a_connect_authority_and_decides_it_on_the_host_alone() {
    let mut charges = rule("api.stripe.com", Mode::Allow);
    charges.paths = vec!["/v1/charges".to_owned()];
    let c = catalogue(
        None,
        vec![
            charges,
            rule("*.stripe.com", Mode::Mock),
            rule("*", Mode::Block),
        ],
    );
    let e = c.explain("CONNECT", "api.stripe.com:443").unwrap();
    assert_eq!(
        (e.host.as_str(), e.port, e.path.as_str()),
        ("api.stripe.com", 443, "")
    );
    assert_eq!(e.mode, Mode::Mock);
    assert!(e.open_tls);
    let missed: Vec<_> = e.missed.iter().map(|m| (m.index, m.lost_on)).collect();
    assert_eq!(missed, [(0, Miss::PerRequest)]);
    assert_eq!(c.explain("connect", "API.stripe.com").unwrap().port, 443);
    assert_eq!(c.explain("CONNECT", "[::1]:8443").unwrap().port, 8443);
    for bad in [
        "api.stripe.com:443/v1",
        "user@api.stripe.com:443",
        "",
        "api.stripe.com:99999",
    ] {
        assert!(
            matches!(c.explain("CONNECT", bad), Err(UrlError::NotAuthority(_))),
            "{bad}"
        );
    }
}

#[test]
fn rules_in_order_lists_the_most_specific_first() {
    let c = catalogue(
        None,
        vec![
            rule("*", Mode::Block),
            rule("*.example.com", Mode::Mock),
            rule("api.example.com", Mode::Allow),
        ],
    );
    let order: Vec<_> = c.rules_in_order().iter().map(|(id, _, _)| id.0).collect();
    assert_eq!(order, [2, 1, 0]);
}

#[test]
fn a_full_width_address_is_the_address_it_spells() {
    let c = catalogue(None, vec![rule("127.0.0.1", Mode::Allow)]);
    check(
        &c,
        &[("GET", "１２７.０.０.１", 80, "/", Mode::Allow, Some(0))],
    );
}

#[test]
fn an_ipv4_mapped_literal_is_decided_as_the_address_it_maps() {
    let c = catalogue(
        Some(Mode::Allow),
        vec![
            rule("203.0.113.7", Mode::Block),
            rule("[::ffff:198.51.100.9]", Mode::Mock),
        ],
    );
    check(
        &c,
        &[
            (
                "GET",
                "[::ffff:203.0.113.7]",
                443,
                "/",
                Mode::Block,
                Some(0),
            ),
            ("GET", "::ffff:cb00:7107", 443, "/", Mode::Block, Some(0)),
            ("GET", "198.51.100.9", 443, "/", Mode::Mock, Some(1)),
        ],
    );
}

#[test]
fn path_parameters_and_backslashes_cannot_slip_past_a_path_rule() {
    let c = catalogue(
        None,
        vec![with_paths(rule("example.com", Mode::Allow), &["/public"])],
    );
    for path in [
        "/public/..;/admin",
        "/public;x/../admin",
        "/public/..\\admin",
    ] {
        let decision = c.decide(&Target {
            method: "GET",
            host: "example.com",
            port: 443,
            path,
        });
        assert_eq!(
            (decision.mode, decision.reason),
            (Mode::Block, Reason::NonCanonicalPath),
            "{path}"
        );
    }
}
