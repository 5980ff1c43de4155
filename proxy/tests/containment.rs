//! Containment watchers: reports only with the containment token, each pod's newest kept and
//! served by the admin API, every change of verdict journaled, the witnesses counted.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::time::Duration;

use common::*;
use serde_json::{Value, json};
use tokio::net::TcpStream;

const WATCH_TOKEN: &str = "watch-token-0123456789";

async fn sidecar() -> (af_fixtures::test_resolver::TestResolver, Sidecar) {
    let dns = resolver(vec![]).await;
    let mut setup = Setup::new(&egress(&[]), dns.addr);
    setup.extra = format!(
        "containment:\n  token: {WATCH_TOKEN}\n  report: \"127.0.0.1:0\"\n  policy_witness: \"127.0.0.1:0\"\n  fence_witness: \"127.0.0.1:0\"\n  period_secs: 5\n"
    );
    let sc = Sidecar::start(&setup).await;
    (dns, sc)
}

fn lost(pod: &str, route: &str) -> Value {
    json!({"pod": pod, "breaches": [{"route": route, "what": format!("{route} was reached")}]})
}

#[tokio::test]
async fn a_report_needs_the_containment_token_and_not_the_admin_one() {
    let (_dns, sc) = sidecar().await;
    let report = Admin(sc.running.containment.unwrap().report);
    for token in [None, Some(TOKEN), Some("wrong-token-0123456789")] {
        let got = report
            .post_with("/v1/report", &lost("web-1", "tcp"), token)
            .await;
        assert_eq!(got.status, 401, "{token:?}: {}", got.body);
        assert_eq!(got.header("x-af-code"), Some("AF-NET-020"));
    }
    let page = sc.admin().json("/v1/containment").await;
    assert_eq!(page["watchers"], json!([]), "no refused report was kept");
    assert_eq!(
        sc.admin()
            .metric("af_containment_report_refusals_total")
            .await,
        3
    );
    // Positive control: the same report with the containment token is kept.
    let got = report
        .post_with("/v1/report", &lost("web-1", "tcp"), Some(WATCH_TOKEN))
        .await;
    assert_eq!(got.status, 204, "{}", got.body);
    let page = sc.admin().json("/v1/containment").await;
    assert_eq!(page["watchers"][0]["pod"], "web-1");
    assert_eq!(page["watchers"][0]["breaches"][0]["route"], "tcp");
}

#[tokio::test]
async fn reports_of_the_wrong_shape_are_refused_with_a_code() {
    let (_dns, sc) = sidecar().await;
    let report = Admin(sc.running.containment.unwrap().report);
    let too_many: Vec<Value> = (0..65)
        .map(|i| json!({"route": format!("r{i}"), "what": "x"}))
        .collect();
    for bad in [
        json!({"breaches": []}),
        json!({"pod": "", "breaches": []}),
        json!({"pod": "web-1", "breaches": too_many}),
        json!({"pod": "web-1", "breaches": [{"route": "", "what": "x"}]}),
        json!({"pod": "web-1", "held": true}),
    ] {
        let got = report
            .post_with("/v1/report", &bad, Some(WATCH_TOKEN))
            .await;
        assert_eq!(got.status, 400, "{bad}: {}", got.body);
        let v: Value = serde_json::from_str(&got.body).unwrap();
        assert_eq!(v["code"], "AF-NET-021");
        assert!(v["next"].as_str().is_some_and(|n| !n.is_empty()));
    }
    let page = sc.admin().json("/v1/containment").await;
    assert_eq!(page["watchers"], json!([]));
}

#[tokio::test]
async fn a_loss_is_journaled_counted_and_served_until_the_watcher_holds_again() {
    let (_dns, sc) = sidecar().await;
    let report = Admin(sc.running.containment.unwrap().report);
    for body in [
        json!({"pod": "web-1"}),
        json!({"pod": "web-1"}),
        lost("web-1", "policy-layer"),
    ] {
        let got = report
            .post_with("/v1/report", &body, Some(WATCH_TOKEN))
            .await;
        assert_eq!(got.status, 204, "{}", got.body);
    }
    let admin = sc.admin();
    let page = admin.json("/v1/containment").await;
    assert_eq!(page["period_secs"], 5);
    assert_eq!(page["stale_after_secs"], 15);
    let web = &page["watchers"][0];
    assert_eq!(web["reports"], 3);
    assert!(web["lost_at"].as_str().is_some(), "{web}");
    assert!(web["checked_secs_ago"].as_u64().is_some_and(|s| s <= 1));
    assert_eq!(admin.metric("af_containment_lost_watchers").await, 1);
    assert_eq!(admin.metric("af_containment_losses_total").await, 1);
    let records = admin.wait_records("", 2).await;
    let kinds: Vec<(&str, bool)> = records
        .iter()
        .map(|r| (r["kind"].as_str().unwrap(), r["held"].as_bool().unwrap()))
        .collect();
    assert_eq!(kinds, [("containment", true), ("containment", false)]);
    assert_eq!(records[1]["breaches"][0]["route"], "policy-layer");
    assert_eq!(records[1]["pod"], "web-1");

    let got = report
        .post_with("/v1/report", &json!({"pod": "web-1"}), Some(WATCH_TOKEN))
        .await;
    assert_eq!(got.status, 204);
    let page = admin.json("/v1/containment").await;
    assert!(page["watchers"][0].get("lost_at").is_none());
    assert_eq!(admin.metric("af_containment_lost_watchers").await, 0);
    admin.wait_records("", 3).await;
}

