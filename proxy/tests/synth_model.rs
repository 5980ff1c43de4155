//! Synth's optional model endpoint, against a fake OpenAI-compatible server on loopback: a
//! usable answer replaces the offline one and is kept per request; anything else (not JSON, no
//! reply in time, an endpoint the guard refuses) leaves the offline answer; without a model
//! nothing is called.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use af_fixtures::test_resolver::TestResolver;
use af_fixtures::upstream::{Replies, Reply, Upstream};
use bytes::Bytes;
use common::*;
use serde_json::{Value, json};
use tokio::net::TcpListener;

const EGRESS: &str = r#"  default: block
  rules:
    - host: shop.synth.test
      mode: synth
      openapi: api/shop.yaml
"#;
const MODEL_HOST: &str = "llm.model.test";
const KEY: &str = "sk-test-model-key-0123";
const ORDER_1: &str = "http://shop.synth.test/v1/orders/o_1";

/// A sidecar answering `shop.synth.test` in synth mode, with `model` as `modes.model` (YAML
/// indented by four spaces) when given; `llm.model.test` resolves to the upstream address.
async fn sidecar(model: Option<String>) -> (TestResolver, Sidecar) {
    let dns = resolver(vec![(MODEL_HOST, vec![upstream_ip()])]).await;
    let shop = shop_openapi();
    let mut setup = Setup::new(EGRESS, dns.addr);
    setup.extra = format!("modes:\n  openapi:\n    api/shop.yaml: {shop}\n");
    if let Some(model) = model {
        setup.extra.push_str(&format!("  model:\n{model}"));
    }
    let sc = Sidecar::start(&setup).await;
    (dns, sc)
}

/// `modes.model` for an endpoint at `addr` (by name when it is the upstream address).
fn model_yaml(addr: SocketAddr, extra: &str) -> String {
    let host = if addr.ip() == upstream_ip() {
        MODEL_HOST.to_owned()
    } else {
        addr.ip().to_string()
    };
    format!(
        "    base_url: http://{host}:{port}/v1\n    api_key: {KEY}\n    model: test-model\n{extra}",
        port = addr.port()
    )
}

/// A fake model answering every chat completion with `content`.
async fn fake_model(content: &str) -> Upstream {
    let completion = json!({
        "id": "chatcmpl-1", "object": "chat.completion",
        "choices": [{"index": 0, "finish_reason": "stop",
            "message": {"role": "assistant", "content": content}}],
    });
    let reply = Reply {
        status: 200,
        headers: vec![("content-type".into(), "application/json".into())],
        body: Bytes::from(completion.to_string()),
    };
    http_upstream(Replies::new(reply)).await
}

/// An order valid against the demo description's `Order` schema.
fn order() -> Value {
    json!({
        "id": "7d1f3c2a-9b8e-4f6d-a5c4-3b2a1f0e9d8c", "state": "shipped", "total": 99.5,
        "quantity": 3, "created_at": "2025-01-02T03:04:05Z",
        "customer": {"id": "cus_model", "email": "model@example.com"},
        "items": [{"sku": "SKU-MODEL", "price": 250}],
    })
}

/// What a sidecar without a model answers for `url`: the offline answer.
async fn offline(url: &str) -> Got {
    let (_dns, sc) = sidecar(None).await;
    let got = proxy_get(sc.proxy(), url).await;
    assert_eq!(got.header("x-af-synth"), Some("openapi"), "{}", got.body);
    got
}

