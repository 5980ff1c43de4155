//! The admin API: token on every route but health, filters, coded errors, follow, metrics.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::time::Duration;

use bytes::Bytes;
use common::*;
use http_body_util::{BodyExt, Empty};
use hyper::Request;
use serde_json::Value;

async fn setup() -> (
    af_fixtures::test_resolver::TestResolver,
    af_fixtures::upstream::Upstream,
    Sidecar,
) {
    let up = hello_upstream().await;
    let dns = resolver(vec![
        ("api.allowed.test", vec![upstream_ip()]),
        ("api.blocked.test", vec![upstream_ip()]),
    ])
    .await;
    let rules = [
        ("api.allowed.test:{port}", "allow"),
        ("api.blocked.test", "block"),
    ];
    let sc = Sidecar::start(&Setup::new(&egress_on(up.addr().port(), &rules), dns.addr)).await;
    (dns, up, sc)
}

#[tokio::test]
async fn every_route_but_healthz_needs_the_bearer_token() {
    let (_dns, _up, sc) = setup().await;
    let admin = sc.admin();
    assert_eq!(admin.get_with("/healthz", None).await.status, 200);
    for path in [
        "/readyz",
        "/metrics",
        "/v1/decisions",
        "/v1/decisions/follow",
    ] {
        for token in [None, Some("wrong-token-0123456789abcd")] {
            let got = admin.get_with(path, token).await;
            assert_eq!(got.status, 401, "{path} {token:?}");
            let v: Value = serde_json::from_str(&got.body).unwrap();
            assert_eq!(v["code"], "AF-NET-020");
            assert!(v["statement"].as_str().unwrap().contains("token"));
            assert!(v["next"].as_str().is_some());
        }
    }
    assert_eq!(admin.get_with("/readyz", Some(TOKEN)).await.status, 200);
}

#[tokio::test]
async fn bad_query_parameters_get_400_net_021() {
    let (_dns, _up, sc) = setup().await;
    for q in [
        "since=abc",
        "limit=0",
        "limit=5000",
        "blocked=maybe",
        "newest=yes",
        "colour=red",
    ] {
        let got = sc
            .admin()
            .get_with(&format!("/v1/decisions?{q}"), Some(TOKEN))
            .await;
        assert_eq!(got.status, 400, "{q}");
        let v: Value = serde_json::from_str(&got.body).unwrap();
        assert_eq!(v["code"], "AF-NET-021", "{q}");
        assert!(v["next"].as_str().is_some());
    }
}

#[tokio::test]
async fn decisions_filter_by_blocked_and_host_and_page_by_since() {
    let (_dns, up, sc) = setup().await;
    let port = up.addr().port();
    for _ in 0..3 {
        assert_eq!(
            proxy_get(sc.proxy(), &format!("http://api.allowed.test:{port}/"))
                .await
                .status,
            200
        );
        assert_eq!(
            proxy_get(sc.proxy(), "http://api.blocked.test/")
                .await
                .status,
            403
        );
    }
    let admin = sc.admin();
    let all = admin.wait_records("", 6).await;
    assert_eq!(all.len(), 6);
    let seqs: Vec<u64> = all.iter().map(|r| r["seq"].as_u64().unwrap()).collect();
    assert!(seqs.windows(2).all(|w| w[1] == w[0] + 1), "{seqs:?}");

    let blocked = admin.records("blocked=true").await;
    assert_eq!(blocked.len(), 3);
    assert!(
        blocked
            .iter()
            .all(|r| r["allowed"] == false && r["host"] == "api.blocked.test")
    );
    let allowed = admin.records("blocked=false").await;
    assert_eq!(allowed.len(), 3);
    let by_host = admin.records("host=API.Allowed.test").await;
    assert_eq!(by_host.len(), 3);

    let page = admin
        .json(&format!("/v1/decisions?since={}&limit=2", seqs[1]))
        .await;
    let page_seqs: Vec<u64> = page["records"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["seq"].as_u64().unwrap())
        .collect();
    assert_eq!(page_seqs, [seqs[2], seqs[3]]);
    assert_eq!(page["next_since"], seqs[3]);
    assert_eq!(page["losses"]["queue_drops"], 0);
}

