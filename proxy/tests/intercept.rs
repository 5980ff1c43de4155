//! TLS interception with real rustls clients: through CONNECT and the transparent TLS
//! listener, HTTP/1.1 and HTTP/2, each request decided on its own host; sandbox credentials;
//! the live-credential tripwire; smuggling shapes; clients that refuse the certificate.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::net::SocketAddr;
use std::time::Duration;

use af_fixtures::test_resolver::TestResolver;
use af_fixtures::upstream::{Replies, Reply, Upstream};
use common::intercept::{
    TestCa, client, h1, h2, request, send1, send2, tls_direct, tls_via_connect,
};
use common::*;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const H2: &[u8] = b"h2";
const H1: &[u8] = b"http/1.1";

/// Each rule that lets requests through names the upstream's port ([`on_port`]); the block
/// covers every port.
const EGRESS: &str = r#"  default: block
  rules:
    - host: api.paths.test:{port}
      mode: allow
      paths: [/v1]
    - host: api.open.test:{port}
      mode: allow
    - host: api.sandbox.test:{port}
      mode: sandbox
      credential: SANDBOX_KEY
    - host: api.nokey.test:{port}
      mode: sandbox
      credential: MISSING_KEY
    - host: api.blocked.test
      mode: block
"#;

const NAMES: [&str; 5] = [
    "api.paths.test",
    "api.open.test",
    "api.sandbox.test",
    "api.nokey.test",
    "api.blocked.test",
];

struct Env {
    _dns: TestResolver,
    up: Upstream,
    ca: TestCa,
    sc: Sidecar,
}

impl Env {
    async fn start(leaf_cache: usize) -> Self {
        let up = Upstream::tls(
            SocketAddr::from((UPSTREAM_IP, 0)),
            &NAMES,
            Replies::new(Reply::ok("upstream says hi")),
        )
        .await
        .unwrap();
        let table = NAMES.iter().map(|n| (*n, vec![upstream_ip()])).collect();
        let dns = resolver(table).await;
        let ca = TestCa::new();
        let mut setup = Setup::new(&on_port(EGRESS, up.addr().port()), dns.addr);
        setup.tls_port = up.addr().port();
        setup.extra = format!(
            "{}modes:\n  credentials:\n    SANDBOX_KEY: sk_test_sandbox_key\n",
            ca.tls_yaml(leaf_cache, &[up.certificate().unwrap()])
        );
        let sc = Sidecar::start(&setup).await;
        Self {
            _dns: dns,
            up,
            ca,
            sc,
        }
    }

    /// An HTTP/1.1 connection to `host` through the transparent TLS listener.
    async fn h1_direct(
        &self,
        host: &str,
    ) -> hyper::client::conn::http1::SendRequest<http_body_util::Full<bytes::Bytes>> {
        let connector = client(&[&self.ca.cert_der], &[H1]);
        let tls = tls_direct(self.sc.tls(), host, &connector).await.unwrap();
        h1(tls).await
    }

    fn authority(&self, host: &str) -> String {
        format!("{host}:{}", self.up.addr().port())
    }

    async fn h1_to(
        &self,
        host: &str,
    ) -> hyper::client::conn::http1::SendRequest<http_body_util::Full<bytes::Bytes>> {
        let connector = client(&[&self.ca.cert_der], &[H1]);
        let tls = tls_via_connect(self.sc.proxy(), &self.authority(host), host, &connector)
            .await
            .unwrap();
        h1(tls).await
    }
}

#[tokio::test]
async fn a_path_rule_is_decided_per_request_inside_an_intercepted_connect() {
    let env = Env::start(16).await;
    let mut c = env.h1_to("api.paths.test").await;
    let allowed = send1(
        &mut c,
        request("GET", "api.paths.test", "/v1/items?x=1", ""),
    )
    .await;
    assert_eq!(allowed.status, 200, "{}", allowed.body);
    assert_eq!(allowed.body, "upstream says hi");
    let refused = send1(&mut c, request("GET", "api.paths.test", "/admin", "")).await;
    assert_eq!(refused.status, 403);
    assert_eq!(refused.header("x-af-code"), Some("AF-NET-010"));
    // The upstream saw the allowed request only, over TLS with its certificate verified.
    let seen = env.up.seen();
    assert_eq!(seen.len(), 1);
    assert_eq!(seen[0].path, "/v1/items?x=1");
    let recs = env.sc.admin().wait_records("host=api.paths.test", 2).await;
    assert!(
        recs.iter()
            .all(|r| r["via"] == "intercept" && r["tls"] == true)
    );
    assert_eq!(recs[0]["path"], "/v1/items?x=1");
    assert_eq!(recs[0]["allowed"], true);
    assert_eq!(recs[1]["path"], "/admin");
    assert_eq!(recs[1]["allowed"], false);
}

