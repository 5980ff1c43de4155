//! The explicit proxy listener: absolute-form requests and CONNECT, decided and journaled.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use af_fixtures::upstream::{Replies, Reply};
use common::*;
use http_body_util::Empty;
use hyper::Request;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// The allowed host on the upstream's port; the block covers every port; mock answers on the
/// web's ports, where the tests ask it.
const RULES: &[(&str, &str)] = &[
    ("api.allowed.test:{port}", "allow"),
    ("api.blocked.test", "block"),
    ("mock.allowed.test", "mock"),
];

async fn setup(
    replies: Replies,
) -> (
    af_fixtures::test_resolver::TestResolver,
    af_fixtures::upstream::Upstream,
    Sidecar,
) {
    setup_with(replies, &[]).await
}

/// [`setup`] with `more` rules after [`RULES`].
async fn setup_with(
    replies: Replies,
    more: &[(&str, &str)],
) -> (
    af_fixtures::test_resolver::TestResolver,
    af_fixtures::upstream::Upstream,
    Sidecar,
) {
    let up = http_upstream(replies).await;
    let names = [
        "api.allowed.test",
        "api.blocked.test",
        "mock.allowed.test",
        "other.test",
    ];
    let dns = resolver(names.iter().map(|n| (*n, vec![upstream_ip()])).collect()).await;
    let rules = [RULES, more].concat();
    let sidecar = Sidecar::start(&Setup::new(&egress_on(up.addr().port(), &rules), dns.addr)).await;
    (dns, up, sidecar)
}

#[tokio::test]
async fn allowed_request_is_forwarded_with_hop_by_hop_headers_stripped_and_journaled() {
    let (_dns, up, sc) = setup(Replies::new(
        Reply::ok("hello").header("x-from", "upstream"),
    ))
    .await;
    let port = up.addr().port();
    let url = format!("http://api.allowed.test:{port}/v1/items?q=1");
    let mut c = connect(sc.proxy()).await;
    let req = Request::get(&url)
        .header("host", format!("api.allowed.test:{port}"))
        .header("proxy-authorization", "Basic c2VjcmV0")
        .header("proxy-connection", "keep-alive")
        .header("connection", "x-drop-me")
        .header("x-drop-me", "1")
        .header("x-keep", "yes")
        .body(Empty::new())
        .unwrap();
    let got = send(&mut c, req).await;
    assert_eq!(got.status, 200, "{}", got.body);
    assert_eq!(got.body, "hello");
    assert_eq!(got.header("x-from"), Some("upstream"));

    let seen = up.seen();
    assert_eq!(seen.len(), 1);
    let s = &seen[0];
    assert_eq!(s.method, "GET");
    assert_eq!(s.path, "/v1/items?q=1");
    assert_eq!(
        s.host.as_deref(),
        Some(format!("api.allowed.test:{port}").as_str())
    );
    assert_eq!(s.header("x-keep"), Some("yes"));
    assert_eq!(s.header("via"), Some("1.1 af-proxy"));
    for gone in ["proxy-authorization", "proxy-connection", "x-drop-me"] {
        assert!(s.header(gone).is_none(), "{gone} reached the upstream");
    }

    let recs = sc.admin().wait_records("host=api.allowed.test", 1).await;
    let r = &recs[0];
    assert_eq!(r["kind"], "decision");
    assert_eq!(r["env"], "test-env");
    assert_eq!(r["via"], "proxy");
    assert_eq!(r["method"], "GET");
    assert_eq!(r["host"], "api.allowed.test");
    assert_eq!(r["port"], port);
    assert_eq!(r["path"], "/v1/items?q=1");
    assert_eq!(r["mode"], "allow");
    assert_eq!(r["rule"], format!("rules[0] api.allowed.test:{port}"));
    assert_eq!(r["allowed"], true);
    assert_eq!(r["outcome"], "forwarded");
    assert_eq!(r["status"], 200);
    assert_eq!(r["bytes_down"], 5);
    assert!(r["at"].as_str().unwrap().ends_with('Z'));
    assert!(r["seq"].as_u64().unwrap() >= 1);
}

