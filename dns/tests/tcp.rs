//! DNS over TCP is bounded: connections past the cap are closed unanswered and counted, and a
//! connection that brings no whole query is closed after `tcp_idle_secs`.

mod common;

use std::{
    net::IpAddr,
    time::{Duration, Instant},
};

use common::{
    SIDECAR_V4, Transport, WAIT, addresses, ask, closed_unanswered, query, start, tcp_answered,
};
use hickory_proto::rr::RecordType;
use tokio::{
    io::{AsyncReadExt, AsyncWriteExt},
    net::TcpStream,
};

#[tokio::test]
async fn tcp_connections_past_tcp_max_connections_are_closed_unanswered_and_counted() {
    let env = start(|config| config.tcp_max_connections = 2).await;
    let mut first = TcpStream::connect(env.addr).await.expect("connect");
    let mut second = TcpStream::connect(env.addr).await.expect("connect");
    // Positive control: within the cap both are answered, so both hold a place.
    assert!(tcp_answered(&mut first).await);
    assert!(tcp_answered(&mut second).await);

    let mut third = TcpStream::connect(env.addr).await.expect("connect");
    assert!(closed_unanswered(&mut third, WAIT).await);
    assert_eq!(env.metrics.snapshot().tcp_refused, 1);
    // UDP is not under the TCP cap.
    let answer = ask(env.addr, Transport::Udp, "example.com.", RecordType::A).await;
    assert_eq!(addresses(&answer), [IpAddr::V4(SIDECAR_V4)]);

    // A closed connection frees its place.
    drop(first);
    let deadline = Instant::now() + WAIT;
    loop {
        let mut again = TcpStream::connect(env.addr).await.expect("connect");
        if tcp_answered(&mut again).await {
            break;
        }
        assert!(Instant::now() < deadline, "no place freed after a close");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(tcp_answered(&mut second).await);
}

#[tokio::test]
async fn a_tcp_connection_that_brings_no_whole_query_is_closed_after_tcp_idle_secs() {
    let env = start(|config| config.tcp_idle_secs = 1).await;
    // Positive control: queries 400 ms apart keep a connection open well past the limit.
    let mut busy = TcpStream::connect(env.addr).await.expect("connect");
    let started = Instant::now();
    while started.elapsed() < Duration::from_millis(2500) {
        assert!(
            tcp_answered(&mut busy).await,
            "after {:?}",
            started.elapsed()
        );
        tokio::time::sleep(Duration::from_millis(400)).await;
    }

    // A query trickled in a byte every 200 ms is never whole in time: closed after 1 s.
    let bytes = query(9, "example.com.", RecordType::A)
        .to_vec()
        .expect("encode query");
    let mut framed = u16::try_from(bytes.len())
        .expect("fits")
        .to_be_bytes()
        .to_vec();
    framed.extend_from_slice(&bytes);
    let slow = TcpStream::connect(env.addr).await.expect("connect");
    let started = Instant::now();
    let (mut reader, mut writer) = slow.into_split();
    let trickle = tokio::spawn(async move {
        for byte in framed {
            if writer.write_all(&[byte]).await.is_err() {
                return;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    });
    let mut buf = [0u8; 1];
    let read = tokio::time::timeout(WAIT, reader.read(&mut buf)).await;
    let closed_after = started.elapsed();
    trickle.abort();
    assert!(
        matches!(read, Ok(Ok(0) | Err(_))),
        "closed without an answer: {read:?}"
    );
    assert!(
        closed_after >= Duration::from_millis(900) && closed_after < Duration::from_secs(3),
        "closed after {closed_after:?}"
    );
}