#[tokio::test]
async fn switching_host_inside_an_opened_connection_to_a_blocked_host_is_refused() {
    let env = Env::start(16).await;
    let mut c = env.h1_to("api.paths.test").await;
    // Positive control on the same connection: the connection's own host is served.
    let ok = send1(&mut c, request("GET", "api.paths.test", "/v1/a", "")).await;
    assert_eq!(ok.status, 200);
    let switched = send1(&mut c, request("GET", "api.blocked.test", "/v1/a", "")).await;
    assert_eq!(switched.status, 403);
    assert_eq!(switched.header("x-af-decision"), Some("block"));
    assert_eq!(env.up.seen().len(), 1, "the blocked request never left");
    let recs = env
        .sc
        .admin()
        .wait_records("host=api.blocked.test", 1)
        .await;
    assert_eq!(recs[0]["via"], "intercept");
    assert_eq!(recs[0]["code"], "AF-NET-010");
}

#[tokio::test]
async fn http2_is_negotiated_and_each_stream_is_decided() {
    let env = Env::start(16).await;
    let connector = client(&[&env.ca.cert_der], &[H2, H1]);
    let tls = tls_via_connect(
        env.sc.proxy(),
        &env.authority("api.paths.test"),
        "api.paths.test",
        &connector,
    )
    .await
    .unwrap();
    assert_eq!(tls.get_ref().1.alpn_protocol(), Some(H2));
    let mut c = h2(tls).await;
    let uri = |path: &str| format!("https://{}{path}", env.authority("api.paths.test"));
    let req = |path: &str| {
        hyper::Request::get(uri(path))
            .body(http_body_util::Full::new(bytes::Bytes::new()))
            .unwrap()
    };
    let ok = send2(&mut c, req("/v1/h2")).await;
    assert_eq!(ok.status, 200, "{}", ok.body);
    let no = send2(&mut c, req("/elsewhere")).await;
    assert_eq!(no.status, 403);
    assert_eq!(env.up.seen().len(), 1);
    assert_eq!(env.up.seen()[0].path, "/v1/h2");
}

#[tokio::test]
async fn the_transparent_tls_listener_intercepts_hosts_that_need_it() {
    let env = Env::start(16).await;
    let mut c = env.h1_direct("api.paths.test").await;
    let ok = send1(&mut c, request("GET", "api.paths.test", "/v1/t", "")).await;
    assert_eq!(ok.status, 200, "{}", ok.body);
    let no = send1(&mut c, request("POST", "api.paths.test", "/v2", "x")).await;
    assert_eq!(no.status, 403);
    // A plain allow host is still tunnelled untouched: the client sees the upstream's own
    // certificate, not one from the environment CA.
    let upstream_only = client(&[&env.up.certificate().unwrap()], &[H1]);
    let tls = tls_direct(env.sc.tls(), "api.open.test", &upstream_only).await;
    assert!(tls.is_ok(), "allow host is tunnelled: {:?}", tls.err());
}

#[tokio::test]
async fn sandbox_swaps_in_the_test_credential_and_refuses_without_one() {
    let env = Env::start(16).await;
    let mut c = env.h1_to("api.sandbox.test").await;
    let mut req = request(
        "POST",
        "api.sandbox.test",
        "/v1/charges?expand=customer&api_key=the_services_own",
        "amount=100",
    );
    req.headers_mut().insert(
        "authorization",
        "Bearer sk_test_the_services_own".parse().unwrap(),
    );
    let got = send1(&mut c, req).await;
    assert_eq!(got.status, 200, "{}", got.body);
    let seen = env.up.seen();
    assert_eq!(seen.len(), 1);
    assert_eq!(
        seen[0].header("authorization"),
        Some("Bearer sk_test_sandbox_key")
    );
    assert_eq!(
        seen[0].path, "/v1/charges?expand=customer",
        "a credential in the query is not forwarded either"
    );

    let mut c = env.h1_to("api.nokey.test").await;
    let mut req = request("GET", "api.nokey.test", "/v1/x", "");
    req.headers_mut().insert(
        "authorization",
        "Bearer sk_test_the_services_own".parse().unwrap(),
    );
    let refused = send1(&mut c, req).await;
    assert_eq!(refused.status, 403);
    assert_eq!(refused.header("x-af-code"), Some("AF-NET-044"));
    assert!(refused.body.contains("MISSING_KEY"), "{}", refused.body);
    assert_eq!(
        env.up.seen().len(),
        1,
        "nothing forwarded without a credential"
    );
}

