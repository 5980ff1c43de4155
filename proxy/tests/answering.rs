//! The modes that answer in the sidecar, through real TLS clients: mock from the built-in
//! packs, synth from an OpenAPI description, capture into the inbox (which survives a
//! restart), and their refusals.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use af_fixtures::test_resolver::TestResolver;
use common::intercept::{TestCa, client, h1, request, send1, tls_direct, tls_via_connect};
use common::*;
use serde_json::{Value, json};

const H1: &[u8] = b"http/1.1";

const EGRESS: &str = r#"  default: block
  rules:
    - host: api.github.com
      mode: mock
    - host: shop.synth.test
      mode: synth
      openapi: api/shop.yaml
    - host: api.sendgrid.com
      mode: capture
    - host: "*.capture.test"
      mode: capture
    - host: hooks.named.test
      mode: capture
"#;

struct Env {
    _dns: TestResolver,
    ca: TestCa,
    setup: Setup,
    sc: Sidecar,
}

impl Env {
    async fn start() -> Self {
        // Nothing here is dialled: every host answers in the sidecar.
        let dns = resolver(Vec::new()).await;
        let ca = TestCa::new();
        let shop = shop_openapi();
        let mut setup = Setup::new(EGRESS, dns.addr);
        setup.extra = format!(
            "{}modes:\n  capture_body_bytes: 4096\n  openapi:\n    api/shop.yaml: {}\n",
            ca.tls_yaml(64, &[]),
            shop
        );
        let sc = Sidecar::start(&setup).await;
        Self {
            _dns: dns,
            ca,
            setup,
            sc,
        }
    }

    async fn h1_to(
        &self,
        host: &str,
    ) -> hyper::client::conn::http1::SendRequest<http_body_util::Full<bytes::Bytes>> {
        let connector = client(&[&self.ca.cert_der], &[H1]);
        let tls = tls_via_connect(self.sc.proxy(), &format!("{host}:443"), host, &connector)
            .await
            .unwrap();
        h1(tls).await
    }
}

/// `GET /repos/acme/widgets` of the mocked GitHub API: answered 200 from the built-in pack.
async fn mocked_widgets(
    c: &mut hyper::client::conn::http1::SendRequest<http_body_util::Full<bytes::Bytes>>,
) -> Got {
    let hit = send1(
        c,
        request("GET", "api.github.com", "/repos/acme/widgets", ""),
    )
    .await;
    assert_eq!(hit.status, 200, "{}", hit.body);
    hit
}

fn json_request(
    host: &str,
    path: &str,
    body: &Value,
) -> hyper::Request<http_body_util::Full<bytes::Bytes>> {
    let mut req = request("POST", host, path, &body.to_string());
    req.headers_mut()
        .insert("content-type", "application/json".parse().unwrap());
    req.headers_mut()
        .insert("authorization", "Bearer SG.test-key".parse().unwrap());
    req
}

#[tokio::test]
async fn mock_answers_from_the_built_in_pack_and_a_miss_offers_a_skeleton() {
    let env = Env::start().await;
    let mut c = env.h1_to("api.github.com").await;
    let hit = mocked_widgets(&mut c).await;
    assert_eq!(hit.header("x-af-decision"), Some("mock"));
    assert_eq!(hit.header("x-af-mock"), Some("hit"));
    let repo: Value = serde_json::from_str(&hit.body).unwrap();
    assert_eq!(
        repo["name"], "widgets",
        "path parameters fill the answer: {repo}"
    );
    let miss = send1(&mut c, request("DELETE", "api.github.com", "/gists/1", "")).await;
    assert_eq!(miss.status, 404);
    assert_eq!(miss.header("x-af-mock"), Some("miss"));
    assert!(miss.body.contains("/gists/1"), "{}", miss.body);
    let recs = env.sc.admin().wait_records("host=api.github.com", 2).await;
    assert!(
        recs.iter()
            .all(|r| r["mode"] == "mock" && r["allowed"] == false && r["outcome"] == "answered"),
        "{recs:#?}"
    );
    assert_eq!(recs[0]["status"], 200);
    assert_eq!(recs[1]["status"], 404);
}

