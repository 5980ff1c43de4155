//! Limits: the connection cap refuses clearly and journals (DNS over TCP counted under it);
//! header size and time are bounded; upstream connections are capped in total; a dial ends at
//! its deadline however many addresses a name has.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use af_fixtures::upstream::{Replies, Reply, Upstream};
use common::intercept::{TestCa, client, h2, send2, tls_via_connect};
use common::*;
use socket2::{Domain, Socket, Type};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

#[tokio::test]
async fn at_the_connection_limit_new_connections_get_503_net_014_and_are_journaled() {
    let up = hello_upstream().await;
    let dns = resolver(vec![("api.allowed.test", vec![upstream_ip()])]).await;
    let mut setup = Setup::new(
        &egress_on(up.addr().port(), &[("api.allowed.test:{port}", "allow")]),
        dns.addr,
    );
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
    let rules = "  default: block\n  rules:\n    - host: api.limited.test:{port}\n      mode: allow\n      rate_limit: 2/h\n    - host: tunnel.limited.test:{port}\n      mode: allow\n      rate_limit: 1/h\n";
    let sc = Sidecar::start(&Setup::new(&on_port(rules, up.addr().port()), dns.addr)).await;
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
    let mut setup = Setup::new(
        &egress_on(up.addr().port(), &[("api.allowed.test:{port}", "allow")]),
        dns.addr,
    );
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

/// Waits until `done` holds or five seconds pass.
async fn eventually(done: impl Fn() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(5);
    while !done() && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[tokio::test]
async fn past_max_upstream_connections_tunnels_plain_and_intercepted_requests_get_503_net_018() {
    let plain = hello_upstream().await;
    let tls_names = ["api.paths.test", "api.other.test"];
    let tls = Upstream::tls(
        SocketAddr::from((UPSTREAM_IP, 0)),
        &tls_names,
        Replies::new(Reply::ok("over tls")),
    )
    .await
    .unwrap();
    let dns = resolver(vec![
        ("api.allowed.test", vec![upstream_ip()]),
        ("api.paths.test", vec![upstream_ip()]),
        ("api.other.test", vec![upstream_ip()]),
    ])
    .await;
    // Path rules make the TLS hosts intercepted: each request inside is forwarded by the
    // sidecar's HTTPS client. Each rule names its upstream's port.
    let (plain_port, tls_port) = (plain.addr().port(), tls.addr().port());
    let rules = format!(
        "  default: block\n  rules:\n    - host: api.allowed.test:{plain_port}\n      mode: allow\n    - host: api.paths.test:{tls_port}\n      mode: allow\n      paths: [/v1]\n    - host: api.other.test:{tls_port}\n      mode: allow\n      paths: [/v1]\n"
    );
    let ca = TestCa::new();
    let mut setup = Setup::new(&rules, dns.addr);
    setup.extra = format!(
        "{}limits:\n  max_upstream_connections: 2\n",
        ca.tls_yaml(16, &[tls.certificate().unwrap()])
    );
    let sc = Sidecar::start(&setup).await;
    let metrics = &sc.running.metrics;
    let plain_authority = format!("api.allowed.test:{}", plain.addr().port());
    let url = format!("http://{plain_authority}/");
    let connector = client(&[&ca.cert_der], &[b"h2"]);
    let https = |host: &str, path: &str| {
        hyper::Request::get(format!("https://{host}:{}{path}", tls.addr().port()))
            .body(http_body_util::Full::new(bytes::Bytes::new()))
            .unwrap()
    };

    // Within the cap: a tunnel, and an intercepted HTTP/2 request whose pooled upstream
    // connection stays open, idle.
    let (head, tunnel) = connect_tunnel(sc.proxy(), &plain_authority).await;
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    let authority = format!("api.paths.test:{}", tls.addr().port());
    let opened = tls_via_connect(sc.proxy(), &authority, "api.paths.test", &connector)
        .await
        .unwrap();
    let mut paths = h2(opened).await;
    let got = send2(&mut paths, https("api.paths.test", "/v1/a")).await;
    assert_eq!(got.status, 200, "{}", got.body);
    eventually(|| metrics.upstream_connections() == 2).await;
    assert_eq!(metrics.upstream_connections(), 2);

    // At the cap, every kind of dial is refused before anything leaves.
    let (head, _) = connect_tunnel(sc.proxy(), &plain_authority).await;
    assert!(head.starts_with("HTTP/1.1 503"), "{head}");
    assert!(
        head.to_ascii_lowercase().contains("x-af-code: af-net-018"),
        "{head}"
    );
    let got = proxy_get(sc.proxy(), &url).await;
    assert_eq!(got.status, 503, "{}", got.body);
    assert_eq!(got.header("x-af-code"), Some("AF-NET-018"));
    assert!(
        got.body.contains("max_upstream_connections"),
        "{}",
        got.body
    );
    assert!(got.body.contains("Next:"), "{}", got.body);
    let authority = format!("api.other.test:{}", tls.addr().port());
    let opened = tls_via_connect(sc.proxy(), &authority, "api.other.test", &connector)
        .await
        .unwrap();
    let mut other = h2(opened).await;
    let got = send2(&mut other, https("api.other.test", "/v1/b")).await;
    assert_eq!(got.status, 503, "{}", got.body);
    assert_eq!(got.header("x-af-code"), Some("AF-NET-018"));
    // An open pooled connection is reused at the cap.
    let got = send2(&mut paths, https("api.paths.test", "/v1/c")).await;
    assert_eq!(got.status, 200, "{}", got.body);
    assert_eq!(metrics.upstream_connections(), 2);

    let recs = sc.admin().wait_records("blocked=true", 3).await;
    assert_eq!(recs.len(), 3, "{recs:#?}");
    assert!(
        recs.iter()
            .all(|r| r["reason"] == "upstream_limit" && r["code"] == "AF-NET-018"),
        "{recs:#?}"
    );
    assert_eq!(
        sc.admin()
            .metric("af_proxy_upstream_limit_refusals_total")
            .await,
        3
    );

    // Positive control: a closed tunnel frees its place, and the refused request goes through.
    drop(tunnel);
    eventually(|| metrics.upstream_connections() < 2).await;
    let got = proxy_get(sc.proxy(), &url).await;
    assert_eq!(got.status, 200, "{}", got.body);
}

/// A listener on `ip:port` that never completes another connection: its accept queue (backlog
/// 0) is filled by one connection nobody accepts, so the kernel drops further SYNs.
fn unanswering(ip: [u8; 4], port: u16) -> (Socket, std::net::TcpStream) {
    let addr = SocketAddr::from((ip, port));
    let listener = Socket::new(Domain::IPV4, Type::STREAM, None).unwrap();
    listener.bind(&addr.into()).unwrap();
    listener.listen(0).unwrap();
    let filler = std::net::TcpStream::connect_timeout(&addr, Duration::from_secs(1)).unwrap();
    (listener, filler)
}

#[tokio::test]
async fn a_dial_over_many_unanswering_addresses_ends_at_dial_timeout_with_504_net_019() {
    let up = hello_upstream().await;
    let port = up.addr().port();
    let dead = [[127, 0, 0, 3], [127, 0, 0, 4], [127, 0, 0, 5]];
    let _held: Vec<_> = dead.iter().map(|ip| unanswering(*ip, port)).collect();
    let unreachable = tokio::time::timeout(
        Duration::from_millis(300),
        TcpStream::connect(SocketAddr::from((dead[0], port))),
    )
    .await;
    assert!(unreachable.is_err(), "the dead address must not answer");
    let ip = |a: [u8; 4]| std::net::IpAddr::from(a);
    let dns = resolver(vec![
        ("some-dead.test", vec![ip(dead[0]), upstream_ip()]),
        ("all-dead.test", dead.iter().map(|a| ip(*a)).collect()),
    ])
    .await;
    let mut setup = Setup::new(
        &egress_on(
            port,
            &[
                ("some-dead.test:{port}", "allow"),
                ("all-dead.test:{port}", "allow"),
            ],
        ),
        dns.addr,
    );
    setup.trusted = [
        "127.0.0.2/32",
        "127.0.0.3/32",
        "127.0.0.4/32",
        "127.0.0.5/32",
    ]
    .map(String::from)
    .to_vec();
    setup.extra = "limits:\n  upstream_connect_timeout_ms: 1000\n  dial_timeout_ms: 1500\n".into();
    let sc = Sidecar::start(&setup).await;

    // Positive control: an address that does not answer is given up after 1 s and the next
    // one, within the deadline, serves the request.
    let started = Instant::now();
    let got = proxy_get(sc.proxy(), &format!("http://some-dead.test:{port}/")).await;
    assert_eq!(got.status, 200, "{}", got.body);
    assert!(started.elapsed() < Duration::from_millis(1500));

    // Three such addresses would take 3 s one after another; the dial ends at 1.5 s.
    let started = Instant::now();
    let got = proxy_get(sc.proxy(), &format!("http://all-dead.test:{port}/")).await;
    let took = started.elapsed();
    assert_eq!(got.status, 504, "{}", got.body);
    assert_eq!(got.header("x-af-code"), Some("AF-NET-019"));
    assert!(
        got.body.contains("dial deadline of 1500 ms"),
        "{}",
        got.body
    );
    assert!(got.body.contains("2 of 3 addresses tried"), "{}", got.body);
    assert!(
        took >= Duration::from_millis(1400) && took < Duration::from_millis(2500),
        "{took:?}"
    );
    let started = Instant::now();
    let (head, _) = connect_tunnel(sc.proxy(), &format!("all-dead.test:{port}")).await;
    assert!(head.starts_with("HTTP/1.1 504"), "{head}");
    assert!(started.elapsed() < Duration::from_millis(2500));

    let recs = sc.admin().wait_records("host=all-dead.test", 2).await;
    assert!(
        recs.iter().all(|r| r["reason"] == "dial_deadline"
            && r["code"] == "AF-NET-019"
            && r["status"] == 504
            && r["allowed"] == true),
        "{recs:#?}"
    );
}