#[tokio::test]
async fn a_model_answer_is_used_marked_and_kept_per_request() {
    let model = fake_model(&order().to_string()).await;
    let (_dns, sc) = sidecar(Some(model_yaml(model.addr(), ""))).await;

    let first = proxy_get(sc.proxy(), ORDER_1).await;
    assert_eq!(first.status, 200, "{}", first.body);
    assert_eq!(first.header("x-af-synth"), Some("model"));
    assert_eq!(first.header("x-af-decision"), Some("synth"));
    assert_eq!(serde_json::from_str::<Value>(&first.body).unwrap(), order());
    let again = proxy_get(sc.proxy(), ORDER_1).await;
    assert_eq!(again.header("x-af-synth"), Some("model"));
    assert_eq!(again.body, first.body);
    assert_eq!(
        model.seen().len(),
        1,
        "the same request is answered from the cache"
    );
    proxy_get(sc.proxy(), "http://shop.synth.test/v1/orders/o_2").await;
    assert_eq!(model.seen().len(), 2, "another request asks again");

    let seen = &model.seen()[0];
    assert_eq!(
        (seen.method.as_str(), seen.path.as_str()),
        ("POST", "/v1/chat/completions")
    );
    assert_eq!(
        seen.header("authorization"),
        Some(format!("Bearer {KEY}").as_str())
    );
    let asked: Value = serde_json::from_slice(&seen.body).unwrap();
    assert_eq!(asked["model"], "test-model");
    assert_eq!(asked["temperature"], 0);
    assert_eq!(asked["response_format"]["type"], "json_object");
    assert!(asked["seed"].is_u64(), "{asked}");
    let prompt = asked["messages"][1]["content"].as_str().unwrap();
    assert!(prompt.contains("GET /v1/orders/o_1"), "{prompt}");
    assert!(prompt.contains("shop.synth.test"), "{prompt}");
    assert!(
        prompt.contains("\"Order\""),
        "the schema is in the prompt: {prompt}"
    );
    let other: Value = serde_json::from_slice(&model.seen()[1].body).unwrap();
    assert_ne!(other["seed"], asked["seed"], "the seed follows the request");

    let records = sc.admin().wait_records("host=shop.synth.test", 3).await;
    // What left the environment: the two calls to the model, not the cached answer.
    let calls = sc
        .admin()
        .wait_records(&format!("host={MODEL_HOST}"), 2)
        .await;
    assert_eq!(calls.len(), 2, "{calls:#?}");
    for call in &calls {
        assert_eq!(call["reason"], "synth_model", "{call:#?}");
        assert_eq!(call["allowed"], true);
        assert_eq!(call["mode"], "synth");
        assert_eq!(call["status"], 200);
        assert_eq!(call["path"], "/v1/chat/completions");
        assert!(call["bytes_up"].as_u64().unwrap() > 0, "{call:#?}");
    }
    let answers = format!(
        "{:?}{}{:?}{}",
        first.headers, first.body, again.headers, again.body
    );
    for text in [
        serde_json::to_string(&records).unwrap(),
        serde_json::to_string(&calls).unwrap(),
        answers,
    ] {
        assert!(!text.contains(KEY), "the key leaked: {text}");
    }
}

#[tokio::test]
async fn a_reply_that_is_not_json_leaves_the_offline_answer_and_is_not_kept() {
    let model = fake_model("The order o_1 has been shipped.").await;
    let (_dns, sc) = sidecar(Some(model_yaml(model.addr(), ""))).await;
    let expected = offline(ORDER_1).await;
    for asked in 1..=2 {
        let got = proxy_get(sc.proxy(), ORDER_1).await;
        assert_eq!(got.status, 200, "{}", got.body);
        assert_eq!(got.header("x-af-synth"), Some("openapi"));
        assert_eq!(got.body, expected.body);
        assert_eq!(model.seen().len(), asked, "an unusable reply is not cached");
    }
}

#[tokio::test]
async fn a_reply_that_breaks_the_schema_leaves_the_offline_answer() {
    let mut lost = order();
    lost["state"] = json!("lost");
    let model = fake_model(&lost.to_string()).await;
    let (_dns, sc) = sidecar(Some(model_yaml(model.addr(), ""))).await;
    let got = proxy_get(sc.proxy(), ORDER_1).await;
    assert_eq!(got.header("x-af-synth"), Some("openapi"));
    assert_eq!(got.body, offline(ORDER_1).await.body);
    assert_eq!(model.seen().len(), 1);
    let call = sc
        .admin()
        .wait_records(&format!("host={MODEL_HOST}"), 1)
        .await;
    assert_eq!(call[0]["code"], "AF-NET-013", "{call:#?}");
    assert!(
        call[0]["error"].as_str().unwrap().contains("not used"),
        "{call:#?}"
    );
}