#[tokio::test]
async fn blocked_request_gets_403_naming_the_rule_and_is_journaled() {
    let (_dns, up, sc) = setup(Replies::new(Reply::ok("hello"))).await;
    let got = proxy_get(sc.proxy(), "http://api.blocked.test/secret").await;
    assert_eq!(got.status, 403);
    assert_eq!(got.header("x-af-decision"), Some("block"));
    assert_eq!(got.header("x-af-rule"), Some("rules[1] api.blocked.test"));
    assert_eq!(got.header("x-af-code"), Some("AF-NET-010"));
    assert!(got.body.starts_with("AF-NET-010 "), "{}", got.body);
    assert!(
        got.body.contains("rules[1] api.blocked.test"),
        "{}",
        got.body
    );
    assert!(
        got.body
            .contains("af net explain GET http://api.blocked.test/secret"),
        "{}",
        got.body
    );

    // No rule: the default decides, and says so.
    let got = proxy_get(sc.proxy(), "http://other.test/").await;
    assert_eq!(got.status, 403);
    assert_eq!(got.header("x-af-rule"), Some("default"));
    assert!(
        up.seen().is_empty(),
        "a blocked request reached the upstream"
    );

    let recs = sc.admin().wait_records("blocked=true", 2).await;
    assert_eq!(recs[0]["host"], "api.blocked.test");
    assert_eq!(recs[0]["allowed"], false);
    assert_eq!(recs[0]["status"], 403);
    assert_eq!(recs[0]["mode"], "block");
    assert_eq!(recs[0]["reason"], "rule");
    assert_eq!(recs[0]["code"], "AF-NET-010");
    assert_eq!(recs[1]["rule"], "default");
    assert_eq!(recs[1]["reason"], "default");
}

#[tokio::test]
async fn a_credential_in_the_query_is_forwarded_as_sent_but_never_recorded() {
    let (_dns, up, sc) = setup(Replies::new(Reply::ok("hello"))).await;
    let url = format!(
        "http://api.allowed.test:{}/maps?q=cafe&key=AIzaServicesOwnKey1234",
        up.addr().port()
    );
    assert_eq!(proxy_get(sc.proxy(), &url).await.status, 200);
    // Allow forwards the request untouched: the key is the service's business.
    assert_eq!(up.seen()[0].path, "/maps?q=cafe&key=AIzaServicesOwnKey1234");
    let refused = proxy_get(
        sc.proxy(),
        "http://api.blocked.test/x?access_token=tok123456",
    )
    .await;
    assert_eq!(refused.status, 403);
    assert!(!refused.body.contains("tok123456"), "{}", refused.body);
    let recs = sc.admin().wait_records("", 2).await;
    assert_eq!(recs[0]["path"], "/maps?q=cafe&key=[redacted]", "{recs:#?}");
    assert_eq!(recs[1]["path"], "/x?access_token=[redacted]", "{recs:#?}");
    let all = serde_json::to_string(&recs).unwrap();
    assert!(
        !all.contains("AIzaServicesOwnKey1234") && !all.contains("tok123456"),
        "{all}"
    );
}

#[tokio::test]
async fn redirects_are_passed_back_not_followed() {
    let replies = Replies::new(Reply::ok("final"))
        .route("/old", Reply::redirect("http://api.blocked.test/new"));
    let (_dns, up, sc) = setup(replies).await;
    let url = format!("http://api.allowed.test:{}/old", up.addr().port());
    let got = proxy_get(sc.proxy(), &url).await;
    assert_eq!(got.status, 302);
    assert_eq!(got.header("location"), Some("http://api.blocked.test/new"));
    assert_eq!(up.seen().len(), 1);
}

#[tokio::test]
async fn origin_form_request_on_the_proxy_port_gets_400_saying_this_is_a_proxy() {
    let (_dns, _up, sc) = setup(Replies::new(Reply::ok("x"))).await;
    let mut c = connect(sc.proxy()).await;
    let req = Request::get("/index.html")
        .header("host", "api.allowed.test")
        .body(Empty::new())
        .unwrap();
    let got = send(&mut c, req).await;
    assert_eq!(got.status, 400);
    assert_eq!(got.header("x-af-code"), Some("AF-NET-016"));
    assert!(got.body.contains("forward proxy"), "{}", got.body);
    let recs = sc.admin().wait_records("blocked=true", 1).await;
    assert_eq!(recs[0]["reason"], "not_proxy_request");
    assert_eq!(recs[0]["code"], "AF-NET-016");
}