#[tokio::test]
async fn a_mock_hosts_client_that_refuses_the_certificate_is_journaled_handshake_failed() {
    let env = Env::start().await;
    // Trusts only a certificate of its own, as a pinning client would.
    let own = rcgen::generate_simple_self_signed(vec!["api.github.com".to_owned()]).unwrap();
    let pinned = client(&[own.cert.der()], &[H1]);
    let failed = tls_via_connect(
        env.sc.proxy(),
        "api.github.com:443",
        "api.github.com",
        &pinned,
    )
    .await;
    assert!(failed.is_err());
    let recs = env.sc.admin().wait_records("host=api.github.com", 1).await;
    assert_eq!(recs[0]["mode"], "mock", "{recs:#?}");
    assert_eq!(recs[0]["outcome"], "handshake_failed", "{recs:#?}");
    assert_eq!(
        recs[0]["reason"], "client_rejected_certificate",
        "{recs:#?}"
    );
    // Positive control: a client trusting the environment CA is answered, and its opened
    // connection is journaled as opened, not as a request.
    let mut c = env.h1_to("api.github.com").await;
    mocked_widgets(&mut c).await;
    drop(c);
    let recs = env.sc.admin().wait_records("host=api.github.com", 3).await;
    let outcomes: Vec<(&Value, &Value)> = recs[1..]
        .iter()
        .map(|r| (&r["via"], &r["outcome"]))
        .collect();
    assert_eq!(
        outcomes,
        [
            (&json!("intercept"), &json!("answered")),
            (&json!("proxy"), &json!("opened"))
        ],
        "{recs:#?}"
    );
}

#[tokio::test]
async fn every_answering_mode_answers_alike_through_connect_and_transparent_tls() {
    let env = Env::start().await;
    let connector = client(&[&env.ca.cert_der], &[H1]);
    let mail = json!({
        "personalizations": [{"to": [{"email": "both@example.test"}]}],
        "from": {"email": "noreply@shop.example.test"},
        "subject": "Hello", "content": [{"type": "text/plain", "value": "hi"}]
    });
    let cases = [
        ("mock", "api.github.com", 200),
        ("synth", "shop.synth.test", 200),
        ("capture", "api.sendgrid.com", 202),
    ];
    for (mode, host, status) in cases {
        let ask = || match mode {
            "mock" => request("GET", host, "/repos/acme/widgets", ""),
            "synth" => request("GET", host, "/v1/orders/ord_7", ""),
            _ => json_request(host, "/v3/mail/send", &mail),
        };
        let through_connect = send1(&mut env.h1_to(host).await, ask()).await;
        let tls = tls_direct(env.sc.tls(), host, &connector).await.unwrap();
        let through_transparent = send1(&mut h1(tls).await, ask()).await;
        for got in [&through_connect, &through_transparent] {
            assert_eq!(got.status, status, "{mode}: {}", got.body);
            assert_eq!(got.header("x-af-decision"), Some(mode));
        }
        if mode != "capture" {
            assert_eq!(
                through_connect.body, through_transparent.body,
                "{mode}: the same answer either way"
            );
        }
    }
    // Both captures reached the inbox.
    let inbox = env.sc.admin().wait_inbox("to=both%40example.test", 2).await;
    assert_eq!(inbox.len(), 2);
}

#[tokio::test]
async fn synth_is_deterministic_per_request_through_transparent_tls() {
    let env = Env::start().await;
    let connector = client(&[&env.ca.cert_der], &[H1]);
    let mut bodies = Vec::new();
    for id in ["ord_1", "ord_1", "ord_2"] {
        let tls = tls_direct(env.sc.tls(), "shop.synth.test", &connector)
            .await
            .unwrap();
        let mut c = h1(tls).await;
        let got = send1(
            &mut c,
            request("GET", "shop.synth.test", &format!("/v1/orders/{id}"), ""),
        )
        .await;
        assert_eq!(got.status, 200, "{}", got.body);
        assert_eq!(got.header("x-af-synth"), Some("openapi"));
        bodies.push(got.body);
    }
    assert_eq!(bodies[0], bodies[1], "same request, same answer");
    assert_ne!(bodies[0], bodies[2], "another id, another answer");
    let order: Value = serde_json::from_str(&bodies[0]).unwrap();
    assert!(order.is_object(), "{order}");
}

