//! Input mistakes: ports that are not ports, bodies the client broke, too many header fields,
//! IPv6 hosts and ports in what the sidecar says. Each is refused as the client's, coded and
//! journaled, next to a request that goes through.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::time::Duration;

use common::*;
use serde_json::Value;

/// A sidecar allowing `api.allowed.test` (the fake upstream), transparent HTTP on its port.
async fn allowed() -> (
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
    let sc = Sidecar::start(&setup).await;
    (dns, up, sc)
}

/// Send `head` (a whole request) and read the answer until the sidecar closes.
async fn ask(addr: std::net::SocketAddr, head: &str) -> String {
    raw(addr, head.as_bytes(), Duration::from_secs(5)).await
}

fn assert_refused(out: &str, status: u16, code: &str) {
    assert!(out.starts_with(&format!("HTTP/1.1 {status} ")), "{out}");
    let lower = out.to_ascii_lowercase();
    assert!(
        lower.contains(&format!("x-af-code: {}", code.to_ascii_lowercase())),
        "{out}"
    );
    assert!(lower.contains("x-af-decision: refuse"), "{out}");
    assert!(out.contains(&format!("\r\n\r\n{code} ")), "{out}");
    assert!(out.contains("Next: "), "{out}");
}

fn by_code<'a>(records: &'a [Value], code: &str) -> Vec<&'a Value> {
    records.iter().filter(|r| r["code"] == code).collect()
}

#[tokio::test]
async fn a_port_out_of_range_or_with_a_sign_is_refused_with_400_net_006() {
    let (_dns, up, sc) = allowed().await;
    let port = up.addr().port();
    let cases = [
        (
            sc.proxy(),
            "GET http://api.allowed.test:65536/ HTTP/1.1\r\nHost: api.allowed.test:65536\r\n\r\n"
                .to_owned(),
            "\"65536\"",
        ),
        (
            sc.proxy(),
            format!(
                "GET http://api.allowed.test:+{port}/ HTTP/1.1\r\nHost: api.allowed.test:+{port}\r\n\r\n"
            ),
            "\"+",
        ),
        (
            sc.proxy(),
            format!(
                "CONNECT api.allowed.test:+{port} HTTP/1.1\r\nHost: api.allowed.test:+{port}\r\n\r\n"
            ),
            "\"+",
        ),
        (
            sc.http(),
            "GET / HTTP/1.1\r\nHost: api.allowed.test:+80\r\n\r\n".to_owned(),
            "\"+80\"",
        ),
        (
            sc.http(),
            "GET / HTTP/1.1\r\nHost: api.allowed.test:65536\r\n\r\n".to_owned(),
            "\"65536\"",
        ),
    ];
    for (addr, head, named) in &cases {
        let out = ask(*addr, head).await;
        assert_refused(&out, 400, "AF-NET-006");
        assert!(out.contains(named), "{out}");
    }
    assert!(up.seen().is_empty(), "nothing was forwarded");
    let recs = sc.admin().wait_records("blocked=true", cases.len()).await;
    let refused = by_code(&recs, "AF-NET-006");
    assert_eq!(refused.len(), cases.len(), "{recs:#?}");
    assert!(
        refused.iter().all(|r| r["reason"] == "bad_port"
            && r["allowed"] == false
            && r["host"] == "api.allowed.test"),
        "{recs:#?}"
    );
    // Positive controls: the same host on its real port, by URL and by Host.
    let got = proxy_get(sc.proxy(), &format!("http://api.allowed.test:{port}/")).await;
    assert_eq!(got.status, 200, "{}", got.body);
    let out = ask(
        sc.http(),
        "GET / HTTP/1.1\r\nHost: api.allowed.test\r\nConnection: close\r\n\r\n",
    )
    .await;
    assert!(out.starts_with("HTTP/1.1 200"), "{out}");
    assert_eq!(up.seen().len(), 2);
    let allowed = sc.admin().wait_records("blocked=false", 2).await;
    assert!(allowed.iter().all(|r| r["port"] == port), "{allowed:#?}");
}