#[tokio::test]
async fn a_model_that_does_not_answer_in_time_leaves_the_offline_answer() {
    // Accepts connections and never answers.
    let silent = TcpListener::bind(SocketAddr::from((UPSTREAM_IP, 0)))
        .await
        .unwrap();
    let addr = silent.local_addr().unwrap();
    let accepted = Arc::new(AtomicUsize::new(0));
    let count = accepted.clone();
    let holder = tokio::spawn(async move {
        let mut open = Vec::new();
        while let Ok((stream, _)) = silent.accept().await {
            count.fetch_add(1, Ordering::SeqCst);
            open.push(stream);
        }
    });
    let (_dns, sc) = sidecar(Some(model_yaml(addr, "    timeout_ms: 300\n"))).await;
    let started = Instant::now();
    let got = proxy_get(sc.proxy(), ORDER_1).await;
    let took = started.elapsed();
    assert_eq!(got.status, 200, "{}", got.body);
    assert_eq!(got.header("x-af-synth"), Some("openapi"));
    assert_eq!(got.body, offline(ORDER_1).await.body);
    assert_eq!(accepted.load(Ordering::SeqCst), 1, "the model was dialled");
    assert!(
        took >= Duration::from_millis(300) && took < Duration::from_secs(5),
        "{took:?}"
    );
    holder.abort();
}

#[tokio::test]
async fn a_model_endpoint_the_guard_refuses_is_never_dialled() {
    // 127.0.0.1 is loopback outside the trusted network: the guard refuses it.
    let model = Upstream::http(
        SocketAddr::from(([127, 0, 0, 1], 0)),
        Replies::new(Reply::ok(order().to_string())),
    )
    .await
    .unwrap();
    let (_dns, sc) = sidecar(Some(model_yaml(model.addr(), ""))).await;
    let got = proxy_get(sc.proxy(), ORDER_1).await;
    assert_eq!(got.header("x-af-synth"), Some("openapi"));
    assert!(model.seen().is_empty());
    // Journaled as a call that never left.
    let call = sc
        .admin()
        .wait_records(&format!("host={}", model.addr().ip()), 1)
        .await;
    assert_eq!(call[0]["reason"], "synth_model", "{call:#?}");
    assert_eq!(call[0]["allowed"], false, "{call:#?}");
    assert_eq!(call[0]["bytes_up"], 0, "{call:#?}");
    assert_eq!(call[0]["code"], "AF-NET-013", "{call:#?}");
}

#[tokio::test]
async fn a_credential_in_the_query_never_reaches_the_model() {
    let model = fake_model(&order().to_string()).await;
    let (_dns, sc) = sidecar(Some(model_yaml(model.addr(), ""))).await;
    let url = format!("{ORDER_1}?expand=items&api_key=own-secret-9876");
    assert_eq!(proxy_get(sc.proxy(), &url).await.status, 200);
    let asked = String::from_utf8_lossy(&model.seen()[0].body).into_owned();
    assert!(asked.contains("expand=items"), "{asked}");
    assert!(!asked.contains("own-secret-9876"), "{asked}");
}

#[tokio::test]
async fn without_a_model_synth_calls_nothing() {
    let model = fake_model(&order().to_string()).await;
    let (_dns, sc) = sidecar(None).await;
    let got = proxy_get(sc.proxy(), ORDER_1).await;
    assert_eq!(got.status, 200, "{}", got.body);
    assert_eq!(got.header("x-af-synth"), Some("openapi"));
    assert_ne!(serde_json::from_str::<Value>(&got.body).unwrap(), order());
    assert!(model.seen().is_empty(), "no model configured, no call");
}
