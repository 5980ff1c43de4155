//! First sightings reach the observer once per (name, type), off the query path, within bounds.

#![allow(
    clippy::expect_used,
    reason = "test helpers fail the test by panicking, like #[test] functions"
)]

mod common;

use std::{
    net::SocketAddr,
    sync::{Arc, Mutex, mpsc},
    time::Duration,
};

use af_dns::{AnswerKind, DnsServer, QueryObserver, RecordType, Sighting};
use common::{Transport, ask, query, start};
use tokio::{
    io::{AsyncReadExt, AsyncWriteExt},
    net::TcpStream,
};

#[tokio::test]
async fn sightings_are_reported_once_per_name_and_type() {
    let env = start(|_| {}).await;
    for _ in 0..3 {
        for transport in common::TRANSPORTS {
            ask(env.addr, transport, "Api.Example.com.", RecordType::A).await;
            ask(env.addr, transport, "api.example.com.", RecordType::TXT).await;
            ask(env.addr, transport, "db.", RecordType::A).await;
        }
    }
    let sightings = env.recorder.wait_for(3).await;
    tokio::time::sleep(Duration::from_millis(100)).await;
    let sightings_later = env.recorder.sightings();
    assert_eq!(sightings.len(), 3, "{sightings:?}");
    assert_eq!(sightings_later.len(), 3, "no duplicates arrive later");
    let first = &sightings[0];
    assert_eq!(first.name, "api.example.com");
    assert_eq!(first.record_type, RecordType::A);
    assert_eq!(first.answer, AnswerKind::Outside);
    assert!(first.client.ip().is_loopback());
    assert!(
        sightings
            .iter()
            .any(|s| s.name == "db" && s.answer == AnswerKind::Inside)
    );
    assert_eq!(env.metrics.snapshot().sightings_sent, 3);
}

/// Sends every query on one TCP connection (no loss, unlike UDP) while reading the answers.
async fn storm(addr: SocketAddr, names: usize) -> usize {
    let stream = TcpStream::connect(addr).await.expect("connect");
    let (mut reader, mut writer) = stream.into_split();
    let send = tokio::spawn(async move {
        let mut buf = Vec::new();
        for i in 0..names {
            let bytes = query(i as u16, &format!("n{i}.storm.example."), RecordType::A)
                .to_vec()
                .expect("encode");
            buf.extend_from_slice(&(bytes.len() as u16).to_be_bytes());
            buf.extend_from_slice(&bytes);
            if buf.len() > 16_384 {
                writer.write_all(&buf).await.expect("write");
                buf.clear();
            }
        }
        writer.write_all(&buf).await.expect("write");
        writer
    });
    let mut answered = 0;
    let mut prefix = [0u8; 2];
    let mut body = vec![0u8; 512];
    while answered < names {
        let read = async {
            reader.read_exact(&mut prefix).await?;
            let len = usize::from(u16::from_be_bytes(prefix));
            reader.read_exact(&mut body[..len]).await
        };
        tokio::time::timeout(common::WAIT, read)
            .await
            .expect("answers keep coming")
            .expect("read answer");
        answered += 1;
    }
    drop(send.await.expect("sender"));
    answered
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_storm_of_distinct_names_keeps_the_seen_set_within_its_bound() {
    const NAMES: usize = 50_000;
    const CAPACITY: usize = 1024;
    let env = start(|config| {
        config.seen_capacity = CAPACITY;
        config.sighting_queue = 100_000;
        // This test is about the seen set, not the reporting budget.
        config.sightings_per_second = 1_000_000;
    })
    .await;
    assert_eq!(storm(env.addr, NAMES).await, NAMES);

    let snapshot = common::settled(&env.metrics, |s| {
        s.sightings_sent + s.sightings_dropped == NAMES as u64
    })
    .await;
    assert_eq!(snapshot.outside, NAMES as u64);
    assert_eq!(
        snapshot.sightings_sent + snapshot.sightings_dropped,
        NAMES as u64
    );
    assert!(snapshot.seen() <= CAPACITY as u64, "{snapshot:?}");
    assert_eq!(
        snapshot.seen_evicted,
        snapshot.sightings_sent - snapshot.seen()
    );
    // The last names are still remembered: asking again reports nothing new.
    let before = snapshot.sightings_sent;
    ask(
        env.addr,
        Transport::Udp,
        &format!("n{}.storm.example.", NAMES - 1),
        RecordType::A,
    )
    .await;
    // Positive control: a new name is still reported.
    ask(
        env.addr,
        Transport::Udp,
        "fresh.storm.example.",
        RecordType::A,
    )
    .await;
    let after = common::settled(&env.metrics, |s| s.sightings_sent > before).await;
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert_eq!(after.sightings_sent, before + 1);
    assert_eq!(env.metrics.snapshot().sightings_sent, before + 1);
}

/// An observer that blocks until released, like a journal stuck on a full disk.
struct Stuck(Mutex<mpsc::Receiver<()>>);

impl QueryObserver for Stuck {
    fn first_seen(&self, _sighting: &Sighting) {
        if let Ok(gate) = self.0.lock() {
            // Returns when the test drops its sender.
            let _ = gate.recv();
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stuck_observer_delays_no_answer_and_drops_are_counted() {
    const NAMES: usize = 5_000;
    let resolver = af_fixtures::test_resolver::TestResolver::start(common::table())
        .await
        .expect("resolver");
    let mut config = common::config(resolver.addr);
    config.sighting_queue = 16;
    config.sightings_per_second = 1_000_000;
    let (release, gate) = mpsc::channel();
    let server = DnsServer::bind(config, Arc::new(Stuck(Mutex::new(gate))))
        .await
        .expect("binds");

    assert_eq!(storm(server.local_addr(), NAMES).await, NAMES);
    let snapshot = common::settled(&server.metrics(), |s| {
        s.sightings_sent + s.sightings_dropped == NAMES as u64
    })
    .await;
    assert_eq!(snapshot.outside, NAMES as u64);
    // The observer thread holds one sighting, the queue 16; the rest were dropped, not awaited.
    assert!(snapshot.sightings_sent <= 17, "{snapshot:?}");
    assert_eq!(
        snapshot.sightings_dropped,
        NAMES as u64 - snapshot.sightings_sent
    );
    drop(release);
}
