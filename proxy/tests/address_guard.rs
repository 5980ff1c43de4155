//! The address guard over real sockets: every refused class, by name (through the test
//! resolver) and as an IP literal, is refused with AF-NET-011 before any connect, while an
//! allowed, dialable host through the same sidecar still works (so "refused" cannot mean
//! "never governed").
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::net::{IpAddr, SocketAddr};

use af_fixtures::upstream::{Replies, Reply, Upstream};
use common::*;

/// (name, address, the guard's class in the journal).
const TABLE: &[(&str, &str, &str)] = &[
    ("loopback.refused.test", "127.0.0.1", "loopback"),
    ("ten.refused.test", "10.0.0.1", "private"),
    ("one72.refused.test", "172.16.0.1", "private"),
    ("one92.refused.test", "192.168.1.1", "private"),
    ("metadata.refused.test", "169.254.169.254", "link_local"),
    ("cgnat.refused.test", "100.64.0.1", "shared_cgnat"),
    ("zero.refused.test", "0.0.0.0", "unspecified"),
    ("multicast.refused.test", "224.0.0.1", "multicast"),
    ("broadcast.refused.test", "255.255.255.255", "broadcast"),
    ("v6loopback.refused.test", "::1", "loopback"),
    ("v6linklocal.refused.test", "fe80::1", "link_local"),
    ("v6ula.refused.test", "fc00::1", "unique_local"),
    ("mapped.refused.test", "::ffff:127.0.0.1", "loopback"),
    (
        "sixtofour.refused.test",
        "2002:7f00:1::",
        "embeds_refused_ipv4",
    ),
    (
        "teredo.refused.test",
        "2001:0:4136:e378:8000:63bf:80ff:fffe",
        "embeds_refused_ipv4",
    ),
    (
        "nat64.refused.test",
        "64:ff9b::a00:1",
        "embeds_refused_ipv4",
    ),
];

/// Every host, on the web's ports and on the upstream's: only the guard refuses.
const EVERY_HOST: &[(&str, &str)] = &[("*", "allow"), ("*:{port}", "allow")];

fn ip(s: &str) -> IpAddr {
    s.parse().unwrap()
}

fn url_host(addr: &str) -> String {
    if addr.contains(':') {
        format!("[{addr}]")
    } else {
        addr.to_owned()
    }
}

async fn assert_allowed_control_works(sc: &Sidecar, up: &Upstream) {
    let before = sc.admin().metric("af_proxy_upstream_dials_total").await;
    let got = proxy_get(
        sc.proxy(),
        &format!("http://api.allowed.test:{}/control", up.addr().port()),
    )
    .await;
    assert_eq!(got.status, 200, "positive control failed: {}", got.body);
    let after = sc.admin().metric("af_proxy_upstream_dials_total").await;
    // The first control dials; later ones may reuse the pooled connection.
    assert!(
        after > before || before > 0,
        "the positive control must have dialled"
    );
}

#[tokio::test]
async fn every_refused_address_class_behind_a_name_is_refused_with_net_011_before_any_connect() {
    let up = hello_upstream().await;
    let mut table: Vec<(&str, Vec<IpAddr>)> =
        TABLE.iter().map(|(n, a, _)| (*n, vec![ip(a)])).collect();
    table.push(("api.allowed.test", vec![upstream_ip()]));
    let dns = resolver(table).await;
    // Every host is allowed by the catalogue on the upstream's port: only the guard stands in
    // the way.
    let port = up.addr().port();
    let sc = Sidecar::start(&Setup::new(
        &egress_on(port, &[("*:{port}", "allow")]),
        dns.addr,
    ))
    .await;
    assert_allowed_control_works(&sc, &up).await;

    let dials = sc.admin().metric("af_proxy_upstream_dials_total").await;
    for (name, addr, class) in TABLE {
        let got = proxy_get(sc.proxy(), &format!("http://{name}:{port}/")).await;
        assert_eq!(got.status, 403, "{name} ({addr}): {}", got.body);
        assert_eq!(got.header("x-af-code"), Some("AF-NET-011"), "{name}");
        assert!(
            got.body.contains(addr.split("::").next().unwrap_or(addr)) || got.body.contains(name),
            "{}",
            got.body
        );
        let recs = sc.admin().wait_records(&format!("host={name}"), 1).await;
        assert_eq!(
            recs[0]["reason"],
            format!("guard:{class}"),
            "{name} ({addr})"
        );
        assert_eq!(recs[0]["allowed"], false);
        assert_eq!(
            recs[0]["mode"], "allow",
            "the catalogue allowed it; the guard refused"
        );
    }
    // Same refusals through CONNECT.
    let (head, _s) = connect_tunnel(sc.proxy(), &format!("metadata.refused.test:{port}")).await;
    assert!(head.starts_with("HTTP/1.1 403"), "{head}");
    assert!(head.to_ascii_lowercase().contains("af-net-011"), "{head}");
    assert_eq!(
        sc.admin().metric("af_proxy_upstream_dials_total").await,
        dials,
        "a refused destination was dialled"
    );
    assert_allowed_control_works(&sc, &up).await;
}

