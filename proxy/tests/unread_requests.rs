//! Requests the sidecar could not read: a head hyper refuses, one too large, one not sent in
//! time. Each gets the coded answer every refusal gets and a record, within the budget for
//! refusals made before deciding; a connection that says nothing is closed and counted.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::time::Duration;

use common::*;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

async fn allowed(
    extra: &str,
) -> (
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
    setup.http_port = port;
    setup.extra = extra.to_owned();
    let sc = Sidecar::start(&setup).await;
    (dns, up, sc)
}

fn assert_coded(out: &str, status: u16, code: &str) {
    assert!(out.starts_with(&format!("HTTP/1.1 {status} ")), "{out}");
    let lower = out.to_ascii_lowercase();
    assert!(
        lower.contains(&format!("x-af-code: {}", code.to_ascii_lowercase())),
        "{out}"
    );
    assert!(lower.contains("x-af-decision: refuse"), "{out}");
    assert!(out.contains(&format!("\r\n\r\n{code} ")), "{out}");
    assert!(out.contains("\n  Next: "), "{out}");
}

async fn send_raw(addr: std::net::SocketAddr, bytes: &[u8]) -> String {
    raw(addr, bytes, Duration::from_secs(5)).await
}

#[tokio::test]
async fn a_malformed_head_gets_400_net_017_with_a_coded_body_and_is_journaled() {
    let (_dns, up, sc) = allowed("").await;
    let port = up.addr().port();
    let bad = b"GET / HTTP/1.1\r\nHost: api.allowed.test\r\nno colon here\r\n\r\n";
    for addr in [sc.proxy(), sc.http()] {
        let out = send_raw(addr, bad).await;
        assert_coded(&out, 400, "AF-NET-017");
        assert!(out.contains("could not be read"), "{out}");
    }
    // On a keep-alive connection, after a request that was served: the first answer is the
    // upstream's, the second the sidecar's coded one.
    let two = format!(
        "GET http://api.allowed.test:{port}/ok HTTP/1.1\r\nHost: api.allowed.test:{port}\r\n\r\nGET http://x.test/ HTTP/1.1\r\nHost x.test\r\n\r\n"
    );
    let out = send_raw(sc.proxy(), two.as_bytes()).await;
    assert!(out.starts_with("HTTP/1.1 200 "), "{out}");
    let second = &out[out.find("hello").unwrap()..];
    assert_coded(&second["hello".len()..], 400, "AF-NET-017");
    assert_eq!(up.seen().len(), 1, "only the good request left");

    let recs = sc.admin().wait_records("blocked=true", 3).await;
    assert_eq!(recs.len(), 3, "{recs:#?}");
    assert!(
        recs.iter().all(|r| r["reason"] == "bad_request"
            && r["code"] == "AF-NET-017"
            && r["allowed"] == false
            && r["status"] == 400),
        "{recs:#?}"
    );
    let vias: Vec<&str> = recs.iter().map(|r| r["via"].as_str().unwrap()).collect();
    assert_eq!(vias, ["proxy", "transparent", "proxy"]);
    // The control: the good request on that connection was forwarded and journaled.
    let allowed = sc.admin().wait_records("blocked=false", 1).await;
    assert_eq!(allowed[0]["path"], "/ok");
}

#[tokio::test]
async fn a_head_too_large_in_bytes_or_header_fields_gets_431_net_004() {
    let (_dns, up, sc) = allowed("limits:\n  max_header_bytes: 8192\n  max_headers: 20\n").await;
    let port = up.addr().port();
    let request = |headers: &str| {
        format!(
            "GET http://api.allowed.test:{port}/ HTTP/1.1\r\nHost: api.allowed.test:{port}\r\n{headers}Connection: close\r\n\r\n"
        )
    };
    let big = request(&format!("X-Big: {}\r\n", "a".repeat(9000)));
    let many = request(&(0..25).map(|i| format!("X-{i}: v\r\n")).collect::<String>());
    for head in [&big, &many] {
        let out = send_raw(sc.proxy(), head.as_bytes()).await;
        assert_coded(&out, 431, "AF-NET-004");
        assert!(out.contains("8192 bytes in 20 header fields"), "{out}");
    }
    // The control: fewer fields than the bound go through.
    let few = request(&(0..15).map(|i| format!("X-{i}: v\r\n")).collect::<String>());
    let out = send_raw(sc.proxy(), few.as_bytes()).await;
    assert!(out.starts_with("HTTP/1.1 200 "), "{out}");
    assert_eq!(up.seen().len(), 1);
    let recs = sc.admin().wait_records("blocked=true", 2).await;
    assert!(
        recs.iter().all(|r| r["reason"] == "head_too_large"
            && r["code"] == "AF-NET-004"
            && r["status"] == 431),
        "{recs:#?}"
    );
}

