//! Shared helpers: a running server with a test resolver behind it, a recording observer, and a
//! DNS client (hickory-proto messages over UDP and TCP on loopback).

#![allow(dead_code)] // Each test binary uses a different part of this module.
#![allow(
    clippy::expect_used,
    reason = "test helpers fail the test by panicking, like #[test] functions"
)]

use std::{
    net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr},
    sync::{Arc, Mutex},
    time::Duration,
};

use af_dns::{DnsConfig, DnsServer, Metrics, MetricsSnapshot, QueryObserver, Sighting};
use af_fixtures::test_resolver::TestResolver;
use hickory_proto::{
    op::{Message, MessageType, OpCode, Query},
    rr::{DNSClass, Name, RecordType},
};
use tokio::{
    io::{AsyncReadExt, AsyncWriteExt},
    net::{TcpStream, UdpSocket},
};

/// The sidecar's inside addresses in every test.
pub(crate) const SIDECAR_V4: Ipv4Addr = Ipv4Addr::new(198, 51, 100, 2);
pub(crate) const SIDECAR_V6: Ipv6Addr = Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 2);
/// The environment's network in every test.
pub(crate) const INSIDE_SUBNET: &str = "198.51.100.0/24";

/// How long a test waits for any single answer.
pub(crate) const WAIT: Duration = Duration::from_secs(5);

/// Both transports the server must serve.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Transport {
    Udp,
    Tcp,
}

pub(crate) const TRANSPORTS: [Transport; 2] = [Transport::Udp, Transport::Tcp];

/// A recording observer.
#[derive(Default)]
pub(crate) struct Recorder(Mutex<Vec<Sighting>>);

impl QueryObserver for Recorder {
    fn first_seen(&self, sighting: &Sighting) {
        if let Ok(mut seen) = self.0.lock() {
            seen.push(sighting.clone());
        }
    }
}

impl Recorder {
    pub(crate) fn sightings(&self) -> Vec<Sighting> {
        self.0.lock().map(|s| s.clone()).unwrap_or_default()
    }

