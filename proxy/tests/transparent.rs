//! The transparent listeners: HTTP decided on `Host` and the listener's port, every request
//! on a keep-alive connection on its own; TLS decided on the SNI of a real rustls client.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::sync::Arc;
use std::time::Duration;

use af_fixtures::upstream::{Replies, Reply, Upstream};
use common::*;
use http_body_util::Empty;
use hyper::Request;
use rustls::pki_types::{CertificateDer, ServerName};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;

/// The allowed host on the upstream's port, which the listener decides on; the block covers
/// every port.
const RULES: &[(&str, &str)] = &[
    ("api.allowed.test:{port}", "allow"),
    ("api.blocked.test", "block"),
];

fn names() -> Vec<(&'static str, Vec<std::net::IpAddr>)> {
    ["api.allowed.test", "api.blocked.test"]
        .iter()
        .map(|n| (*n, vec![upstream_ip()]))
        .collect()
}

#[tokio::test]
async fn transparent_http_decides_on_host_and_forwards_to_the_listener_port_not_the_host_port() {
    let up = hello_upstream().await;
    let dns = resolver(names()).await;
    let mut setup = Setup::new(&egress_on(up.addr().port(), RULES), dns.addr);
    setup.http_port = up.addr().port();
    let sc = Sidecar::start(&setup).await;
    let mut c = connect(sc.http()).await;
    // The Host header names port 1; the listener's advertised port wins (the rule names it:
    // decided on port 1, the request would fall to the default).
    let req = Request::get("/path?x=1")
        .header("host", "API.Allowed.test.:1")
        .body(Empty::new())
        .unwrap();
    let got = send(&mut c, req).await;
    assert_eq!(got.status, 200, "{}", got.body);
    assert_eq!(got.body, "hello");
    assert_eq!(up.seen()[0].path, "/path?x=1");
    let recs = sc.admin().wait_records("host=api.allowed.test", 1).await;
    assert_eq!(recs[0]["via"], "transparent");
    assert_eq!(recs[0]["port"], up.addr().port());
    assert_eq!(recs[0]["host"], "api.allowed.test");
}

#[tokio::test]
async fn a_keep_alive_connection_switching_host_is_decided_per_request() {
    let up = hello_upstream().await;
    let dns = resolver(names()).await;
    let mut setup = Setup::new(&egress_on(up.addr().port(), RULES), dns.addr);
    setup.http_port = up.addr().port();
    let sc = Sidecar::start(&setup).await;
    let mut c = connect(sc.http()).await;
    let mut statuses = Vec::new();
    for host in [
        "api.allowed.test",
        "api.blocked.test",
        "api.allowed.test",
        "api.blocked.test",
    ] {
        let req = Request::get("/")
            .header("host", host)
            .body(Empty::new())
            .unwrap();
        statuses.push(send(&mut c, req).await.status);
    }
    assert_eq!(statuses, [200, 403, 200, 403]);
    assert_eq!(
        up.seen().len(),
        2,
        "only the allowed requests reached the upstream"
    );
    let recs = sc.admin().wait_records("", 4).await;
    let hosts: Vec<(&str, bool)> = recs
        .iter()
        .map(|r| (r["host"].as_str().unwrap(), r["allowed"].as_bool().unwrap()))
        .collect();
    assert_eq!(
        hosts,
        [
            ("api.allowed.test", true),
            ("api.blocked.test", false),
            ("api.allowed.test", true),
            ("api.blocked.test", false)
        ]
    );
    // All four came over one client connection.
    let clients: std::collections::HashSet<&str> =
        recs.iter().map(|r| r["client"].as_str().unwrap()).collect();
    assert_eq!(clients.len(), 1);
}

async fn tls_setup() -> (af_fixtures::test_resolver::TestResolver, Upstream, Sidecar) {
    let up = Upstream::tls(
        std::net::SocketAddr::from((UPSTREAM_IP, 0)),
        &["api.allowed.test", "api.blocked.test"],
        Replies::new(Reply::ok("secret hello")),
    )
    .await
    .unwrap();
    let dns = resolver(names()).await;
    let mut setup = Setup::new(&egress_on(up.addr().port(), RULES), dns.addr);
    setup.tls_port = up.addr().port();
    let sc = Sidecar::start(&setup).await;
    (dns, up, sc)
}

fn tls_connector(cert: Option<CertificateDer<'static>>) -> TlsConnector {
    let mut roots = rustls::RootCertStore::empty();
    if let Some(cert) = cert {
        roots.add(cert).unwrap();
    }
    let config = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_root_certificates(roots)
    .with_no_client_auth();
    TlsConnector::from(Arc::new(config))
}