#[tokio::test]
async fn every_refused_address_class_as_an_ip_literal_is_refused_before_any_connect() {
    let up = hello_upstream().await;
    let dns = resolver(vec![("api.allowed.test", vec![upstream_ip()])]).await;
    let port = up.addr().port();
    // Every host on the web's ports and the upstream's.
    let sc = Sidecar::start(&Setup::new(&egress_on(port, EVERY_HOST), dns.addr)).await;
    assert_allowed_control_works(&sc, &up).await;
    let dials = sc.admin().metric("af_proxy_upstream_dials_total").await;
    for (_, addr, class) in TABLE {
        let got = proxy_get(sc.proxy(), &format!("http://{}:{port}/", url_host(addr))).await;
        assert_eq!(got.status, 403, "{addr}: {}", got.body);
        assert_eq!(got.header("x-af-code"), Some("AF-NET-011"), "{addr}");
        let recs = sc.admin().wait_records(&format!("host={addr}"), 1).await;
        assert_eq!(recs[0]["reason"], format!("guard:{class}"), "{addr}");
    }
    let refused = sc.admin().wait_records("blocked=true", TABLE.len()).await;
    assert!(
        refused.iter().all(|r| r["code"] == "AF-NET-011"),
        "{refused:#?}"
    );
    let (head, _s) = connect_tunnel(sc.proxy(), "[fe80::1]:443").await;
    assert!(head.starts_with("HTTP/1.1 403"), "{head}");
    assert_eq!(
        sc.admin().metric("af_proxy_upstream_dials_total").await,
        dials,
        "the guard connected to a refused literal"
    );
    assert_allowed_control_works(&sc, &up).await;
}

#[tokio::test]
async fn a_rule_naming_the_exact_ip_lets_only_that_literal_through() {
    // 127.0.0.3 is not trusted: only the rule naming it opens it, and only as a literal.
    let named = Upstream::http(
        SocketAddr::from(([127, 0, 0, 3], 0)),
        Replies::new(Reply::ok("named")),
    )
    .await
    .unwrap();
    let up = hello_upstream().await;
    let dns = resolver(vec![
        ("api.allowed.test", vec![upstream_ip()]),
        ("resolves-to-named.test", vec![ip("127.0.0.3")]),
    ])
    .await;
    let port = named.addr().port();
    let (named_ip, control, by_name) = (
        format!("127.0.0.3:{port}"),
        format!("api.allowed.test:{}", up.addr().port()),
        format!("resolves-to-named.test:{port}"),
    );
    let rules = [
        (named_ip.as_str(), "allow"),
        (control.as_str(), "allow"),
        (by_name.as_str(), "allow"),
    ];
    let sc = Sidecar::start(&Setup::new(&egress(&rules), dns.addr)).await;
    let got = proxy_get(sc.proxy(), &format!("http://127.0.0.3:{port}/")).await;
    assert_eq!(got.status, 200, "{}", got.body);
    assert_eq!(got.body, "named");
    let got = proxy_get(
        sc.proxy(),
        &format!("http://resolves-to-named.test:{port}/"),
    )
    .await;
    assert_eq!(
        got.status, 403,
        "a name resolving to a named IP is still refused"
    );
    assert_eq!(got.header("x-af-code"), Some("AF-NET-011"));
    assert_allowed_control_works(&sc, &up).await;
}