    /// Waits until at least `count` sightings arrived (they come from another thread).
    pub(crate) async fn wait_for(&self, count: usize) -> Vec<Sighting> {
        let deadline = tokio::time::Instant::now() + WAIT;
        loop {
            let seen = self.sightings();
            if seen.len() >= count || tokio::time::Instant::now() > deadline {
                return seen;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
}

/// A running af-dns server on loopback, with the test resolver it forwards inside names to.
pub(crate) struct Env {
    pub addr: SocketAddr,
    pub resolver: TestResolver,
    pub recorder: Arc<Recorder>,
    pub metrics: Metrics,
    pub udp_sockets: usize,
    _server: DnsServer,
}

/// The inside table used by most tests: one real service, one name that points outside.
pub(crate) fn table() -> Vec<(&'static str, Vec<IpAddr>)> {
    vec![
        ("db", vec![ip("198.51.100.20")]),
        (
            "api.svc.cluster.local",
            vec![ip("198.51.100.21"), ip("198.51.100.22")],
        ),
        (
            "leak.svc.cluster.local",
            vec![ip("198.51.100.23"), ip("203.0.113.9")],
        ),
        ("v6only", vec![ip("2001:db8::20")]),
    ]
}

pub(crate) fn ip(text: &str) -> IpAddr {
    text.parse().expect("test address")
}

/// A configuration for loopback with the test resolver as upstream.
pub(crate) fn config(upstream: SocketAddr) -> DnsConfig {
    let mut config = DnsConfig::new(
        SIDECAR_V4,
        vec![INSIDE_SUBNET.parse().expect("subnet")],
        upstream,
    );
    config.listen = SocketAddr::from((Ipv4Addr::LOCALHOST, 0));
    config.udp_sockets = 2;
    config.inside_names = vec!["db".into(), "v6only".into()];
    config.inside_zones = vec!["svc.cluster.local".into()];
    config.upstream_timeout_ms = 1000;
    config
}

/// Starts the test resolver and a server configured by `adjust`.
pub(crate) async fn start(adjust: impl FnOnce(&mut DnsConfig)) -> Env {
    let resolver = TestResolver::start(table()).await.expect("test resolver");
    let mut config = config(resolver.addr);
    adjust(&mut config);
    let recorder = Arc::new(Recorder::default());
    let server = DnsServer::bind(config, recorder.clone())
        .await
        .expect("server binds");
    Env {
        addr: server.local_addr(),
        metrics: server.metrics(),
        udp_sockets: server.udp_sockets(),
        resolver,
        recorder,
        _server: server,
    }
}

/// A one-question query message.
pub(crate) fn query(id: u16, name: &str, record_type: RecordType) -> Message {
    let mut message = Message::new(id, MessageType::Query, OpCode::Query);
    message.metadata.recursion_desired = true;
    let mut question = Query::query(Name::from_ascii(name).expect("test name"), record_type);
    question.set_query_class(DNSClass::IN);
    message.add_query(question);
    message
}

/// Sends `message` and returns the decoded answer.
pub(crate) async fn exchange(addr: SocketAddr, transport: Transport, message: &Message) -> Message {
    let bytes = message.to_vec().expect("encode query");
    let reply = match transport {
        Transport::Udp => udp_raw(addr, &bytes).await.expect("UDP answer in time"),
        Transport::Tcp => tcp_raw(addr, &bytes).await.expect("TCP answer in time"),
    };
    let answer = Message::from_vec(&reply).expect("decode answer");
    assert_eq!(
        answer.metadata.id, message.metadata.id,
        "answer matches query id"
    );
    answer
}

/// Asks one question.
pub(crate) async fn ask(
    addr: SocketAddr,
    transport: Transport,
    name: &str,
    record_type: RecordType,
) -> Message {
    exchange(addr, transport, &query(0x5eed, name, record_type)).await
}

/// Sends raw bytes over UDP; `None` when no answer comes within a second.
pub(crate) async fn udp_raw(addr: SocketAddr, bytes: &[u8]) -> Option<Vec<u8>> {
    let socket = UdpSocket::bind((Ipv4Addr::LOCALHOST, 0))
        .await
        .expect("bind client");
    socket.send_to(bytes, addr).await.expect("send");
    let mut buf = vec![0u8; 65_535];
    match tokio::time::timeout(Duration::from_secs(1), socket.recv_from(&mut buf)).await {
        Ok(Ok((len, _))) => {
            buf.truncate(len);
            Some(buf)
        }
        _ => None,
    }
}

/// Sends one length-prefixed message over a new TCP connection.
pub(crate) async fn tcp_raw(addr: SocketAddr, bytes: &[u8]) -> Option<Vec<u8>> {
    let mut stream = TcpStream::connect(addr).await.expect("connect");
    tcp_exchange(&mut stream, bytes).await
}

/// Sends one length-prefixed message on an open connection and reads one answer; `None` when
/// the server closes it or no answer comes in time.
pub(crate) async fn tcp_exchange(stream: &mut TcpStream, bytes: &[u8]) -> Option<Vec<u8>> {
    let len = u16::try_from(bytes.len()).expect("fits TCP framing");
    stream.write_all(&len.to_be_bytes()).await.ok()?;
    stream.write_all(bytes).await.ok()?;
    let read = async {
        let mut prefix = [0u8; 2];
        stream.read_exact(&mut prefix).await.ok()?;
        let mut reply = vec![0u8; usize::from(u16::from_be_bytes(prefix))];
        stream.read_exact(&mut reply).await.ok()?;
        Some(reply)
    };
    tokio::time::timeout(WAIT, read).await.ok().flatten()
}

/// Asks for `example.com. A` on an open connection: whether the sidecar's address came back.
pub(crate) async fn tcp_answered(stream: &mut TcpStream) -> bool {
    let bytes = query(0x7cb, "example.com.", RecordType::A)
        .to_vec()
        .expect("encode query");
    tcp_exchange(stream, &bytes)
        .await
        .and_then(|reply| Message::from_vec(&reply).ok())
        .is_some_and(|answer| addresses(&answer) == [IpAddr::V4(SIDECAR_V4)])
}

/// Whether the server closes `stream` without a byte within `within`.
pub(crate) async fn closed_unanswered(stream: &mut TcpStream, within: Duration) -> bool {
    let mut buf = [0u8; 1];
    matches!(
        tokio::time::timeout(within, stream.read(&mut buf)).await,
        Ok(Ok(0) | Err(_))
    )
}

/// Asks `example.com. A` over `transport` and asserts the answer is the sidecar's own address,
/// as for every outside name.
pub(crate) async fn assert_answered_as_outside(addr: SocketAddr, transport: Transport) {
    let answer = ask(addr, transport, "example.com.", RecordType::A).await;
    assert_eq!(
        addresses(&answer),
        [IpAddr::V4(SIDECAR_V4)],
        "{transport:?}"
    );
}

/// The addresses in an answer, in order.
pub(crate) fn addresses(answer: &Message) -> Vec<IpAddr> {
    answer
        .answers
        .iter()
        .filter_map(|record| match &record.data {
            hickory_proto::rr::RData::A(a) => Some(IpAddr::V4(a.0)),
            hickory_proto::rr::RData::AAAA(aaaa) => Some(IpAddr::V6(aaaa.0)),
            _ => None,
        })
        .collect()
}

/// Waits until the counters satisfy `done` (sightings are counted after the answer is sent).
pub(crate) async fn settled(
    metrics: &Metrics,
    done: impl Fn(&MetricsSnapshot) -> bool,
) -> MetricsSnapshot {
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let snapshot = metrics.snapshot();
        if done(&snapshot) || tokio::time::Instant::now() > deadline {
            return snapshot;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}