#[tokio::test]
async fn a_head_not_sent_in_time_gets_408_net_005_and_a_silent_connection_is_closed_and_counted() {
    let (_dns, up, sc) = allowed("limits:\n  header_read_timeout_ms: 300\n").await;
    let admin = sc.admin();
    let unanswered = |why: &'static str| {
        let admin = Admin(admin.0);
        async move {
            admin
                .metric(&format!(
                    "af_proxy_closed_unanswered_total{{reason=\"{why}\"}}"
                ))
                .await
        }
    };
    // Half a head, then nothing.
    let mut s = TcpStream::connect(sc.http()).await.unwrap();
    s.write_all(b"GET / HTTP/1.1\r\nHost: api.allowed.test\r\n")
        .await
        .unwrap();
    let mut out = Vec::new();
    tokio::time::timeout(Duration::from_secs(5), s.read_to_end(&mut out))
        .await
        .unwrap()
        .unwrap();
    let out = String::from_utf8_lossy(&out);
    assert_coded(&out, 408, "AF-NET-005");
    assert!(out.contains("300 ms"), "{out}");

    // Nothing at all: closed without an answer, counted, not journaled.
    let mut s = TcpStream::connect(sc.http()).await.unwrap();
    let mut out = Vec::new();
    tokio::time::timeout(Duration::from_secs(5), s.read_to_end(&mut out))
        .await
        .unwrap()
        .unwrap();
    assert!(out.is_empty(), "{}", String::from_utf8_lossy(&out));
    assert_eq!(unanswered("idle").await, 1);

    // Half a head, then the client closes: counted.
    let mut s = TcpStream::connect(sc.http()).await.unwrap();
    s.write_all(b"GET / HTTP/1.1\r\nHo").await.unwrap();
    s.shutdown().await.unwrap();
    let mut out = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(5), s.read_to_end(&mut out)).await;
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while unanswered("incomplete").await == 0 && std::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(unanswered("incomplete").await, 1);

    // The control: a whole head in time is forwarded.
    let out = send_raw(
        sc.http(),
        b"GET / HTTP/1.1\r\nHost: api.allowed.test\r\nConnection: close\r\n\r\n",
    )
    .await;
    assert!(out.starts_with("HTTP/1.1 200 "), "{out}");
    assert_eq!(up.seen().len(), 1);
    let all = admin.wait_records("", 2).await;
    assert_eq!(all.len(), 2, "only the late head and the control: {all:#?}");
    assert_eq!(all[0]["reason"], "header_timeout");
    assert_eq!(all[0]["code"], "AF-NET-005");
    assert_eq!(all[0]["via"], "transparent");
    assert_eq!(all[1]["allowed"], true);
}

#[tokio::test]
async fn a_flood_of_bad_requests_is_journaled_within_its_budget_and_the_rest_counted() {
    // One a second, ten at once (the harness's `extra` follows its `journal:` section).
    let (_dns, up, sc) = allowed("  undecided_per_second: 1\n").await;
    let port = up.addr().port();
    for _ in 0..30 {
        let out = send_raw(sc.proxy(), b"GET / HTTP/1.1\r\nno colon\r\n\r\n").await;
        assert_coded(&out, 400, "AF-NET-017");
    }
    // Decided requests are not under that budget: this one is journaled.
    let got = proxy_get(sc.proxy(), &format!("http://api.allowed.test:{port}/after")).await;
    assert_eq!(got.status, 200);
    let admin = sc.admin();
    let allowed = admin.wait_records("blocked=false", 1).await;
    assert_eq!(allowed[0]["path"], "/after");
    let refused = admin.records("blocked=true").await;
    assert!((10..=13).contains(&refused.len()), "{}", refused.len());
    assert_eq!(admin.metric("af_proxy_refused_undecided_total").await, 30);
    assert_eq!(
        admin
            .metric("af_proxy_refused_undecided_unjournaled_total")
            .await,
        30 - refused.len() as u64
    );
}