#[tokio::test]
async fn sandbox_swaps_the_credential_through_the_transparent_listener_too() {
    let env = Env::start(16).await;
    let mut req = request("GET", "api.sandbox.test", "/v1/balance", "");
    req.headers_mut().insert(
        "authorization",
        "Bearer sk_test_the_services_own".parse().unwrap(),
    );
    let got = send1(&mut env.h1_direct("api.sandbox.test").await, req).await;
    assert_eq!(got.status, 200, "{}", got.body);
    let seen = env.up.seen();
    assert_eq!(seen.len(), 1);
    assert_eq!(
        seen[0].header("authorization"),
        Some("Bearer sk_test_sandbox_key")
    );
}

#[tokio::test]
async fn a_live_key_is_refused_on_every_path_and_never_recorded() {
    let env = Env::start(16).await;
    let live = "sk_live_51NotARealKeyButLooksLive";
    // Inside interception, in a header.
    let mut c = env.h1_to("api.paths.test").await;
    let mut req = request("GET", "api.paths.test", "/v1/x", "");
    req.headers_mut()
        .insert("authorization", format!("Bearer {live}").parse().unwrap());
    let got = send1(&mut c, req).await;
    assert_eq!(got.status, 403);
    assert_eq!(got.header("x-af-code"), Some("AF-NET-043"));
    assert!(!got.body.contains(live));
    // In the URL of a plain proxied request to an allowed host.
    let url = format!(
        "http://api.open.test:{}/pay?with={live}",
        env.up.addr().port()
    );
    let got = proxy_get(env.sc.proxy(), &url).await;
    assert_eq!(got.status, 403);
    assert_eq!(got.header("x-af-code"), Some("AF-NET-043"));
    // Positive control: the same request with a test key goes out.
    let mut req = request("GET", "api.paths.test", "/v1/x", "");
    req.headers_mut()
        .insert("authorization", "Bearer sk_test_51Fine".parse().unwrap());
    assert_eq!(send1(&mut c, req).await.status, 200);
    assert_eq!(env.up.seen().len(), 1);
    let recs = env.sc.admin().wait_records("", 3).await;
    let journal = serde_json::to_string(&recs).unwrap();
    assert!(!journal.contains("NotARealKey"), "{journal}");
    assert!(journal.contains("sk_live_[redacted]"), "{journal}");
}

#[tokio::test]
async fn a_malformed_head_inside_an_opened_connection_gets_400_net_017_for_its_host() {
    let env = Env::start(16).await;
    let connector = client(&[&env.ca.cert_der], &[H1]);
    let mut tls = tls_via_connect(
        env.sc.proxy(),
        &env.authority("api.paths.test"),
        "api.paths.test",
        &connector,
    )
    .await
    .unwrap();
    // A good request, then a head with a broken header line on the same connection.
    tls.write_all(b"GET /v1/ok HTTP/1.1\r\nHost: api.paths.test\r\n\r\nGET /v1/x HTTP/1.1\r\nHost api.paths.test\r\n\r\n")
        .await
        .unwrap();
    let mut out = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(3), tls.read_to_end(&mut out)).await;
    let out = String::from_utf8_lossy(&out);
    assert!(out.starts_with("HTTP/1.1 200 OK"), "{out}");
    let refused = &out[out.find("upstream says hi").unwrap() + "upstream says hi".len()..];
    assert!(refused.starts_with("HTTP/1.1 400 Bad Request"), "{out}");
    assert!(refused.contains("x-af-code: AF-NET-017"), "{out}");
    assert!(
        refused.contains("\r\n\r\nAF-NET-017 The request head could not be read"),
        "{out}"
    );
    assert_eq!(env.up.seen().len(), 1, "the good request was forwarded");
    let recs = env.sc.admin().wait_records("host=api.paths.test", 2).await;
    assert_eq!(recs[0]["allowed"], true, "{recs:#?}");
    assert_eq!(recs[1]["via"], "intercept");
    assert_eq!(recs[1]["reason"], "bad_request");
    assert_eq!(recs[1]["code"], "AF-NET-017");
}

