//! A kept-alive HTTP/1.1 connection that goes quiet lets go of hyper's buffers and waits on the
//! bare socket (issue 14). The next request on it is read and answered as on any kept-alive
//! connection, bytes of it that arrived before the connection parked included, and a parked
//! connection still closes when the client says nothing in time.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::time::Duration;

use common::*;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

const PARKED: &str = "af_proxy_connections_parked_total";

async fn setup() -> (
    af_fixtures::test_resolver::TestResolver,
    af_fixtures::upstream::Upstream,
    Sidecar,
) {
    let up = hello_upstream().await;
    let dns = resolver(vec![("api.allowed.test", vec![upstream_ip()])]).await;
    let port = up.addr().port();
    let mut setup = Setup::new(
        &egress_on(port, &[("api.allowed.test:{port}", "allow")]),
        dns.addr,
    );
    setup.extra = "limits:\n  header_read_timeout_ms: 1500\n".to_owned();
    let sc = Sidecar::start(&setup).await;
    (dns, up, sc)
}

/// Read from `s` until what was read ends with the upstream's body `hello` (each answer does).
async fn answer(s: &mut TcpStream) -> String {
    let mut out = Vec::new();
    let mut buf = [0u8; 4096];
    while !out.ends_with(b"hello") {
        let n = tokio::time::timeout(Duration::from_secs(5), s.read(&mut buf))
            .await
            .expect("an answer in time")
            .unwrap();
        assert!(n > 0, "closed: {}", String::from_utf8_lossy(&out));
        out.extend_from_slice(&buf[..n]);
    }
    String::from_utf8(out).unwrap()
}

/// Wait until the sidecar has parked a connection `n` times in all.
async fn parked(admin: &Admin, n: u64) {
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while admin.metric(PARKED).await < n {
        assert!(std::time::Instant::now() < deadline, "never parked");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn get(port: u16, path: &str) -> String {
    format!("GET http://api.allowed.test:{port}{path} HTTP/1.1\r\nHost: api.allowed.test\r\n\r\n")
}

#[tokio::test]
async fn a_quiet_connection_parks_and_its_next_request_is_answered_on_it() {
    let (_dns, up, sc) = setup().await;
    let admin = sc.admin();
    let port = up.addr().port();
    let mut s = TcpStream::connect(sc.proxy()).await.unwrap();
    s.write_all(get(port, "/one").as_bytes()).await.unwrap();
    let first = answer(&mut s).await;
    assert!(first.starts_with("HTTP/1.1 200 "), "{first}");
    // The control: parking is what happened, not a connection that never went quiet.
    parked(&admin, 1).await;
    assert_eq!(admin.metric("af_proxy_active_connections").await, 1);
    s.write_all(get(port, "/two").as_bytes()).await.unwrap();
    let second = answer(&mut s).await;
    assert!(second.starts_with("HTTP/1.1 200 "), "{second}");
    let paths: Vec<String> = up.seen().into_iter().map(|r| r.path).collect();
    assert_eq!(paths, ["/one", "/two"]);
    let recs = admin.wait_records("host=api.allowed.test", 2).await;
    assert_eq!(recs.len(), 2);
    assert!(
        recs.iter().all(|r| r["outcome"] == "forwarded"),
        "{recs:#?}"
    );

    // Parked again, the client says nothing: closed without an answer at the header timeout
    // and counted, as an unparked connection is.
    parked(&admin, 2).await;
    let mut rest = Vec::new();
    tokio::time::timeout(Duration::from_secs(5), s.read_to_end(&mut rest))
        .await
        .expect("closed in time")
        .unwrap();
    assert!(rest.is_empty(), "{}", String::from_utf8_lossy(&rest));
    assert_eq!(
        admin
            .metric("af_proxy_closed_unanswered_total{reason=\"idle\"}")
            .await,
        1
    );
}

#[tokio::test]
async fn the_start_of_a_next_request_read_before_parking_is_read_again() {
    let (_dns, up, sc) = setup().await;
    let admin = sc.admin();
    let port = up.addr().port();
    let next = get(port, "/two");
    let (early, late) = next.split_at(next.len() / 2);
    let mut s = TcpStream::connect(sc.proxy()).await.unwrap();
    // One write: a whole request and half of the next one, which hyper reads and holds.
    s.write_all(format!("{}{early}", get(port, "/one")).as_bytes())
        .await
        .unwrap();
    let first = answer(&mut s).await;
    assert!(first.starts_with("HTTP/1.1 200 "), "{first}");
    parked(&admin, 1).await;
    s.write_all(late.as_bytes()).await.unwrap();
    let second = answer(&mut s).await;
    assert!(second.starts_with("HTTP/1.1 200 "), "{second}");
    let paths: Vec<String> = up.seen().into_iter().map(|r| r.path).collect();
    assert_eq!(paths, ["/one", "/two"]);
}
