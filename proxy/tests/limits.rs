//! Limits: the connection cap refuses clearly and journals; header size and time are bounded.
#![allow(clippy::unwrap_used)]

mod common;

use std::time::{Duration, Instant};

use common::*;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

#[tokio::test]
async fn at_the_connection_limit_new_connections_get_503_net_014_and_are_journaled() {
    let up = hello_upstream().await;
    let dns = resolver(vec![("api.allowed.test", vec![upstream_ip()])]).await;
    let mut setup = Setup::new(&egress(&[("api.allowed.test", "allow")]), dns.addr);
    setup.extra = "limits:\n  max_connections: 2\n".into();
    let sc = Sidecar::start(&setup).await;

    let held1 = TcpStream::connect(sc.proxy()).await.unwrap();
    let held2 = TcpStream::connect(sc.http()).await.unwrap();
    // Wait until both are admitted.
    let deadline = Instant::now() + Duration::from_secs(5);
    while sc.running.metrics.active_connections() < 2 && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let url = format!("http://api.allowed.test:{}/", up.addr().port());
    let out = raw(
        sc.proxy(),
        format!("GET {url} HTTP/1.1\r\nHost: api.allowed.test\r\n\r\n").as_bytes(),
        Duration::from_secs(5),
    )
    .await;
    assert!(out.starts_with("HTTP/1.1 503"), "{out}");
    assert!(
        out.to_ascii_lowercase().contains("x-af-code: af-net-014"),
        "{out}"
    );
    assert!(out.contains("AF-NET-014"), "{out}");
    // The TLS listener shares the cap: closed without a word.
    let out = raw(sc.tls(), b"\x16\x03\x01", Duration::from_secs(5)).await;
    assert!(out.is_empty());

    let recs = sc.admin().wait_records("blocked=true", 2).await;
    assert!(
        recs.iter()
            .all(|r| r["reason"] == "connection_limit" && r["code"] == "AF-NET-014"),
        "{recs:#?}"
    );
    assert_eq!(
        sc.admin()
            .metric("af_proxy_connection_limit_refusals_total")
            .await,
        2
    );

    // Positive control: once a place frees, the same request goes through.
    drop(held1);
    let deadline = Instant::now() + Duration::from_secs(5);
    while sc.running.metrics.active_connections() > 1 && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let got = proxy_get(sc.proxy(), &url).await;
    assert_eq!(got.status, 200, "{}", got.body);
    drop(held2);
}

#[tokio::test]
async fn a_slow_request_head_is_cut_off_and_an_oversized_one_is_refused() {
    let dns = resolver(vec![]).await;
    let mut setup = Setup::new(&egress(&[]), dns.addr);
    setup.extra = "limits:\n  header_read_timeout_ms: 300\n  max_header_bytes: 8192\n".into();
    let sc = Sidecar::start(&setup).await;

    let mut s = TcpStream::connect(sc.proxy()).await.unwrap();
    s.write_all(b"GET http://x.test/ HTTP/1.1\r\nHost: x.test\r\n")
        .await
        .unwrap();
    let started = Instant::now();
    let mut buf = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(5), s.read_to_end(&mut buf))
        .await
        .unwrap();
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "the slow head was not cut off"
    );

    let big = format!(
        "GET http://x.test/ HTTP/1.1\r\nHost: x.test\r\nX-Big: {}\r\n\r\n",
        "a".repeat(20_000)
    );
    let out = raw(sc.proxy(), big.as_bytes(), Duration::from_secs(5)).await;
    assert!(out.starts_with("HTTP/1.1 431"), "{out}");
}

#[tokio::test]
async fn a_rules_rate_limit_refuses_with_429_net_048_past_its_burst() {
    let up = hello_upstream().await;
    let dns = resolver(vec![
        ("api.limited.test", vec![upstream_ip()]),
        ("tunnel.limited.test", vec![upstream_ip()]),
    ])
    .await;
    let rules = "  default: block\n  rules:\n    - host: api.limited.test\n      mode: allow\n      rate_limit: 2/h\n    - host: tunnel.limited.test\n      mode: allow\n      rate_limit: 1/h\n";
    let sc = Sidecar::start(&Setup::new(rules, dns.addr)).await;
    let url = format!("http://api.limited.test:{}/", up.addr().port());
    // A request refused for another reason (a live key) never leaves and takes no place.
    let live = format!("{url}?with=sk_live_51NotARealKeyButLooksLive");
    assert_eq!(proxy_get(sc.proxy(), &live).await.status, 403);
    // Positive control: the burst is forwarded.
    for _ in 0..2 {
        assert_eq!(proxy_get(sc.proxy(), &url).await.status, 200);
    }
    assert_eq!(up.seen().len(), 2);
    let refused = proxy_get(sc.proxy(), &url).await;
    assert_eq!(refused.status, 429, "{}", refused.body);
    assert_eq!(refused.header("x-af-code"), Some("AF-NET-048"));
    assert!(refused.body.contains("2/h"), "{}", refused.body);
    assert!(refused.body.contains("Next:"), "{}", refused.body);
    // One place frees every 30 minutes.
    let retry: u64 = refused.header("retry-after").unwrap().parse().unwrap();
    assert!((1_700..=1_800).contains(&retry), "{retry}");
    assert_eq!(up.seen().len(), 2, "nothing past the limit was forwarded");

    // A tunnel counts once, then is refused before any byte leaves.
    let authority = format!("tunnel.limited.test:{}", up.addr().port());
    let (first, _open) = connect_tunnel(sc.proxy(), &authority).await;
    assert!(first.starts_with("HTTP/1.1 200"), "{first}");
    let (second, _) = connect_tunnel(sc.proxy(), &authority).await;
    assert!(second.starts_with("HTTP/1.1 429"), "{second}");

    let recs = sc.admin().wait_records("blocked=true", 3).await;
    let limited: Vec<_> = recs
        .iter()
        .filter(|r| r["reason"] == "rate_limited")
        .collect();
    assert_eq!(limited.len(), 2, "{recs:#?}");
    assert!(
        limited.iter().all(|r| r["code"] == "AF-NET-048"),
        "{recs:#?}"
    );
}