#[tokio::test]
async fn a_smuggled_request_never_reaches_the_upstream() {
    let env = Env::start(16).await;
    let connector = client(&[&env.ca.cert_der], &[H1]);
    let open = || async {
        tls_via_connect(
            env.sc.proxy(),
            &env.authority("api.paths.test"),
            "api.paths.test",
            &connector,
        )
        .await
        .unwrap()
    };
    // Content-Length says the body is "0\r\n\r\nGET /admin ..."; chunked says it ends at
    // "0\r\n\r\n". The head is read by its chunked encoding alone, the answer closes the
    // connection (RFC 9112 section 6.3), and the hidden GET /admin is never read.
    let smuggled = "GET /admin HTTP/1.1\r\nHost: api.paths.test\r\nConnection: close\r\n\r\n";
    let head = format!(
        "POST /v1/x HTTP/1.1\r\nHost: api.paths.test\r\nContent-Length: {}\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n{smuggled}",
        5 + smuggled.len()
    );
    let mut tls = open().await;
    tls.write_all(head.as_bytes()).await.unwrap();
    let mut out = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(3), tls.read_to_end(&mut out)).await;
    let out = String::from_utf8_lossy(&out);
    let statuses: Vec<&str> = out.lines().filter(|l| l.starts_with("HTTP/1.1 ")).collect();
    assert_eq!(statuses, ["HTTP/1.1 200 OK"], "{out}");
    assert!(out.contains("connection: close"), "{out}");
    let seen: Vec<String> = env.up.seen().into_iter().map(|s| s.path).collect();
    assert_eq!(
        seen,
        ["/v1/x"],
        "the smuggled request never reached the upstream"
    );
    let recs = env.sc.admin().wait_records("host=api.paths.test", 1).await;
    assert!(recs.iter().all(|r| r["path"] != "/admin"), "{recs:#?}");

    // Two different lengths cannot be framed at all.
    let mut tls = open().await;
    tls.write_all(b"POST /v1/y HTTP/1.1\r\nHost: api.paths.test\r\nContent-Length: 4\r\nContent-Length: 40\r\n\r\nbody")
        .await
        .unwrap();
    let mut out = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(3), tls.read_to_end(&mut out)).await;
    let out = String::from_utf8_lossy(&out);
    assert!(out.starts_with("HTTP/1.1 400"), "{out}");
    assert_eq!(env.up.seen().len(), 1);
}

#[tokio::test]
async fn a_client_that_rejects_the_certificate_is_journaled_with_advice() {
    let env = Env::start(16).await;
    // Trusts only the upstream's own certificate, as a pinning client would.
    let pinned = client(&[&env.up.certificate().unwrap()], &[H1]);
    let failed = tls_via_connect(
        env.sc.proxy(),
        &env.authority("api.paths.test"),
        "api.paths.test",
        &pinned,
    )
    .await;
    assert!(failed.is_err());
    let recs = env.sc.admin().wait_records("host=api.paths.test", 1).await;
    assert_eq!(recs[0]["code"], "AF-NET-045", "{recs:#?}");
    assert_eq!(recs[0]["reason"], "client_rejected_certificate");
    assert_eq!(recs[0]["outcome"], "handshake_failed", "{recs:#?}");
    // The client saw 200 for its CONNECT; the refusal came inside TLS.
    assert_eq!(recs[0]["status"], 200, "{recs:#?}");
    // Positive control: trusting the environment CA, the same host opens.
    let trusting = client(&[&env.ca.cert_der], &[H1]);
    let tls = tls_via_connect(
        env.sc.proxy(),
        &env.authority("api.paths.test"),
        "api.paths.test",
        &trusting,
    )
    .await;
    assert!(tls.is_ok());
}

#[tokio::test]
async fn the_leaf_cache_is_bounded_and_counts_evictions() {
    let env = Env::start(2).await;
    let connector = client(&[&env.ca.cert_der], &[H1]);
    for host in [
        "api.paths.test",
        "api.sandbox.test",
        "api.nokey.test",
        "api.paths.test",
    ] {
        let tls = tls_via_connect(env.sc.proxy(), &env.authority(host), host, &connector).await;
        assert!(tls.is_ok(), "{host}");
    }
    let admin = env.sc.admin();
    assert_eq!(admin.metric("af_proxy_tls_leaves_minted_total").await, 4);
    assert_eq!(
        admin
            .metric("af_proxy_tls_leaf_cache_evictions_total")
            .await,
        2
    );
}