#[tokio::test]
async fn a_sendgrid_send_is_answered_as_sendgrid_and_lands_in_the_inbox() {
    let env = Env::start().await;
    let mut c = env.h1_to("api.sendgrid.com").await;
    let mail = json!({
        "personalizations": [{"to": [{"email": "ada@example.test", "name": "Ada"}]}],
        "from": {"email": "noreply@shop.example.test"},
        "subject": "Confirm your account",
        "content": [
            {"type": "text/plain", "value": "Your code is 482913. Confirm: https://shop.example.test/confirm?token=abc Unsubscribe: https://shop.example.test/unsubscribe"},
            {"type": "text/html", "value": "<p>Code <b>482913</b></p><a href=\"https://shop.example.test/confirm?token=abc\">Confirm</a>"}
        ]
    });
    let got = send1(
        &mut c,
        json_request("api.sendgrid.com", "/v3/mail/send", &mail),
    )
    .await;
    assert_eq!(got.status, 202, "{}", got.body);
    assert_eq!(got.header("x-af-decision"), Some("capture"));
    assert!(got.header("x-message-id").is_some());

    let admin = env.sc.admin();
    let inbox = admin.wait_inbox("to=ada%40example.test", 1).await;
    let m = &inbox[0]["message"];
    assert_eq!(inbox[0]["via"], "capture");
    assert_eq!(inbox[0]["host"], "api.sendgrid.com");
    assert_eq!(m["provider"], "sendgrid");
    assert_eq!(m["kind"], "email");
    assert_eq!(m["subject"], "Confirm your account");
    assert_eq!(m["code"], "482913");
    assert_eq!(m["links"][0], "https://shop.example.test/confirm?token=abc");
    assert_eq!(
        m["links"].as_array().unwrap().last().unwrap(),
        "https://shop.example.test/unsubscribe"
    );
    let seq = inbox[0]["seq"].as_u64().unwrap();
    let one = admin.json(&format!("/v1/inbox/{seq}")).await;
    assert_eq!(one["message"]["code"], "482913");
    assert!(admin.wait_inbox("to=nobody", 0).await.is_empty());
    assert_eq!(admin.metric("af_proxy_messages_captured_total").await, 1);

    // The inbox is the journal: it survives a restart.
    let Env { sc, setup, .. } = env;
    let sc = sc.restart(&setup).await;
    let after = sc.admin().wait_inbox("subject=confirm", 1).await;
    assert_eq!(after[0]["seq"], seq);
}