#[tokio::test]
async fn newest_returns_the_last_n_matches_oldest_first_like_tail() {
    let (_dns, up, sc) = setup().await;
    let port = up.addr().port();
    for n in 0..5 {
        let got = proxy_get(sc.proxy(), &format!("http://api.allowed.test:{port}/{n}")).await;
        assert_eq!(got.status, 200);
        assert_eq!(
            proxy_get(sc.proxy(), "http://api.blocked.test/")
                .await
                .status,
            403
        );
    }
    let admin = sc.admin();
    let all = admin.wait_records("", 10).await;
    let committed = all.last().unwrap()["seq"].as_u64().unwrap();
    let paths = |page: &Value| -> Vec<String> {
        page["records"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["path"].as_str().unwrap().to_owned())
            .collect()
    };
    // Without `newest`, a limit gives the first matches (the control); with it, the last.
    let first = admin.json("/v1/decisions?limit=2&blocked=false").await;
    assert_eq!(paths(&first), ["/0", "/1"]);
    let newest = admin
        .json("/v1/decisions?limit=2&blocked=false&newest=true")
        .await;
    assert_eq!(paths(&newest), ["/3", "/4"]);
    assert_eq!(newest["next_since"], committed);
    let seqs: Vec<u64> = newest["records"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["seq"].as_u64().unwrap())
        .collect();
    assert!(seqs[0] < seqs[1], "{seqs:?}");
    // Fewer matches than the limit: all of them.
    let few = admin
        .json("/v1/decisions?limit=50&newest=true&host=api.allowed.test")
        .await;
    assert_eq!(paths(&few), ["/0", "/1", "/2", "/3", "/4"]);
}

#[tokio::test]
async fn follow_streams_new_records_as_they_commit() {
    let (_dns, _up, sc) = setup().await;
    assert_eq!(
        proxy_get(sc.proxy(), "http://api.blocked.test/before")
            .await
            .status,
        403
    );
    let first = sc.admin().wait_records("", 1).await;
    let since = first[0]["seq"].as_u64().unwrap();

    let mut c = connect(sc.running.admin).await;
    let req = Request::get(format!("/v1/decisions/follow?since={since}"))
        .header("host", "admin")
        .header("authorization", format!("Bearer {TOKEN}"))
        .body(Empty::<Bytes>::new())
        .unwrap();
    let resp = c.send_request(req).await.unwrap();
    assert_eq!(resp.status(), 200);
    assert_eq!(resp.headers()["content-type"], "application/x-ndjson");
    let mut body = resp.into_body();

    for path in ["/after-1", "/after-2"] {
        assert_eq!(
            proxy_get(sc.proxy(), &format!("http://api.blocked.test{path}"))
                .await
                .status,
            403
        );
    }
    let mut text = String::new();
    while text.lines().count() < 2 {
        let frame = tokio::time::timeout(Duration::from_secs(5), body.frame())
            .await
            .unwrap()
            .unwrap()
            .unwrap();
        if let Some(data) = frame.data_ref() {
            text.push_str(std::str::from_utf8(data).unwrap());
        }
    }
    let lines: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines[0]["path"], "/after-1");
    assert_eq!(lines[1]["path"], "/after-2");
    assert_eq!(lines[0]["seq"].as_u64().unwrap(), since + 1);
}

