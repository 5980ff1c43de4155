//! Binding, configuration errors and shutdown.

#![allow(
    clippy::expect_used,
    reason = "test helpers fail the test by panicking, like #[test] functions"
)]

mod common;

use std::sync::Arc;

use af_dns::{DnsError, DnsServer, IgnoreSightings};
use common::{Transport, config};

fn upstream() -> std::net::SocketAddr {
    "127.0.0.1:5399".parse().expect("addr")
}

#[tokio::test]
async fn several_udp_sockets_share_the_port_and_tcp_uses_the_same_one() {
    let mut config = config(upstream());
    config.udp_sockets = 4;
    let server = DnsServer::bind(config, Arc::new(IgnoreSightings))
        .await
        .expect("binds");
    assert_eq!(server.udp_sockets(), 4);
    assert_ne!(server.local_addr().port(), 0);
    for _ in 0..20 {
        common::assert_answered_as_outside(server.local_addr(), Transport::Udp).await;
    }
    common::assert_answered_as_outside(server.local_addr(), Transport::Tcp).await;
}

#[tokio::test]
async fn a_taken_address_fails_before_serving_with_af_net_002() {
    let first = DnsServer::bind(config(upstream()), Arc::new(IgnoreSightings))
        .await
        .expect("binds");
    let mut taken = config(upstream());
    taken.listen = first.local_addr();
    let error = DnsServer::bind(taken, Arc::new(IgnoreSightings))
        .await
        .err()
        .expect("second bind fails");
    assert!(matches!(error, DnsError::Bind { .. }), "{error:?}");
    assert!(error.to_string().starts_with("AF-NET-002"), "{error}");
}

#[tokio::test]
async fn a_udp_port_held_by_another_reuseport_socket_is_not_silently_shared() {
    // Another program's socket with SO_REUSEPORT would otherwise take half of our queries.
    let other =
        socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::DGRAM, None).expect("socket");
    other.set_reuse_port(true).expect("reuseport");
    other
        .bind(
            &"127.0.0.1:0"
                .parse::<std::net::SocketAddr>()
                .expect("addr")
                .into(),
        )
        .expect("bind");
    let held = other.local_addr().expect("addr").as_socket().expect("inet");

    let mut config = config(upstream());
    config.listen = held;
    let error = DnsServer::bind(config, Arc::new(IgnoreSightings))
        .await
        .err()
        .expect("refused, not shared");
    assert!(
        matches!(
            error,
            DnsError::Bind {
                transport: "udp",
                ..
            }
        ),
        "{error:?}"
    );
}

#[tokio::test]
async fn an_invalid_configuration_fails_with_af_net_030_and_a_next_line() {
    let mut invalid = config(upstream());
    invalid.inside_subnets.clear();
    let error = DnsServer::bind(invalid, Arc::new(IgnoreSightings))
        .await
        .err()
        .expect("refused");
    let text = error.to_string();
    assert!(
        text.starts_with("AF-NET-030 invalid DNS configuration: "),
        "{text}"
    );
    assert!(text.contains("\nNext: "), "{text}");
}

#[tokio::test]
async fn serve_until_stops_gracefully_and_frees_the_port() {
    let server = DnsServer::bind(config(upstream()), Arc::new(IgnoreSightings))
        .await
        .expect("binds");
    let addr = server.local_addr();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let serving = tokio::spawn(server.serve_until(async {
        let _ = stopped.await;
    }));
    common::assert_answered_as_outside(addr, Transport::Udp).await;
    stop.send(()).expect("still serving");
    serving.await.expect("task").expect("clean stop");

    let mut again = config(upstream());
    again.listen = addr;
    let server = DnsServer::bind(again, Arc::new(IgnoreSightings))
        .await
        .expect("port is free again");
    server.shutdown().await.expect("clean stop");
}