#[tokio::test]
async fn without_an_environment_ca_a_tunnel_that_needs_interception_is_refused_not_allowed() {
    let (_dns, up, sc) = setup(Replies::new(Reply::ok("x"))).await;
    // Plain HTTP needs no interception: the sidecar answers it itself (no pack: a 404 miss).
    let got = proxy_get(sc.proxy(), "http://mock.allowed.test/").await;
    assert_eq!(got.status, 404);
    assert_eq!(got.header("x-af-decision"), Some("mock"));
    let (head, _s) = connect_tunnel(sc.proxy(), "mock.allowed.test:443").await;
    assert!(head.starts_with("HTTP/1.1 403"), "{head}");
    assert!(
        head.to_ascii_lowercase().contains("x-af-code: af-net-012"),
        "{head}"
    );
    assert!(up.seen().is_empty());
    let recs = sc.admin().wait_records("host=mock.allowed.test", 2).await;
    assert_eq!(recs[0]["status"], 404);
    assert_eq!(recs[1]["reason"], "mode_unserved");
    assert!(
        recs.iter()
            .all(|r| r["mode"] == "mock" && r["allowed"] == false)
    );
}

#[tokio::test]
async fn connect_to_an_allowed_host_tunnels_bytes_and_is_journaled() {
    let (_dns, up, sc) = setup(Replies::new(Reply::ok("through the tunnel"))).await;
    let authority = format!("api.allowed.test:{}", up.addr().port());
    let (head, mut s) = connect_tunnel(sc.proxy(), &authority).await;
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    s.write_all(
        format!("GET /t HTTP/1.1\r\nHost: {authority}\r\nConnection: close\r\n\r\n").as_bytes(),
    )
    .await
    .unwrap();
    let mut out = String::new();
    tokio::time::timeout(Duration::from_secs(5), s.read_to_string(&mut out))
        .await
        .unwrap()
        .unwrap();
    assert!(out.starts_with("HTTP/1.1 200"), "{out}");
    assert!(out.ends_with("through the tunnel"), "{out}");
    drop(s);
    let recs = sc.admin().wait_records("host=api.allowed.test", 1).await;
    let r = &recs[0];
    assert_eq!(r["method"], "CONNECT");
    assert_eq!(r["allowed"], true);
    // 200 means only that the tunnel was established: what went on inside is not known.
    assert_eq!(r["outcome"], "tunnel");
    assert_eq!(r["status"], 200);
    assert!(r["bytes_up"].as_u64().unwrap() > 0);
    assert!(r["bytes_down"].as_u64().unwrap() > 0);
    assert_eq!(up.seen()[0].path, "/t");
}

#[tokio::test]
async fn connect_to_a_blocked_host_gets_the_same_403() {
    let (_dns, _up, sc) = setup(Replies::new(Reply::ok("x"))).await;
    let (head, _s) = connect_tunnel(sc.proxy(), "api.blocked.test:443").await;
    assert!(head.starts_with("HTTP/1.1 403"), "{head}");
    let lower = head.to_ascii_lowercase();
    assert!(lower.contains("x-af-decision: block"), "{head}");
    assert!(
        lower.contains("x-af-rule: rules[1] api.blocked.test"),
        "{head}"
    );
    let recs = sc.admin().wait_records("blocked=true", 1).await;
    assert_eq!(recs[0]["method"], "CONNECT");
    assert_eq!(recs[0]["port"], 443);
    assert_eq!(recs[0]["code"], "AF-NET-010");
    assert_eq!(recs[0]["outcome"], "refused");
}

#[tokio::test]
async fn a_request_that_already_passed_through_the_sidecar_is_refused_as_a_loop() {
    let (_dns, up, sc) = setup(Replies::new(Reply::ok("x"))).await;
    let url = format!("http://api.allowed.test:{}/", up.addr().port());
    let mut c = connect(sc.proxy()).await;
    let req = Request::get(&url)
        .header("host", "api.allowed.test")
        .header("via", "1.1 af-proxy")
        .body(Empty::new())
        .unwrap();
    let got = send(&mut c, req).await;
    assert_eq!(got.status, 508);
    assert!(up.seen().is_empty());
    // Positive control on the same sidecar.
    assert_eq!(proxy_get(sc.proxy(), &url).await.status, 200);
}