#[tokio::test]
async fn a_block_message_keeps_the_port_and_brackets_an_ipv6_host() {
    let (_dns, up, sc) = allowed().await;
    let got = proxy_get(sc.proxy(), "http://api.blocked.test:8080/x?y=1").await;
    assert_eq!(got.status, 403, "{}", got.body);
    assert!(
        got.body
            .starts_with("AF-NET-010 GET http://api.blocked.test:8080/x?y=1 was refused"),
        "{}",
        got.body
    );
    assert!(
        got.body
            .contains("`af net explain GET http://api.blocked.test:8080/x?y=1`"),
        "{}",
        got.body
    );
    let got = proxy_get(sc.proxy(), "http://[2001:db8::5]:8080/").await;
    assert_eq!(got.status, 403, "{}", got.body);
    assert!(
        got.body
            .contains("GET http://[2001:db8::5]:8080/ was refused"),
        "{}",
        got.body
    );
    let (head, mut s) = connect_tunnel(sc.proxy(), "[2001:db8::1]:8443").await;
    assert!(head.starts_with("HTTP/1.1 403"), "{head}");
    let length: usize = head
        .lines()
        .find_map(|l| l.strip_prefix("content-length: "))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let mut body = vec![0u8; length];
    tokio::io::AsyncReadExt::read_exact(&mut s, &mut body)
        .await
        .unwrap();
    let body = String::from_utf8_lossy(&body);
    assert!(
        body.contains("A connection to [2001:db8::1]:8443 was refused"),
        "{body}"
    );
    assert!(
        body.contains("af net explain GET https://[2001:db8::1]:8443/"),
        "{body}"
    );

    let recs = sc.admin().wait_records("blocked=true", 3).await;
    let tunnel = recs.iter().find(|r| r["method"] == "CONNECT").unwrap();
    assert_eq!(
        (&tunnel["host"], &tunnel["port"]),
        (&Value::from("2001:db8::1"), &Value::from(8443))
    );
    // The control: an allowed host on its port is forwarded.
    let got = proxy_get(
        sc.proxy(),
        &format!("http://api.allowed.test:{}/", up.addr().port()),
    )
    .await;
    assert_eq!(got.status, 200);
}

#[tokio::test]
async fn a_malformed_chunk_from_the_client_is_the_clients_400_not_the_upstreams_502() {
    let (_dns, up, sc) = allowed().await;
    let port = up.addr().port();
    let head = format!(
        "POST http://api.allowed.test:{port}/up HTTP/1.1\r\nHost: api.allowed.test:{port}\r\nTransfer-Encoding: chunked\r\n\r\n"
    );
    let out = ask(sc.proxy(), &format!("{head}5\r\nhello\r\nzz\r\n\r\n")).await;
    assert!(out.starts_with("HTTP/1.1 400 "), "{out}");
    let lower = out.to_ascii_lowercase();
    assert!(lower.contains("x-af-code: af-net-017"), "{out}");
    // The catalogue allowed it; the client broke it.
    assert!(lower.contains("x-af-decision: allow"), "{out}");
    assert!(
        out.contains("AF-NET-017 The request body from the client could not be read"),
        "{out}"
    );
    assert!(out.contains("chunk"), "{out}");
    let recs = sc.admin().wait_records("host=api.allowed.test", 1).await;
    assert_eq!(recs[0]["reason"], "bad_body", "{recs:#?}");
    assert_eq!(recs[0]["code"], "AF-NET-017");
    assert_eq!(recs[0]["status"], 400);
    // It had begun to leave: allowed, with the bytes that went.
    assert_eq!(recs[0]["allowed"], true);
    assert_eq!(recs[0]["bytes_up"], 5);
    // The control: the same request with a well-formed body is forwarded whole.
    let out = ask(
        sc.proxy(),
        &format!("{head}5\r\nhello\r\n0\r\n\r\n")
            .replace("chunked\r\n", "chunked\r\nConnection: close\r\n"),
    )
    .await;
    assert!(out.starts_with("HTTP/1.1 200 "), "{out}");
    let recs = sc.admin().wait_records("host=api.allowed.test", 2).await;
    assert_eq!(
        (&recs[1]["reason"], &recs[1]["bytes_up"]),
        (&Value::from("rule"), &Value::from(5))
    );
}