#[tokio::test]
async fn capture_refuses_what_it_cannot_answer_as_the_provider() {
    let env = Env::start().await;
    // A wildcard capture host with no provider handler: refused, not answered `{}`.
    let mut c = env.h1_to("api.capture.test").await;
    let got = send1(
        &mut c,
        json_request("api.capture.test", "/v1/send", &json!({"to": "x"})),
    )
    .await;
    assert_eq!(got.status, 501, "{}", got.body);
    assert_eq!(got.header("x-af-code"), Some("AF-NET-040"));
    // A payload SendGrid itself would refuse.
    let mut c = env.h1_to("api.sendgrid.com").await;
    let bad = send1(
        &mut c,
        json_request(
            "api.sendgrid.com",
            "/v3/mail/send",
            &json!({"subject": "x"}),
        ),
    )
    .await;
    assert_eq!(bad.status, 400, "{}", bad.body);
    assert_eq!(bad.header("x-af-code"), Some("AF-NET-041"));
    // Over the capture cap (4 KiB here).
    let big = json!({"personalizations": [{"to": [{"email": "a@b.test"}]}], "from": {"email": "c@d.test"}, "subject": "s", "content": [{"type": "text/plain", "value": "x".repeat(8192)}]});
    let mut c = env.h1_to("api.sendgrid.com").await;
    let over = send1(
        &mut c,
        json_request("api.sendgrid.com", "/v3/mail/send", &big),
    )
    .await;
    assert_eq!(over.status, 413);
    assert_eq!(over.header("x-af-code"), Some("AF-NET-042"));
    // Positive control: a host its rule names exactly is captured generically.
    let mut c = env.h1_to("hooks.named.test").await;
    let named = send1(
        &mut c,
        json_request("hooks.named.test", "/notify", &json!({"text": "hello"})),
    )
    .await;
    assert_eq!(named.status, 202, "{}", named.body);
    let inbox = env.sc.admin().wait_inbox("", 1).await;
    assert_eq!(
        inbox.len(),
        1,
        "only the generic capture is in the inbox: {inbox:#?}"
    );
    assert_eq!(inbox[0]["message"]["provider"], "request");
}

/// Messages matching `query`, waiting until there are at least `n`.
/// Run the system's curl through the proxy, trusting only `cafile`; its stdout and exit code.
fn curl(args: &[&str]) -> (String, i32) {
    let out = std::process::Command::new("curl")
        .args(["--silent", "--show-error", "--max-time", "10"])
        .args(args)
        .output()
        .expect("curl is installed (the CI script installs it)");
    (
        format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ),
        out.status.code().unwrap_or(-1),
    )
}

#[tokio::test]
async fn curl_trusting_only_the_environment_bundle_gets_mocked_answers_over_h1_and_h2() {
    let env = Env::start().await;
    let dir = TempDir::new("bundle");
    let bundle = dir.path().join("ca-bundle.pem");
    // As `af up` installs it: the system roots (when this machine has them) and the CA.
    let roots = std::fs::read_to_string("/etc/ssl/certs/ca-certificates.crt").unwrap_or_default();
    std::fs::write(&bundle, format!("{roots}{}", env.ca.cert_pem)).unwrap();
    let other = dir.path().join("other-ca.pem");
    std::fs::write(&other, TestCa::new().cert_pem).unwrap();
    let other = other.to_str().unwrap().to_owned();
    let proxy = format!("http://{}", env.sc.proxy());
    let bundle = bundle.to_str().unwrap().to_owned();
    let sc_proxy = proxy.clone();
    let (h1, h2, untrusted) = tokio::task::spawn_blocking(move || {
        let common = [
            "--proxy",
            sc_proxy.as_str(),
            "--write-out",
            "\n%{http_code} %{http_version}",
        ];
        let mut a: Vec<&str> = common.to_vec();
        a.extend([
            "--cacert",
            bundle.as_str(),
            "--http1.1",
            "https://api.github.com/user",
        ]);
        let mut b: Vec<&str> = common.to_vec();
        b.extend([
            "--cacert",
            bundle.as_str(),
            "--http2",
            "https://api.github.com/user",
        ]);
        // Negative control: curl trusting another CA, not the environment's.
        let mut c: Vec<&str> = common.to_vec();
        c.extend(["--cacert", other.as_str(), "https://api.github.com/user"]);
        (curl(&a), curl(&b), curl(&c))
    })
    .await
    .unwrap();
    assert_eq!(h1.1, 0, "{}", h1.0);
    assert!(h1.0.ends_with("200 1.1"), "{}", h1.0);
    assert!(h1.0.contains("\"login\""), "{}", h1.0);
    assert_eq!(h2.1, 0, "{}", h2.0);
    assert!(h2.0.ends_with("200 2"), "{}", h2.0);
    assert_ne!(untrusted.1, 0, "{}", untrusted.0);
    let rejected = env.sc.admin().wait_records("blocked=true", 1).await;
    assert_eq!(rejected[0]["code"], "AF-NET-045", "{rejected:#?}");
}