#[tokio::test]
async fn a_request_through_connect_and_through_transparent_tls_read_the_same_but_for_how_they_arrived()
 {
    let env = Env::start(16).await;
    let mut via_connect = env.h1_to("api.paths.test").await;
    let ok = send1(
        &mut via_connect,
        request("GET", "api.paths.test", "/v1/same", ""),
    )
    .await;
    assert_eq!(ok.status, 200, "{}", ok.body);
    drop(via_connect);
    let mut direct = env.h1_direct("api.paths.test").await;
    let ok = send1(
        &mut direct,
        request("GET", "api.paths.test", "/v1/same", ""),
    )
    .await;
    assert_eq!(ok.status, 200, "{}", ok.body);
    drop(direct);
    // Two requests and the two connections they came on, each closed.
    let recs = env.sc.admin().wait_records("host=api.paths.test", 4).await;
    let requests: Vec<&serde_json::Value> =
        recs.iter().filter(|r| r["via"] == "intercept").collect();
    assert_eq!(requests.len(), 2, "{recs:#?}");
    assert_eq!(requests[0]["arrived"], "proxy");
    assert_eq!(requests[1]["arrived"], "tls");
    let same = |r: &serde_json::Value| {
        let mut r = r.clone();
        for field in ["arrived", "client", "duration_ms"] {
            r.as_object_mut().unwrap().remove(field);
        }
        for field in ["seq", "at"] {
            r.as_object_mut().unwrap().remove(field);
        }
        r
    };
    assert_eq!(same(requests[0]), same(requests[1]));
    let connections: Vec<(&str, &str, &serde_json::Value)> = recs
        .iter()
        .filter(|r| r["intercepted"] == true)
        .map(|r| {
            (
                r["via"].as_str().unwrap(),
                r["method"].as_str().unwrap(),
                &r["status"],
            )
        })
        .collect();
    assert_eq!(
        connections,
        [
            ("proxy", "CONNECT", &serde_json::json!(200)),
            ("tls", "", &serde_json::Value::Null)
        ],
        "{recs:#?}"
    );
    // Positive control: a plain tunnel is not an opened connection.
    let upstream_only = client(&[&env.up.certificate().unwrap()], &[H1]);
    drop(
        tls_direct(env.sc.tls(), "api.open.test", &upstream_only)
            .await
            .unwrap(),
    );
    let open = env.sc.admin().wait_records("host=api.open.test", 1).await;
    assert!(open[0].get("intercepted").is_none(), "{open:#?}");
    assert_eq!(open[0]["outcome"], "tunnel", "{open:#?}");
}

#[tokio::test]
async fn a_transparent_tls_client_of_a_blocked_host_reads_its_coded_403() {
    let env = Env::start(16).await;
    let mut c = env.h1_direct("api.blocked.test").await;
    let got = send1(&mut c, request("GET", "api.blocked.test", "/x", "")).await;
    assert_eq!(got.status, 403, "{}", got.body);
    assert_eq!(got.header("x-af-code"), Some("AF-NET-010"));
    assert!(got.body.contains("Next:"), "{}", got.body);
    let recs = env
        .sc
        .admin()
        .wait_records("host=api.blocked.test", 1)
        .await;
    assert_eq!(recs[0]["via"], "tls");
    assert_eq!(recs[0]["code"], "AF-NET-010");
    assert_eq!(recs[0]["status"], 403, "{recs:#?}");
    assert_eq!(env.up.seen().len(), 0);
    // A client that refuses the certificate is closed, and that is journaled.
    let pinned = client(&[&env.up.certificate().unwrap()], &[H1]);
    assert!(
        tls_direct(env.sc.tls(), "api.blocked.test", &pinned)
            .await
            .is_err()
    );
    let recs = env
        .sc
        .admin()
        .wait_records("host=api.blocked.test", 2)
        .await;
    assert_eq!(recs[1]["code"], "AF-NET-010");
    assert!(recs[1]["status"].is_null(), "{recs:#?}");
    let error = recs[1]["error"].as_str().unwrap();
    assert!(
        error.contains("refused the environment's certificate"),
        "{error}"
    );
}