#[tokio::test]
async fn a_request_that_loops_through_the_sidecar_is_journaled_refused_at_both_hops() {
    let up = hello_upstream().await;
    let dns = resolver(vec![
        ("api.allowed.test", vec![upstream_ip()]),
        // The sidecar's own transparent listener, on loopback.
        ("loop.allowed.test", vec!["127.0.0.1".parse().unwrap()]),
    ])
    .await;
    // The control's upstream, which itself answers 508.
    let reply = af_fixtures::upstream::Reply {
        status: 508,
        ..af_fixtures::upstream::Reply::ok("the upstream's own loop")
    };
    let up508 = http_upstream(af_fixtures::upstream::Replies::new(reply)).await;
    // The first hop goes to the transparent listener's own port; the second is decided on the
    // port that listener advertises (80), which the rule naming no port covers.
    let listen = Listen::free();
    let (control, first_hop) = (
        format!("api.allowed.test:{}", up508.addr().port()),
        format!("loop.allowed.test:{}", listen.http.port()),
    );
    let mut setup = Setup::new(
        &egress(&[
            (&control, "allow"),
            ("loop.allowed.test", "allow"),
            (&first_hop, "allow"),
        ]),
        dns.addr,
    );
    setup.trusted = vec![TRUSTED.to_owned(), "127.0.0.1/32".to_owned()];
    let sc = Sidecar::start_at(&setup, &listen).await;
    let looped = format!("http://loop.allowed.test:{}/again", sc.http().port());
    let got = proxy_get(sc.proxy(), &looped).await;
    assert_eq!(got.status, 508, "{}", got.body);
    assert_eq!(got.header("x-af-code"), Some("AF-NET-017"));
    let port = sc.http().port();
    assert!(
        got.body.contains(&format!(
            "loop.allowed.test:{port} already passed through this sidecar"
        )),
        "{}",
        got.body
    );
    let recs = sc.admin().wait_records("host=loop.allowed.test", 2).await;
    assert_eq!(recs.len(), 2, "{recs:#?}");
    for r in &recs {
        assert_eq!(r["allowed"], false, "{r:#?}");
        assert_eq!(r["reason"], "loop", "{r:#?}");
        assert_eq!(r["code"], "AF-NET-017", "{r:#?}");
        assert_eq!(r["status"], 508, "{r:#?}");
    }
    let vias: Vec<&str> = recs.iter().map(|r| r["via"].as_str().unwrap()).collect();
    assert_eq!(vias, ["transparent", "proxy"]);
    // The control: an upstream that itself answers 508 is still an allowed request answered 508.
    let got = proxy_get(
        sc.proxy(),
        &format!("http://api.allowed.test:{}/", up508.addr().port()),
    )
    .await;
    assert_eq!(got.status, 508);
    let recs = sc.admin().wait_records("host=api.allowed.test", 1).await;
    assert_eq!(
        (&recs[0]["allowed"], &recs[0]["code"]),
        (&Value::from(true), &Value::Null)
    );
    drop(up);
}