#[tokio::test]
async fn with_no_trusted_networks_loopback_upstreams_are_refused_too() {
    let up = hello_upstream().await;
    let dns = resolver(vec![("api.allowed.test", vec![upstream_ip()])]).await;
    let port = up.addr().port();
    let rules = [
        ("api.allowed.test:{port}", "allow"),
        ("127.0.0.2:{port}", "allow"),
    ];
    let mut setup = Setup::new(&egress_on(port, &rules), dns.addr);
    setup.trusted.clear();
    let sc = Sidecar::start(&setup).await;
    let got = proxy_get(sc.proxy(), &format!("http://api.allowed.test:{port}/")).await;
    assert_eq!(got.status, 403);
    assert_eq!(got.header("x-af-code"), Some("AF-NET-011"));
    // Positive control: the literal named by a rule is dialled through the same sidecar.
    let got = proxy_get(sc.proxy(), &format!("http://127.0.0.2:{port}/")).await;
    assert_eq!(got.status, 200, "{}", got.body);
}

#[tokio::test]
async fn ipv6_is_refused_unless_the_catalogue_allows_it() {
    let up = hello_upstream().await;
    let dns = resolver(vec![
        ("api.allowed.test", vec![upstream_ip()]),
        ("v6.public.test", vec![ip("2606:4700::1111")]),
    ])
    .await;
    let egress = "  default: allow\n  rules: []\n";
    let sc = Sidecar::start(&Setup::new(egress, dns.addr)).await;
    let got = proxy_get(sc.proxy(), "http://v6.public.test/").await;
    assert_eq!(got.status, 403);
    assert_eq!(got.header("x-af-code"), Some("AF-NET-011"));
    let recs = sc.admin().wait_records("host=v6.public.test", 1).await;
    assert_eq!(recs[0]["reason"], "guard:ipv6_not_allowed");
    assert_allowed_control_works(&sc, &up).await;
}

#[tokio::test]
async fn a_name_resolving_to_the_sidecar_itself_is_refused_and_never_loops() {
    let dns = resolver(vec![
        ("api.allowed.test", vec![upstream_ip()]),
        ("loop.allowed.test", vec!["198.51.100.2".parse().unwrap()]),
    ])
    .await;
    let up = hello_upstream().await;
    let mut setup = Setup::new(&egress_on(up.addr().port(), EVERY_HOST), dns.addr);
    // The sidecar's own inside address, as its DNS would answer; the inside subnet would
    // otherwise let it through.
    setup.dns = format!(
        "    listen: \"127.0.0.1:0\"\n    answer_v4: \"198.51.100.2\"\n    inside_resolver: \"{}\"",
        dns.addr
    );
    setup.extra = "inside:\n  subnets: [\"198.51.100.0/24\"]\n".into();
    let sc = Sidecar::start(&setup).await;
    assert_allowed_control_works(&sc, &up).await;
    let got = proxy_get(sc.proxy(), "http://loop.allowed.test/").await;
    assert_eq!(got.status, 403, "{}", got.body);
    assert_eq!(got.header("x-af-code"), Some("AF-NET-011"));
    let recs = sc.admin().wait_records("host=loop.allowed.test", 1).await;
    assert_eq!(recs[0]["reason"], "guard:sidecar");
    let (head, _s) = connect_tunnel(sc.proxy(), "198.51.100.2:443").await;
    assert!(head.starts_with("HTTP/1.1 403"), "{head}");
}

#[tokio::test]
async fn a_sidecar_listening_on_an_upstream_address_still_reaches_that_upstream() {
    // The upstream and the sidecar's listeners share 127.0.0.1 here, as in the benchmark: only
    // the sidecar's DNS answer address is its own, not every address a listener is bound to.
    let up = Upstream::http(
        "127.0.0.1:0".parse().unwrap(),
        Replies::new(Reply::ok("hello")),
    )
    .await
    .unwrap();
    let dns = resolver(vec![(
        "api.allowed.test",
        vec!["127.0.0.1".parse().unwrap()],
    )])
    .await;
    let port = up.addr().port();
    let mut setup = Setup::new(&egress_on(port, &[("*:{port}", "allow")]), dns.addr);
    setup.trusted = vec!["127.0.0.1/32".into()];
    let sc = Sidecar::start(&setup).await;
    let got = proxy_get(sc.proxy(), &format!("http://api.allowed.test:{port}/")).await;
    assert_eq!(got.status, 200, "{}", got.body);
}