#[tokio::test]
async fn an_allowed_upstream_that_is_down_or_unknown_gets_502_net_013_and_is_journaled() {
    let dead_port = closed_upstream_port();
    let dead = format!("api.allowed.test:{dead_port}");
    let (_dns, up, sc) = setup_with(Replies::new(Reply::ok("x")), &[(&dead, "allow")]).await;
    let got = proxy_get(sc.proxy(), &format!("http://api.allowed.test:{dead_port}/")).await;
    assert_eq!(got.status, 502, "{}", got.body);
    assert_eq!(got.header("x-af-code"), Some("AF-NET-013"));
    assert_eq!(got.header("x-af-decision"), Some("allow"));
    let recs = sc.admin().wait_records("host=api.allowed.test", 1).await;
    assert_eq!(recs[0]["reason"], "connect");
    assert_eq!(recs[0]["allowed"], true);
    assert_eq!(recs[0]["code"], "AF-NET-013");
    // Positive control.
    let got = proxy_get(
        sc.proxy(),
        &format!("http://api.allowed.test:{}/", up.addr().port()),
    )
    .await;
    assert_eq!(got.status, 200);
}

#[tokio::test]
async fn an_allowed_name_that_does_not_resolve_gets_502_with_the_reason() {
    let dns = resolver(vec![]).await;
    let sc = Sidecar::start(&Setup::new(
        &egress(&[("nowhere.allowed.test", "allow")]),
        dns.addr,
    ))
    .await;
    let got = proxy_get(sc.proxy(), "http://nowhere.allowed.test/").await;
    assert_eq!(got.status, 502, "{}", got.body);
    assert_eq!(got.header("x-af-code"), Some("AF-NET-013"));
    let recs = sc
        .admin()
        .wait_records("host=nowhere.allowed.test", 1)
        .await;
    assert_eq!(recs[0]["reason"], "resolve");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn many_concurrent_keep_alive_clients_are_each_forwarded_and_journaled_once() {
    let (_dns, up, sc) = setup(Replies::new(Reply::ok("hello"))).await;
    let url = format!("http://api.allowed.test:{}/n", up.addr().port());
    let proxy = sc.proxy();
    let mut tasks = Vec::new();
    for _ in 0..20 {
        let url = url.clone();
        tasks.push(tokio::spawn(async move {
            let mut c = connect(proxy).await;
            let mut ok = 0;
            for _ in 0..25 {
                let req = Request::get(&url)
                    .header("host", "api.allowed.test")
                    .body(Empty::new())
                    .unwrap();
                if send(&mut c, req).await.status == 200 {
                    ok += 1;
                }
            }
            ok
        }));
    }
    let mut ok = 0;
    for t in tasks {
        ok += t.await.unwrap();
    }
    assert_eq!(ok, 500);
    assert_eq!(up.seen().len(), 500);
    let recs = sc.admin().wait_records("host=api.allowed.test", 500).await;
    assert_eq!(recs.len(), 500);
    assert_eq!(
        sc.admin()
            .metric("af_proxy_journal_queue_drops_total")
            .await,
        0
    );
}

#[tokio::test]
async fn a_webhook_urls_secret_path_is_forwarded_as_sent_but_never_recorded_or_echoed() {
    let up = hello_upstream().await;
    let names = ["hooks.slack.com", "discord.com"];
    let dns = resolver(names.iter().map(|n| (*n, vec![upstream_ip()])).collect()).await;
    let port = up.addr().port();
    let rules = [
        ("hooks.slack.com:{port}", "allow"),
        ("discord.com", "block"),
    ];
    let sc = Sidecar::start(&Setup::new(&egress_on(port, &rules), dns.addr)).await;
    let hook = "/services/T0001/B0002/SlackHookSecret42";
    let url = format!("http://hooks.slack.com:{port}{hook}");
    assert_eq!(proxy_get(sc.proxy(), &url).await.status, 200);
    assert_eq!(up.seen()[0].path, hook);
    let refused = proxy_get(
        sc.proxy(),
        "http://discord.com/api/webhooks/123/DiscordTokenSecret42",
    )
    .await;
    assert_eq!(refused.status, 403);
    assert!(
        !refused.body.contains("DiscordTokenSecret42"),
        "{}",
        refused.body
    );
    let recs = sc.admin().wait_records("", 2).await;
    assert_eq!(
        recs[0]["path"], "/services/T0001/B0002/[redacted]",
        "{recs:#?}"
    );
    assert_eq!(recs[1]["path"], "/api/webhooks/123/[redacted]", "{recs:#?}");
    let all = serde_json::to_string(&recs).unwrap();
    assert!(!all.contains("Secret42"), "{all}");
}

/// A raw TCP upstream on [`UPSTREAM_IP`] that counts the connections it accepts and echoes
/// what each sends. Returns its port and the count.
async fn counting_echo_upstream() -> (u16, Arc<AtomicUsize>) {
    let listener = tokio::net::TcpListener::bind((upstream_ip(), 0))
        .await
        .unwrap();
    let port = listener.local_addr().unwrap().port();
    let accepted = Arc::new(AtomicUsize::new(0));
    let count = accepted.clone();
    tokio::spawn(async move {
        while let Ok((mut s, _)) = listener.accept().await {
            count.fetch_add(1, Ordering::SeqCst);
            tokio::spawn(async move {
                let (mut r, mut w) = s.split();
                let _ = tokio::io::copy(&mut r, &mut w).await;
            });
        }
    });
    (port, accepted)
}

#[tokio::test]
async fn a_rule_naming_no_port_opens_no_tunnel_to_another_port_but_one_naming_the_port_does() {
    // Both upstreams live, on ports other than the web's: only the port a rule names opens.
    let (closed, closed_accepts) = counting_echo_upstream().await;
    let (named, named_accepts) = counting_echo_upstream().await;
    let dns = resolver(vec![("allowed.test", vec![upstream_ip()])]).await;
    let named_rule = format!("allowed.test:{named}");
    let rules = [("allowed.test", "allow"), (named_rule.as_str(), "allow")];
    let sc = Sidecar::start(&Setup::new(&egress(&rules), dns.addr)).await;
    let dials = sc.admin().metric("af_proxy_upstream_dials_total").await;

    // `allowed.test` covers 80 and 443 only: the default decides, and blocks.
    let (head, _s) = connect_tunnel(sc.proxy(), &format!("allowed.test:{closed}")).await;
    assert!(head.starts_with("HTTP/1.1 403"), "{head}");
    let lower = head.to_ascii_lowercase();
    assert!(lower.contains("x-af-decision: block"), "{head}");
    assert!(lower.contains("x-af-rule: default"), "{head}");
    assert!(lower.contains("x-af-code: af-net-010"), "{head}");
    let recs = sc.admin().wait_records("blocked=true", 1).await;
    assert_eq!(recs.len(), 1, "{recs:#?}");
    let r = &recs[0];
    assert_eq!(r["method"], "CONNECT");
    assert_eq!(r["host"], "allowed.test");
    assert_eq!(r["port"], closed);
    assert_eq!(r["allowed"], false);
    assert_eq!(r["mode"], "block");
    assert_eq!(r["rule"], "default");
    assert_eq!(r["reason"], "default");
    assert_eq!(r["code"], "AF-NET-010");
    assert_eq!(r["outcome"], "refused");
    assert_eq!(
        sc.admin().metric("af_proxy_upstream_dials_total").await,
        dials,
        "a refused tunnel was dialled"
    );

    // Positive control: a rule naming the port opens it, and bytes go both ways.
    let (head, mut s) = connect_tunnel(sc.proxy(), &format!("allowed.test:{named}")).await;
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    s.write_all(b"ping").await.unwrap();
    let mut pong = [0u8; 4];
    tokio::time::timeout(Duration::from_secs(5), s.read_exact(&mut pong))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(&pong, b"ping");
    drop(s);
    let recs = sc.admin().wait_records("blocked=false", 1).await;
    assert_eq!(recs[0]["method"], "CONNECT");
    assert_eq!(recs[0]["port"], named);
    assert_eq!(recs[0]["rule"], format!("rules[1] allowed.test:{named}"));
    assert_eq!(recs[0]["outcome"], "tunnel");
    assert_eq!(named_accepts.load(Ordering::SeqCst), 1);
    // By now a connection the refusal had let through would have arrived.
    assert_eq!(
        closed_accepts.load(Ordering::SeqCst),
        0,
        "the refused port's upstream was connected to"
    );
}