/// A minimal TLS 1.2 ClientHello naming `sni` (any text, an IP literal included, as rustls
/// clients never send), in one record. Test data, written out field by field.
fn client_hello(sni: Option<&str>) -> Vec<u8> {
    let u16be = |n: usize| u16::try_from(n).unwrap().to_be_bytes();
    let mut extensions = Vec::new();
    if let Some(name) = sni {
        let name = name.as_bytes();
        let entry = [&[0u8][..], &u16be(name.len()), name].concat(); // host_name
        let list = [&u16be(entry.len())[..], &entry].concat();
        extensions.extend([&[0, 0][..], &u16be(list.len()), &list].concat()); // server_name
    }
    // signature_algorithms (ecdsa_secp256r1_sha256), supported_groups (secp256r1).
    extensions.extend([0x00, 0x0d, 0x00, 0x04, 0x00, 0x02, 0x04, 0x03]);
    extensions.extend([0x00, 0x0a, 0x00, 0x04, 0x00, 0x02, 0x00, 0x17]);
    let mut body = vec![0x03, 0x03];
    body.extend([0x11; 32]); // random
    body.push(0); // no session id
    body.extend([0x00, 0x02, 0xc0, 0x2b]); // TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256
    body.extend([0x01, 0x00]); // null compression
    body.extend(u16be(extensions.len()));
    body.extend(extensions);
    let mut handshake = vec![0x01]; // client_hello
    handshake.extend(&u32::try_from(body.len()).unwrap().to_be_bytes()[1..]);
    handshake.extend(body);
    [&[0x16, 0x03, 0x01][..], &u16be(handshake.len()), &handshake].concat()
}

#[tokio::test]
async fn an_ip_literal_sni_is_decided_and_journaled_as_that_address_not_as_no_sni() {
    // The upstream: a plain socket on the loopback upstream address, to see the replayed hello.
    let upstream = tokio::net::TcpListener::bind((upstream_ip(), 0))
        .await
        .unwrap();
    let dns = resolver(vec![]).await;
    let ip = std::net::IpAddr::from(UPSTREAM_IP).to_string();
    let port = upstream.local_addr().unwrap().port();
    let mut setup = Setup::new(&egress(&[(&format!("{ip}:{port}"), "allow")]), dns.addr);
    setup.tls_port = port;
    let sc = Sidecar::start(&setup).await;

    // An address no rule names: refused by the catalogue's default, on that address.
    let out = raw(
        sc.tls(),
        &client_hello(Some("203.0.113.7")),
        Duration::from_secs(5),
    )
    .await;
    assert!(out.is_empty(), "a TLS client gets no HTTP answer: {out}");
    // The address a rule allows: tunnelled there, the hello replayed untouched.
    let hello = client_hello(Some(&ip));
    let mut client = tokio::net::TcpStream::connect(sc.tls()).await.unwrap();
    tokio::io::AsyncWriteExt::write_all(&mut client, &hello)
        .await
        .unwrap();
    let (mut served, _) = tokio::time::timeout(Duration::from_secs(5), upstream.accept())
        .await
        .unwrap()
        .unwrap();
    let mut replayed = vec![0u8; hello.len()];
    tokio::io::AsyncReadExt::read_exact(&mut served, &mut replayed)
        .await
        .unwrap();
    assert_eq!(replayed, hello);
    drop((served, client));
    // The control: no SNI at all is still refused as no SNI.
    let out = raw(sc.tls(), &client_hello(None), Duration::from_secs(5)).await;
    assert!(out.is_empty(), "{out}");

    let recs = sc.admin().wait_records("", 3).await;
    let by_host = |host: &str| recs.iter().find(|r| r["host"] == host).unwrap();
    let refused = by_host("203.0.113.7");
    assert_eq!(
        (&refused["reason"], &refused["code"], &refused["allowed"]),
        (
            &Value::from("default"),
            &Value::from("AF-NET-010"),
            &Value::from(false)
        ),
        "{recs:#?}"
    );
    let tunnelled = by_host(&ip);
    assert_eq!(
        (&tunnelled["allowed"], &tunnelled["via"]),
        (&Value::from(true), &Value::from("tls")),
        "{recs:#?}"
    );
    let none = by_host("");
    assert_eq!(
        (&none["reason"], &none["code"]),
        (&Value::from("no_sni"), &Value::from("AF-NET-015")),
        "{recs:#?}"
    );
}
