//! Untouched tunnels carried socket to socket by the kernel (splice(2), Linux): bulk bytes
//! arrive intact both ways through CONNECT and through the transparent TLS listener, every
//! byte is journaled, a half-closed tunnel still delivers, bytes sent right behind a CONNECT
//! head go first, and the idle watchdog still closes a silent tunnel. (The drain cut: drain.rs.)
#![cfg(target_os = "linux")]
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::*;
use rustls::pki_types::ServerName;
use serde_json::Value;
use sha2::{Digest, Sha256};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

const HOST: &str = "bulk.test";
const MIB: usize = 1024 * 1024;
const PATIENCE: Duration = Duration::from_secs(30);
const BUFFERED: &str = "af_proxy_tunnels_total{copy=\"buffered\"}";

/// A sidecar allowing [`HOST`] on the port of an echo upstream, which [`HOST`] resolves to,
/// sending `trailer` once the client has closed its side; `limits` is the body of `limits:`
/// (empty for the defaults). The transparent TLS listener tunnels to the same upstream.
async fn setup(
    trailer: Vec<u8>,
    limits: &str,
) -> (af_fixtures::test_resolver::TestResolver, u16, Sidecar) {
    let port = echo_upstream(trailer).await;
    let dns = resolver(vec![(HOST, vec![upstream_ip()])]).await;
    let mut setup = Setup::new(&rules(port), dns.addr);
    setup.tls_port = port;
    if !limits.is_empty() {
        setup.extra = format!("limits:\n{limits}\n");
    }
    (dns, port, Sidecar::start(&setup).await)
}

/// Egress allowing [`HOST`] on `port`, where its upstream listens.
fn rules(port: u16) -> String {
    egress(&[(&format!("{HOST}:{port}"), "allow")])
}

/// `len` bytes that differ from one position to the next (xorshift from `seed`), so a byte
/// lost, doubled or reordered changes the digest.
fn pattern(len: usize, mut seed: u64) -> Vec<u8> {
    (0..len)
        .map(|_| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed as u8
        })
        .collect()
}

fn digest(bytes: &[u8]) -> String {
    format!("{:x}", Sha256::digest(bytes))
}

/// Send `sent` while reading, shut the write side, and read until the sidecar closes.
async fn exchange(stream: TcpStream, sent: Vec<u8>) -> Vec<u8> {
    let (mut r, mut w) = stream.into_split();
    let writer = tokio::spawn(async move {
        w.write_all(&sent).await.unwrap();
        w.shutdown().await.unwrap();
        w
    });
    let mut got = Vec::new();
    tokio::time::timeout(PATIENCE, r.read_to_end(&mut got))
        .await
        .expect("the tunnel ends")
        .unwrap();
    drop(writer.await.unwrap());
    got
}

/// The one journal record of a tunnel to [`HOST`].
async fn record(sc: &Sidecar) -> Value {
    let mut recs = sc.admin().wait_records(&format!("host={HOST}"), 1).await;
    assert_eq!(recs.len(), 1, "{recs:#?}");
    recs.remove(0)
}

/// What came back is what was sent, then the trailer, in order; the journal counts exactly
/// that; the kernel carried it.
async fn assert_carried(sc: &Sidecar, sent: &[u8], trailer: &[u8], got: &[u8]) {
    assert_eq!(got.len(), sent.len() + trailer.len());
    assert_eq!(digest(got), digest(&[sent, trailer].concat()));
    let r = record(sc).await;
    assert_eq!(r["allowed"], true, "{r}");
    assert_eq!(r["bytes_up"], sent.len() as u64, "{r}");
    assert_eq!(r["bytes_down"], (sent.len() + trailer.len()) as u64, "{r}");
    assert_eq!(sc.admin().metric(SPLICED).await, 1);
    assert_eq!(sc.admin().metric(BUFFERED).await, 0);
}

/// The bytes a rustls client opens with: a ClientHello naming `name`.
fn client_hello(name: &str) -> Vec<u8> {
    let config = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_root_certificates(rustls::RootCertStore::empty())
    .with_no_client_auth();
    let name = ServerName::try_from(name.to_owned()).unwrap();
    let mut client = rustls::ClientConnection::new(Arc::new(config), name).unwrap();
    let mut hello = Vec::new();
    client.write_tls(&mut hello).unwrap();
    hello
}

#[tokio::test]
async fn a_connect_tunnel_carries_mebibytes_both_ways_intact_by_splice_and_journals_every_byte() {
    let trailer = pattern(MIB, 2);
    let (_dns, port, sc) = setup(trailer.clone(), "").await;
    let (head, s) = connect_tunnel(sc.proxy(), &format!("{HOST}:{port}")).await;
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    let sent = pattern(4 * MIB, 1);
    let got = exchange(s, sent.clone()).await;
    assert_carried(&sc, &sent, &trailer, &got).await;
    assert_eq!(record(&sc).await["status"], 200);
}

#[tokio::test]
async fn a_transparent_tls_tunnel_carries_mebibytes_both_ways_intact_by_splice_and_journals_every_byte()
 {
    let trailer = pattern(MIB, 4);
    let (_dns, _port, sc) = setup(trailer.clone(), "").await;
    // The ClientHello, then bulk bytes right behind it: what the listener read to find the
    // name goes upstream first, then the socket is spliced.
    let mut sent = client_hello(HOST);
    sent.extend(pattern(4 * MIB, 3));
    let s = TcpStream::connect(sc.tls()).await.unwrap();
    let got = exchange(s, sent.clone()).await;
    assert_carried(&sc, &sent, &trailer, &got).await;
    assert_eq!(record(&sc).await["via"], "tls");
}

