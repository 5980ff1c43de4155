//! HTTP/2 with prior knowledge (h2c) on the cleartext listeners: the transparent HTTP
//! listener decides each stream on its `:authority`, the proxy port decides an absolute
//! `:scheme`/`:authority` as it decides HTTP/1.1's absolute form; every stream is journaled,
//! and a connection that opens no stream is counted.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::net::SocketAddr;
use std::time::Duration;

use bytes::Bytes;
use common::*;
use http_body_util::Empty;
use hyper::Request;
use hyper::client::conn::http2::SendRequest;
use hyper_util::rt::{TokioExecutor, TokioIo};
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;

/// The allowed host on the upstream's port, which the listener decides on; the block covers
/// every port.
const RULES: &[(&str, &str)] = &[
    ("api.allowed.test:{port}", "allow"),
    ("api.blocked.test", "block"),
];

async fn start() -> (
    af_fixtures::test_resolver::TestResolver,
    af_fixtures::upstream::Upstream,
    Sidecar,
) {
    let up = hello_upstream().await;
    let table = ["api.allowed.test", "api.blocked.test"]
        .iter()
        .map(|n| (*n, vec![upstream_ip()]))
        .collect();
    let dns = resolver(table).await;
    let mut setup = Setup::new(&egress_on(up.addr().port(), RULES), dns.addr);
    setup.http_port = up.addr().port();
    let sc = Sidecar::start(&setup).await;
    (dns, up, sc)
}

/// An HTTP/2 client that speaks it from the first byte, as `curl --http2-prior-knowledge`.
async fn h2c(addr: SocketAddr) -> SendRequest<Empty<Bytes>> {
    let stream = TcpStream::connect(addr).await.unwrap();
    let (send, conn) =
        hyper::client::conn::http2::handshake(TokioExecutor::new(), TokioIo::new(stream))
            .await
            .unwrap();
    tokio::spawn(conn);
    send
}

async fn get(send: &mut SendRequest<Empty<Bytes>>, uri: &str) -> Got {
    send.ready().await.unwrap();
    let req = Request::get(uri).body(Empty::new()).unwrap();
    Got::read(send.send_request(req).await.unwrap()).await
}

#[tokio::test]
async fn an_h2c_client_on_the_transparent_listener_is_decided_per_stream_and_journaled() {
    let (_dns, up, sc) = start().await;
    let mut c = h2c(sc.http()).await;
    let ok = get(&mut c, "http://api.allowed.test/h2c?x=1").await;
    assert_eq!(ok.status, 200, "{}", ok.body);
    assert_eq!(ok.body, "hello");
    let no = get(&mut c, "http://api.blocked.test/secret").await;
    assert_eq!(no.status, 403, "{}", no.body);
    assert_eq!(no.header("x-af-code"), Some("AF-NET-010"));
    assert!(no.body.contains("Next:"), "{}", no.body);
    // Only the allowed stream left, to the listener's port, as HTTP/1.1.
    let seen = up.seen();
    assert_eq!(seen.len(), 1);
    assert_eq!(seen[0].path, "/h2c?x=1");
    let recs = sc.admin().wait_records("", 2).await;
    let read: Vec<(&str, &str, &str, bool)> = recs
        .iter()
        .map(|r| {
            (
                r["via"].as_str().unwrap(),
                r["host"].as_str().unwrap(),
                r["method"].as_str().unwrap(),
                r["allowed"].as_bool().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        read,
        [
            ("transparent", "api.allowed.test", "GET", true),
            ("transparent", "api.blocked.test", "GET", false)
        ]
    );
    assert_eq!(recs[0]["port"], up.addr().port());
    assert_eq!(recs[1]["code"], "AF-NET-010");
}

#[tokio::test]
async fn an_h2c_client_on_the_proxy_port_is_decided_as_the_absolute_form() {
    let (_dns, up, sc) = start().await;
    let mut c = h2c(sc.proxy()).await;
    let port = up.addr().port();
    let ok = get(&mut c, &format!("http://api.allowed.test:{port}/via-proxy")).await;
    assert_eq!(ok.status, 200, "{}", ok.body);
    let no = get(&mut c, &format!("http://api.blocked.test:{port}/")).await;
    assert_eq!(no.status, 403, "{}", no.body);
    assert_eq!(no.header("x-af-code"), Some("AF-NET-010"));
    assert_eq!(up.seen().len(), 1);
    assert_eq!(up.seen()[0].path, "/via-proxy");
    let recs = sc.admin().wait_records("", 2).await;
    assert_eq!(recs[0]["via"], "proxy");
    assert_eq!(recs[0]["host"], "api.allowed.test");
    assert_eq!(recs[0]["port"], port);
    assert_eq!(recs[0]["allowed"], true);
    assert_eq!(recs[1]["host"], "api.blocked.test");
    assert_eq!(recs[1]["code"], "AF-NET-010");
}

#[tokio::test]
async fn an_h2c_connection_that_opens_no_stream_is_counted_and_http1_still_works() {
    let (_dns, _up, sc) = start().await;
    let admin = sc.admin();
    let before = admin
        .metric("af_proxy_closed_unanswered_total{reason=\"incomplete\"}")
        .await;
    for addr in [sc.http(), sc.proxy()] {
        let mut s = TcpStream::connect(addr).await.unwrap();
        s.write_all(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n")
            .await
            .unwrap();
        s.write_all(&[0, 0, 0, 4, 0, 0, 0, 0, 0]).await.unwrap();
        drop(s);
    }
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let now = admin
            .metric("af_proxy_closed_unanswered_total{reason=\"incomplete\"}")
            .await;
        if now >= before + 2 {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "counted {now}, before {before}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // Positive control: HTTP/1.1 on the same listener is served as before.
    let mut c = connect(sc.http()).await;
    let req = Request::get("/")
        .header("host", "api.allowed.test")
        .body(Empty::new())
        .unwrap();
    assert_eq!(send(&mut c, req).await.status, 200);
}
