//! The demo services' HTTPS client (`af_fixtures::demo`) against a real sidecar: through
//! CONNECT and through the transparent TLS listener, trusting exactly a CA bundle file, as
//! `fixtures/demo` runs it.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use af_fixtures::demo::{self, CallError};
use af_fixtures::test_resolver::TestResolver;
use common::intercept::TestCa;
use common::*;
use hyper::Method;
use tokio_rustls::TlsConnector;

const EGRESS: &str = r#"  default: block
  rules:
    - host: api.github.com
      mode: mock
    - host: api.sendgrid.com
      mode: capture
"#;

struct Env {
    _dns: TestResolver,
    ca: TestCa,
    sc: Sidecar,
    dir: TempDir,
}

impl Env {
    async fn start() -> Self {
        // Nothing here is dialled: every host is answered or refused in the sidecar.
        let dns = resolver(Vec::new()).await;
        let ca = TestCa::new();
        let mut setup = Setup::new(EGRESS, dns.addr);
        setup.extra = ca.tls_yaml(16, &[]);
        let sc = Sidecar::start(&setup).await;
        Self {
            _dns: dns,
            ca,
            sc,
            dir: TempDir::new("demo-bundle"),
        }
    }

    /// The demo's connector over a bundle file holding `pem`.
    fn trusting(&self, pem: &str) -> TlsConnector {
        let bundle = self.dir.path().join(format!("bundle-{}.pem", pem.len()));
        std::fs::write(&bundle, pem).unwrap();
        demo::connector(&bundle).unwrap()
    }

    /// The demo's connector as the runtime gives it: the environment CA in the bundle.
    fn environment(&self) -> TlsConnector {
        self.trusting(&self.ca.cert_pem)
    }
}

fn get(url: &str) -> hyper::Request<http_body_util::Full<bytes::Bytes>> {
    demo::request(Method::GET, url, None).unwrap()
}

#[tokio::test]
async fn a_mocked_host_answers_over_https_through_connect_and_through_the_transparent_listener() {
    let env = Env::start().await;
    let tls = env.environment();
    let url = "https://api.github.com/users/octocat";
    let through_proxy = demo::via_proxy(env.sc.proxy(), &tls, get(url))
        .await
        .unwrap();
    assert_eq!(through_proxy.status, 200);
    assert_eq!(through_proxy.header("x-af-decision"), Some("mock"));
    assert!(!through_proxy.tunnel_refused);
    let transparent = demo::direct(env.sc.tls(), &tls, get(url)).await.unwrap();
    assert_eq!(transparent.status, 200);
    assert_eq!(transparent.header("x-af-decision"), Some("mock"));
    let recs = env.sc.admin().wait_records("host=api.github.com", 4).await;
    let arrived: Vec<&str> = recs
        .iter()
        .filter(|r| r["via"] == "intercept")
        .map(|r| r["arrived"].as_str().unwrap())
        .collect();
    assert_eq!(arrived, ["proxy", "tls"], "{recs:#?}");
}

#[tokio::test]
async fn a_mail_posted_over_https_through_connect_is_captured_into_the_inbox() {
    let env = Env::start().await;
    let mail = r#"{"personalizations":[{"to":[{"email":"ada@example.test"}]}],"from":{"email":"hello@demo.example.test"},"subject":"Confirm","content":[{"type":"text/plain","value":"Your code is 482913."}]}"#;
    let post = demo::request(
        Method::POST,
        "https://api.sendgrid.com/v3/mail/send",
        Some(mail),
    )
    .unwrap();
    let sent = demo::via_proxy(env.sc.proxy(), &env.environment(), post)
        .await
        .unwrap();
    assert_eq!(sent.status, 202);
    assert_eq!(sent.header("x-af-decision"), Some("capture"));
    let inbox = env.sc.admin().wait_inbox("to=ada%40example.test", 1).await;
    assert_eq!(inbox[0]["message"]["code"], "482913", "{inbox:#?}");
}

#[tokio::test]
async fn a_blocked_host_is_refused_on_connect_inside_transparent_tls_and_in_plain_http() {
    let env = Env::start().await;
    let tls = env.environment();
    let connect = demo::via_proxy(env.sc.proxy(), &tls, get("https://example.com/"))
        .await
        .unwrap();
    assert_eq!(connect.status, 403);
    assert!(connect.tunnel_refused);
    assert_eq!(connect.header("x-af-decision"), Some("block"));
    let transparent = demo::direct(env.sc.tls(), &tls, get("https://example.org/"))
        .await
        .unwrap();
    assert_eq!(transparent.status, 403);
    assert!(!transparent.tunnel_refused);
    assert_eq!(transparent.header("x-af-code"), Some("AF-NET-010"));
    let metadata = demo::via_proxy(
        env.sc.proxy(),
        &tls,
        get("http://169.254.169.254/latest/meta-data/"),
    )
    .await
    .unwrap();
    assert_eq!(metadata.status, 403);
    assert!(!metadata.tunnel_refused);
    // Positive control: the same client and sidecar reach a mocked host.
    let mocked = demo::via_proxy(env.sc.proxy(), &tls, get("https://api.github.com/user"))
        .await
        .unwrap();
    assert_eq!(mocked.status, 200);
}

#[tokio::test]
async fn a_bundle_without_the_environment_ca_fails_the_handshake_on_both_paths() {
    let env = Env::start().await;
    let stranger = env.trusting(&TestCa::new().cert_pem);
    let url = "https://api.github.com/users/octocat";
    for refused in [
        demo::via_proxy(env.sc.proxy(), &stranger, get(url)).await,
        demo::direct(env.sc.tls(), &stranger, get(url)).await,
    ] {
        assert!(matches!(refused, Err(CallError::Io(_))), "{refused:?}");
    }
    // Positive control: the environment's bundle verifies the same sidecar.
    let trusted = demo::direct(env.sc.tls(), &env.environment(), get(url))
        .await
        .unwrap();
    assert_eq!(trusted.status, 200);
}

#[test]
fn a_bundle_with_no_certificate_is_refused() {
    let dir = TempDir::new("demo-empty-bundle");
    let bundle = dir.path().join("empty.pem");
    std::fs::write(&bundle, "not a certificate\n").unwrap();
    assert!(matches!(
        demo::connector(&bundle),
        Err(CallError::NoRoots(_))
    ));
}