#[tokio::test]
async fn a_client_that_shuts_its_write_side_still_receives_what_the_upstream_sends_after() {
    // The upstream sends its 2 MiB only once it has seen the client's end: the end must
    // reach it, and the way back must stay open.
    let trailer = pattern(2 * MIB, 5);
    let (_dns, port, sc) = setup(trailer.clone(), "").await;
    let (_, s) = connect_tunnel(sc.proxy(), &format!("{HOST}:{port}")).await;
    let got = exchange(s, b"last words".to_vec()).await;
    assert_carried(&sc, b"last words", &trailer, &got).await;
}

#[tokio::test]
async fn bytes_sent_in_the_same_write_as_the_connect_head_arrive_upstream_first_and_in_order() {
    let (_dns, port, sc) = setup(b"|end".to_vec(), "").await;
    let (head, s) =
        connect_tunnel_with(sc.proxy(), &format!("{HOST}:{port}"), b"early bytes;").await;
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    let got = exchange(s, b"then these".to_vec()).await;
    assert_eq!(String::from_utf8_lossy(&got), "early bytes;then these|end");
    let r = record(&sc).await;
    assert_eq!(r["bytes_up"], "early bytes;then these".len() as u64, "{r}");
    assert_eq!(sc.admin().metric(SPLICED).await, 1);
}

#[tokio::test]
async fn a_silent_spliced_tunnel_is_closed_by_the_idle_watchdog_and_journaled() {
    let (_dns, port, sc) = setup(Vec::new(), "  idle_timeout_ms: 300").await;
    let (_, mut s) = connect_tunnel(sc.proxy(), &format!("{HOST}:{port}")).await;
    s.write_all(b"ping").await.unwrap();
    let mut pong = [0u8; 4];
    s.read_exact(&mut pong).await.unwrap();
    assert_eq!(&pong, b"ping");
    let mut rest = Vec::new();
    let closed = tokio::time::timeout(PATIENCE, s.read_to_end(&mut rest)).await;
    assert!(closed.is_ok(), "the watchdog closed the silent tunnel");
    let r = record(&sc).await;
    assert!(
        r["error"].as_str().unwrap().contains("without traffic"),
        "{r}"
    );
    assert_eq!(
        (r["bytes_up"].as_u64(), r["bytes_down"].as_u64()),
        (Some(4), Some(4))
    );
    assert_eq!(sc.admin().metric(SPLICED).await, 1);
}

/// An upstream on [`UPSTREAM_IP`] that reads `first` bytes, then resets the connection.
async fn resetting_upstream(first: usize) -> u16 {
    let listener = tokio::net::TcpListener::bind((upstream_ip(), 0))
        .await
        .unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move {
        while let Ok((mut s, _)) = listener.accept().await {
            let mut got = vec![0u8; first];
            if s.read_exact(&mut got).await.is_ok() {
                s.set_zero_linger().unwrap();
            }
        }
    });
    port
}

#[tokio::test]
async fn a_client_that_resets_after_its_answer_has_closed_its_tunnel_not_failed_it() {
    let (_dns, port, sc) = setup(Vec::new(), "").await;
    let (_, mut s) = connect_tunnel(sc.proxy(), &format!("{HOST}:{port}")).await;
    s.write_all(b"ping").await.unwrap();
    let mut pong = [0u8; 4];
    s.read_exact(&mut pong).await.unwrap();
    assert_eq!(&pong, b"ping");
    // Closed with a reset, not a FIN, as many clients close once they have their answer.
    s.set_zero_linger().unwrap();
    drop(s);
    let r = record(&sc).await;
    assert_eq!(r["outcome"], "tunnel", "{r}");
    assert_eq!(
        (r["code"].as_str(), r["error"].as_str()),
        (None, None),
        "{r}"
    );
    assert_eq!(
        (r["bytes_up"].as_u64(), r["bytes_down"].as_u64()),
        (Some(4), Some(4)),
        "{r}"
    );
    assert_eq!(sc.admin().metric(SPLICED).await, 1);
}

#[tokio::test]
async fn an_upstream_that_resets_while_the_client_still_sends_fails_the_tunnel() {
    let port = resetting_upstream(4).await;
    let dns = resolver(vec![(HOST, vec![upstream_ip()])]).await;
    let sc = Sidecar::start(&Setup::new(&rules(port), dns.addr)).await;
    let (_, mut s) = connect_tunnel(sc.proxy(), &format!("{HOST}:{port}")).await;
    s.write_all(b"ping").await.unwrap();
    let mut rest = Vec::new();
    let _ = tokio::time::timeout(PATIENCE, s.read_to_end(&mut rest)).await;
    let r = record(&sc).await;
    assert_eq!(r["outcome"], "failed", "{r}");
    assert_eq!(r["code"], "AF-NET-013", "{r}");
    assert!(
        r["error"].as_str().unwrap().starts_with("the upstream: "),
        "{r}"
    );
}