#[tokio::test]
async fn each_witness_counts_what_reached_it() {
    let (_dns, sc) = sidecar().await;
    let addrs = sc.running.containment.unwrap();
    let admin = sc.admin();
    for _ in 0..2 {
        drop(TcpStream::connect(addrs.policy_witness).await.unwrap());
    }
    drop(TcpStream::connect(addrs.fence_witness).await.unwrap());
    let mut counts = (0, 0);
    for _ in 0..100 {
        counts = (
            admin
                .metric("af_containment_policy_witness_connections_total")
                .await,
            admin
                .metric("af_containment_fence_witness_connections_total")
                .await,
        );
        if counts == (2, 1) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(counts, (2, 1));
}

#[tokio::test]
async fn without_the_section_nothing_listens_and_the_route_says_why() {
    let dns = resolver(vec![]).await;
    let sc = Sidecar::start(&Setup::new(&egress(&[]), dns.addr)).await;
    assert!(sc.running.containment.is_none());
    let got = sc.admin().get_with("/v1/containment", Some(TOKEN)).await;
    assert_eq!(got.status, 404);
    assert_eq!(got.header("x-af-code"), Some("AF-NET-021"));
}

/// A loopback port nothing listens on.
fn closed_port() -> std::net::SocketAddr {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap()
}

fn watcher(
    report: std::net::SocketAddr,
    policy: std::net::SocketAddr,
    fence: std::net::SocketAddr,
    escape: std::net::SocketAddr,
) -> af_fixtures::watch::Watch {
    af_fixtures::watch::Watch {
        report,
        period: Duration::from_secs(1),
        policy_witness: policy,
        fence_witness: fence,
        escapes: vec![af_fixtures::gate::Escape::Tcp(escape)],
        pod: "web-1".to_owned(),
        token: WATCH_TOKEN.to_owned(),
    }
}

#[tokio::test]
async fn the_watcher_reports_each_lost_layer_and_a_way_out_only_while_both_layers_hold() {
    let (_dns, sc) = sidecar().await;
    let addrs = sc.running.containment.unwrap();
    let admin = sc.admin();
    let outside = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let way_out = outside.local_addr().unwrap();
    let (gone_policy, gone_fence) = (closed_port(), closed_port());

    // Both layers held (their witnesses unreachable) and the way out refused: held.
    let held = watcher(addrs.report, gone_policy, gone_fence, closed_port());
    assert_eq!(held.check().await, []);
    held.report(held.check().await).await.unwrap();
    let page = admin.json("/v1/containment").await;
    assert_eq!(page["watchers"][0]["breaches"], json!([]));

    // The way out answers: reported by what it is.
    let out = watcher(addrs.report, gone_policy, gone_fence, way_out);
    let found = out.check().await;
    assert_eq!(found.len(), 1, "{found:?}");
    assert_eq!(found[0].route, format!("tcp:{way_out}"));
    out.report(found).await.unwrap();
    let page = admin.json("/v1/containment").await;
    assert_eq!(
        page["watchers"][0]["breaches"][0]["route"],
        format!("tcp:{way_out}")
    );

    // The policy witness answers: the layer is lost, and nothing is aimed at the way out.
    let layer = watcher(addrs.report, addrs.policy_witness, gone_fence, way_out);
    let found = layer.check().await;
    let routes: Vec<&str> = found.iter().map(|b| b.route.as_str()).collect();
    assert_eq!(routes, ["policy-layer"]);
    let fence = watcher(addrs.report, gone_policy, addrs.fence_witness, way_out);
    let routes: Vec<String> = fence.check().await.into_iter().map(|b| b.route).collect();
    assert_eq!(routes, ["pod-layer"]);

    // A watcher with the wrong token is told so, and nothing it said is kept.
    let mut forged = watcher(addrs.report, gone_policy, gone_fence, closed_port());
    forged.token = "forged-token-0123456789".to_owned();
    let err = forged.report(Vec::new()).await.unwrap_err();
    assert!(err.contains("401"), "{err}");
    let page = admin.json("/v1/containment").await;
    assert_eq!(
        page["watchers"][0]["breaches"][0]["route"],
        format!("tcp:{way_out}")
    );
}