#[tokio::test]
async fn metrics_count_requests_by_mode_and_outcome() {
    let (_dns, up, sc) = setup().await;
    assert_eq!(
        proxy_get(sc.proxy(), "http://api.blocked.test/")
            .await
            .status,
        403
    );
    assert_eq!(
        proxy_get(
            sc.proxy(),
            &format!("http://api.allowed.test:{}/", up.addr().port())
        )
        .await
        .status,
        200
    );
    sc.admin().wait_records("", 2).await;
    let admin = sc.admin();
    assert_eq!(
        admin
            .metric("af_proxy_requests_total{via=\"proxy\",mode=\"block\",outcome=\"refused\"}")
            .await,
        1
    );
    assert_eq!(
        admin
            .metric("af_proxy_requests_total{via=\"proxy\",mode=\"allow\",outcome=\"forwarded\"}")
            .await,
        1
    );
    assert_eq!(admin.metric("af_proxy_bytes_down_total").await, 5);
    assert_eq!(admin.metric("af_proxy_journal_records_total").await, 2);
    assert_eq!(admin.metric("af_proxy_journal_queue_drops_total").await, 0);
    let body = admin.get_with("/metrics", Some(TOKEN)).await.body;
    for name in [
        "af_proxy_active_connections",
        "af_proxy_connections_parked_total",
        "af_proxy_connection_limit_refusals_total",
        "af_proxy_bytes_up_total",
    ] {
        assert!(body.contains(&format!("# TYPE {name}")), "{name} missing");
    }
}

/// `GET /healthz` on a fresh connection: the answer's first line, or empty when the sidecar
/// closed the connection without answering.
async fn healthz_raw(admin: std::net::SocketAddr) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut c = tokio::net::TcpStream::connect(admin).await.unwrap();
    let sent = c
        .write_all(b"GET /healthz HTTP/1.1\r\nHost: admin\r\nConnection: close\r\n\r\n")
        .await;
    let mut answer = String::new();
    if sent.is_ok() {
        let _ = c.read_to_string(&mut answer).await;
    }
    answer.lines().next().unwrap_or_default().to_owned()
}

#[tokio::test]
async fn admin_connections_are_bounded_and_the_bound_frees_as_they_close() {
    let (_dns, _up, sc) = setup().await;
    let addr = sc.admin().0;
    // Positive control: the route answers on a fresh connection.
    assert_eq!(healthz_raw(addr).await, "HTTP/1.1 200 OK");
    let mut idle = Vec::new();
    for _ in 0..af_proxy::MAX_CONNECTIONS {
        idle.push(tokio::net::TcpStream::connect(addr).await.unwrap());
    }
    assert_eq!(healthz_raw(addr).await, "", "one past the bound is closed");
    drop(idle);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    loop {
        let line = healthz_raw(addr).await;
        if line == "HTTP/1.1 200 OK" {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "still refused: {line:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn pages_records_and_refusals_read_as_the_contracts_types() {
    use af_sidecar_api::admin::{Page, Ready, Refusal};
    use af_sidecar_api::journal::Entry;

    let (_dns, up, sc) = setup().await;
    let port = up.addr().port();
    let blocked = proxy_get(sc.proxy(), &format!("http://api.blocked.test:{port}/b")).await;
    assert_eq!(blocked.status, 403);
    let allowed = proxy_get(sc.proxy(), &format!("http://api.allowed.test:{port}/a")).await;
    assert_eq!(allowed.status, 200);
    let admin = sc.admin();
    admin.wait_records("", 2).await;
    let got = admin.get_with("/v1/decisions", Some(TOKEN)).await;
    let page: Page = serde_json::from_str(&got.body).unwrap();
    let decisions: Vec<_> = page
        .records
        .iter()
        .map(|r| match &r.entry {
            Entry::Decision(d) => (d.host.as_str(), d.path.as_str(), r.entry.blocked()),
            other => panic!("not a decision: {other:?}"),
        })
        .collect();
    assert_eq!(
        decisions,
        [
            ("api.blocked.test", "/b", Some(true)),
            ("api.allowed.test", "/a", Some(false))
        ]
    );
    assert_eq!(page.committed, page.records[1].seq);
    let ready: Ready =
        serde_json::from_str(&admin.get_with("/readyz", Some(TOKEN)).await.body).unwrap();
    assert_eq!((ready.ready, ready.committed), (true, page.committed));
    let refused = admin.get_with("/v1/decisions?limit=0", Some(TOKEN)).await;
    let refusal: Refusal = serde_json::from_str(&refused.body).unwrap();
    assert_eq!(refusal.code, "AF-NET-021");
}
