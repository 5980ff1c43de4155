//! `POST /v1/deliver`: the admin API delivers one request to a service inside the
//! environment (what `af webhook trigger` uses), and to nothing else.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::net::SocketAddr;

use af_fixtures::upstream::{Replies, Reply, Upstream};
use common::*;
use serde_json::{Value, json};

async fn inside_sidecar() -> (af_fixtures::test_resolver::TestResolver, Upstream, Sidecar) {
    let service = Upstream::http(
        SocketAddr::from((UPSTREAM_IP, 0)),
        Replies::new(Reply::ok("{\"received\":true}")),
    )
    .await
    .unwrap();
    // The test resolver plays the runtime's inside resolver: it knows the service's name.
    let dns = resolver(vec![
        ("web", vec![upstream_ip()]),
        ("api.outside.test", vec![upstream_ip()]),
    ])
    .await;
    let mut setup = Setup::new(&egress(&[]), dns.addr);
    setup.dns = format!(
        "    listen: \"127.0.0.1:0\"\n    answer_v4: 198.51.100.2\n    inside_resolver: \"{}\"",
        dns.addr
    );
    setup.extra = format!("inside:\n  subnets: [\"{TRUSTED}\"]\n  names: [web]\n");
    let sc = Sidecar::start(&setup).await;
    (dns, service, sc)
}

#[tokio::test]
async fn a_signed_event_is_delivered_to_a_service_byte_for_byte() {
    let (_dns, service, sc) = inside_sidecar().await;
    let body = "{\"id\":\"evt_1\",\"type\":\"payment_intent.succeeded\"}";
    let got = sc
        .admin()
        .post_json(
            "/v1/deliver",
            &json!({
                "service": "web",
                "port": service.addr().port(),
                "path": "/webhooks/stripe",
                "headers": {"stripe-signature": "t=1,v1=abc", "content-type": "application/json"},
                "body": body,
            }),
        )
        .await;
    assert_eq!(got.status, 200, "{}", got.body);
    let answer: Value = serde_json::from_str(&got.body).unwrap();
    assert_eq!(answer["status"], 200);
    assert_eq!(answer["body"], "{\"received\":true}");
    let seen = service.seen();
    assert_eq!(seen.len(), 1);
    assert_eq!(seen[0].method, "POST");
    assert_eq!(seen[0].path, "/webhooks/stripe");
    assert_eq!(seen[0].header("stripe-signature"), Some("t=1,v1=abc"));
    assert_eq!(seen[0].body, body);
}

#[tokio::test]
async fn only_the_environments_own_services_are_delivered_to() {
    let (_dns, service, sc) = inside_sidecar().await;
    let port = service.addr().port();
    let admin = sc.admin();
    // Resolvable and inside the subnets, but not one of the environment's services.
    let outside = admin
        .post_json(
            "/v1/deliver",
            &json!({"service": "api.outside.test", "port": port, "path": "/"}),
        )
        .await;
    assert_eq!(outside.status, 502, "{}", outside.body);
    assert_eq!(outside.header("x-af-code"), Some("AF-NET-023"));
    let bad = admin
        .post_json("/v1/deliver", &json!({"service": "web", "port": port}))
        .await;
    assert_eq!(bad.status, 400);
    assert_eq!(bad.header("x-af-code"), Some("AF-NET-021"));
    assert!(service.seen().is_empty(), "nothing was sent");
    // Positive control: the same sidecar delivers to its own service.
    let ok = admin
        .post_json(
            "/v1/deliver",
            &json!({"service": "web", "port": port, "path": "/", "method": "GET"}),
        )
        .await;
    assert_eq!(ok.status, 200, "{}", ok.body);
    assert_eq!(service.seen().len(), 1);
}

#[tokio::test]
async fn a_service_that_starts_listening_a_moment_later_is_delivered_to() {
    let (_dns, service, sc) = inside_sidecar().await;
    // A port nothing listens on yet (as a service just started, or a cluster Service whose
    // data path does not know the pod yet): the delivery waits for it instead of failing.
    let port = closed_upstream_port();
    let late = tokio::spawn(async move {
        tokio::time::sleep(std::time::Duration::from_millis(400)).await;
        Upstream::http(
            SocketAddr::from((UPSTREAM_IP, port)),
            Replies::new(Reply::ok("late")),
        )
        .await
        .unwrap()
    });
    let got = sc
        .admin()
        .post_json(
            "/v1/deliver",
            &json!({"service": "web", "port": port, "path": "/hook"}),
        )
        .await;
    let late = late.await.unwrap();
    assert_eq!(got.status, 200, "{}", got.body);
    let answer: Value = serde_json::from_str(&got.body).unwrap();
    assert_eq!(answer["body"], "late");
    assert_eq!(late.seen().len(), 1, "delivered once, to the late listener");
    assert!(service.seen().is_empty());
}

#[tokio::test]
async fn a_port_that_keeps_refusing_is_a_coded_refusal() {
    let (_dns, service, sc) = inside_sidecar().await;
    let port = closed_upstream_port();
    let got = sc
        .admin()
        .post_json(
            "/v1/deliver",
            &json!({"service": "web", "port": port, "path": "/hook"}),
        )
        .await;
    assert_eq!(got.status, 502, "{}", got.body);
    assert_eq!(got.header("x-af-code"), Some("AF-NET-023"));
    assert!(
        got.body.contains("refused every connection"),
        "{}",
        got.body
    );
    // Positive control: the same sidecar reaches the service that listens.
    let ok = sc
        .admin()
        .post_json(
            "/v1/deliver",
            &json!({"service": "web", "port": service.addr().port(), "path": "/"}),
        )
        .await;
    assert_eq!(ok.status, 200, "{}", ok.body);
}