/// Asks `example.test. A` over an open DNS-over-TCP connection: the answer's address, or
/// `None` when the sidecar closes the connection instead.
async fn dns_over_tcp(stream: &mut TcpStream) -> Option<std::net::IpAddr> {
    use hickory_proto::op::{Message, MessageType, OpCode, Query};
    use hickory_proto::rr::{Name, RData, RecordType};
    let mut message = Message::new(7, MessageType::Query, OpCode::Query);
    message.add_query(Query::query(
        Name::from_ascii("example.test.").unwrap(),
        RecordType::A,
    ));
    let bytes = message.to_vec().unwrap();
    let len = u16::try_from(bytes.len()).unwrap();
    stream.write_all(&len.to_be_bytes()).await.ok()?;
    stream.write_all(&bytes).await.ok()?;
    let read = async {
        let mut prefix = [0u8; 2];
        stream.read_exact(&mut prefix).await.ok()?;
        let mut reply = vec![0u8; usize::from(u16::from_be_bytes(prefix))];
        stream.read_exact(&mut reply).await.ok()?;
        Message::from_vec(&reply).ok()
    };
    let answer = tokio::time::timeout(Duration::from_secs(5), read)
        .await
        .ok()??;
    answer.answers.iter().find_map(|r| match &r.data {
        RData::A(a) => Some(std::net::IpAddr::V4(a.0)),
        _ => None,
    })
}

#[tokio::test]
async fn dns_over_tcp_holds_places_under_max_connections_and_is_closed_past_it() {
    let up = hello_upstream().await;
    let dns = resolver(vec![("api.allowed.test", vec![upstream_ip()])]).await;
    let mut setup = Setup::new(&egress(&[("api.allowed.test", "allow")]), dns.addr);
    setup.dns = format!(
        "    listen: \"127.0.0.1:0\"\n    answer_v4: \"192.0.2.53\"\n    inside_resolver: \"{}\"\n    udp_sockets: 1",
        dns.addr
    );
    setup.extra =
        "inside:\n  subnets: [\"198.51.100.0/24\"]\nlimits:\n  max_connections: 2\n".into();
    let sc = Sidecar::start(&setup).await;
    let sidecar_v4: std::net::IpAddr = "192.0.2.53".parse().unwrap();

    // Positive control: within the cap DNS over TCP is answered.
    let mut held1 = TcpStream::connect(sc.dns()).await.unwrap();
    let mut held2 = TcpStream::connect(sc.dns()).await.unwrap();
    assert_eq!(dns_over_tcp(&mut held1).await, Some(sidecar_v4));
    assert_eq!(dns_over_tcp(&mut held2).await, Some(sidecar_v4));
    assert_eq!(sc.running.metrics.active_connections(), 2);

    // The two DNS connections hold both places: HTTP is refused, and so is a third DNS one.
    let url = format!("http://api.allowed.test:{}/", up.addr().port());
    let out = raw(
        sc.proxy(),
        format!("GET {url} HTTP/1.1\r\nHost: api.allowed.test\r\n\r\n").as_bytes(),
        Duration::from_secs(5),
    )
    .await;
    assert!(out.starts_with("HTTP/1.1 503"), "{out}");
    let mut third = TcpStream::connect(sc.dns()).await.unwrap();
    assert_eq!(dns_over_tcp(&mut third).await, None);
    let admin = sc.admin();
    assert_eq!(admin.metric("af_proxy_dns_tcp_refusals_total").await, 1);
    assert_eq!(
        admin
            .metric("af_proxy_connection_limit_refusals_total")
            .await,
        2
    );

    // A DNS connection closing frees its place for HTTP.
    drop(held1);
    let deadline = Instant::now() + Duration::from_secs(5);
    while sc.running.metrics.active_connections() > 1 && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let got = proxy_get(sc.proxy(), &url).await;
    assert_eq!(got.status, 200, "{}", got.body);
    assert_eq!(dns_over_tcp(&mut held2).await, Some(sidecar_v4));
}