#[tokio::test]
async fn transparent_tls_tunnels_an_allowed_sni_untouched_to_the_upstream() {
    let (_dns, up, sc) = tls_setup().await;
    let tcp = TcpStream::connect(sc.tls()).await.unwrap();
    let name = ServerName::try_from("api.allowed.test").unwrap();
    // The handshake completes against the upstream's own certificate: the bytes were untouched.
    let mut tls = tls_connector(up.certificate())
        .connect(name, tcp)
        .await
        .unwrap();
    tls.write_all(b"GET /over-tls HTTP/1.1\r\nHost: api.allowed.test\r\nConnection: close\r\n\r\n")
        .await
        .unwrap();
    let mut out = String::new();
    let _ = tokio::time::timeout(Duration::from_secs(5), tls.read_to_string(&mut out))
        .await
        .unwrap();
    assert!(out.starts_with("HTTP/1.1 200"), "{out}");
    assert!(out.ends_with("secret hello"), "{out}");
    assert_eq!(up.seen()[0].path, "/over-tls");
    drop(tls);
    let recs = sc.admin().wait_records("host=api.allowed.test", 1).await;
    let r = &recs[0];
    assert_eq!(r["via"], "tls");
    assert_eq!(r["tls"], true);
    assert_eq!(r["allowed"], true);
    assert_eq!(r["port"], up.addr().port());
    assert!(r["bytes_up"].as_u64().unwrap() > 100, "{r}");
}

#[tokio::test]
async fn transparent_tls_to_a_blocked_sni_is_closed_and_journaled() {
    let (_dns, up, sc) = tls_setup().await;
    let tcp = TcpStream::connect(sc.tls()).await.unwrap();
    let name = ServerName::try_from("api.blocked.test").unwrap();
    let result = tls_connector(up.certificate()).connect(name, tcp).await;
    assert!(result.is_err(), "the handshake must not complete");
    assert!(up.seen().is_empty());
    let recs = sc.admin().wait_records("blocked=true", 1).await;
    assert_eq!(recs[0]["host"], "api.blocked.test");
    assert_eq!(recs[0]["code"], "AF-NET-010");
    assert_eq!(recs[0]["via"], "tls");
    // Positive control through the same listener.
    let tcp = TcpStream::connect(sc.tls()).await.unwrap();
    let name = ServerName::try_from("api.allowed.test").unwrap();
    assert!(
        tls_connector(up.certificate())
            .connect(name, tcp)
            .await
            .is_ok()
    );
}

#[tokio::test]
async fn tls_without_sni_is_refused_and_journaled_with_net_015() {
    let (_dns, up, sc) = tls_setup().await;
    let tcp = TcpStream::connect(sc.tls()).await.unwrap();
    // rustls sends no SNI for an IP address.
    let name = ServerName::IpAddress(std::net::IpAddr::from(UPSTREAM_IP).into());
    let result = tls_connector(up.certificate()).connect(name, tcp).await;
    assert!(result.is_err());
    let recs = sc.admin().wait_records("blocked=true", 1).await;
    assert_eq!(recs[0]["reason"], "no_sni");
    assert_eq!(recs[0]["code"], "AF-NET-015");
    assert!(up.seen().is_empty());
}

#[tokio::test]
async fn a_tls_listener_connection_that_is_not_tls_is_closed_and_journaled() {
    let (_dns, _up, sc) = tls_setup().await;
    let out = raw(
        sc.tls(),
        b"GET / HTTP/1.1\r\nHost: api.allowed.test\r\n\r\n",
        Duration::from_secs(5),
    )
    .await;
    assert!(out.is_empty(), "{out}");
    let recs = sc.admin().wait_records("blocked=true", 1).await;
    assert_eq!(recs[0]["reason"], "not_tls");
}

#[tokio::test]
async fn a_transparent_request_naming_two_hosts_is_refused_and_the_upstream_gets_only_the_decided_one()
 {
    let up = hello_upstream().await;
    let dns = resolver(names()).await;
    let mut setup = Setup::new(&egress_on(up.addr().port(), RULES), dns.addr);
    setup.http_port = up.addr().port();
    let sc = Sidecar::start(&setup).await;
    let wait = Duration::from_secs(2);
    for (request, why) in [
        (
            "GET / HTTP/1.1\r\nHost: api.allowed.test\r\nHost: api.blocked.test\r\nConnection: close\r\n\r\n",
            "two Host headers",
        ),
        (
            "GET http://api.allowed.test/ HTTP/1.1\r\nHost: api.blocked.test\r\nConnection: close\r\n\r\n",
            "an absolute URL and a Host that disagree",
        ),
    ] {
        let answer = raw(sc.http(), request.as_bytes(), wait).await;
        assert!(answer.starts_with("HTTP/1.1 400"), "{why}: {answer}");
        assert!(answer.contains("AF-NET-017"), "{why}: {answer}");
    }
    assert!(up.seen().is_empty(), "nothing reached the upstream");
    // Positive control: one Host is forwarded, and `Connection: host` cannot strip it.
    let answer = raw(
        sc.http(),
        b"GET / HTTP/1.1\r\nHost: api.allowed.test\r\nConnection: close, host\r\n\r\n",
        wait,
    )
    .await;
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert_eq!(up.seen()[0].host.as_deref(), Some("api.allowed.test"));
}
