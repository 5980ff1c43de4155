//! A service that goes around every route it was given: raw and packet sockets, frames built by
//! hand, the host's own addresses on every bridge (IPv4 and IPv6 link-local), IPv6 packets the
//! host might route on. Each case first shows, with an unconfined container of the test's own
//! on the same network, that the way out exists on this host; then that a service, under the
//! environment's confinement, cannot take it; and that the same service is governed (the
//! allowed host is reached through the sidecar).

use std::time::Duration;

use crate::conformance::{allowed_is_reached, up};
use crate::support::{HostEscapes, HostForwarding, Unconfined, field, probe, probe_plan};

/// A service cannot open a raw or packet socket, nor can its migration; a container with the
/// runtime's default capabilities can.
pub(crate) async fn a_service_cannot_open_a_raw_or_packet_socket(h: &dyn Unconfined) {
    let env = h.env("raw");
    let mut plan = probe_plan(h, &env, &["probe"]);
    // The migration runs under the same confinement: it exits 4 if a packet socket opens.
    plan.services[0].migrate = vec!["/af-probe".to_owned(), "fail-if-raw".to_owned()];
    h.runtime()
        .up(&plan, &af_orchestrator::runtime::Quiet)
        .await
        .unwrap_or_else(|e| panic!("up (the migration opened a raw socket?): {}", e.report()));
    allowed_is_reached(h, &env, "probe").await;
    let free = h.unconfined_probe(&env, &["raw"]).await;
    assert_eq!(
        field(&free, "packet"),
        "opened",
        "control: with the default capabilities a packet socket opens: {free}"
    );
    let confined = probe(h, &env, "probe", &["raw"]).await;
    for kind in ["inet_raw", "inet6_raw", "packet"] {
        assert!(
            field(&confined, kind).starts_with("denied"),
            "a service opened a {kind} socket: {confined}"
        );
    }
    assert_eq!(field(&confined, "udp"), "opened", "{confined}");
}

/// A service cannot reach a host listener on `[::]` or on `0.0.0.0` by any address of any
/// bridge, over IPv4 or IPv6 link-local, whether the host forwards IPv6 or not.
/// `dual` listens on `[::]:dual`, `v4` on `0.0.0.0:v4`; both accept from the host itself.
pub(crate) async fn a_service_cannot_reach_a_host_listener_by_any_bridge_address(
    h: &dyn HostEscapes,
    dual: u16,
    v4: u16,
) {
    let env = h.env("hostaddr");
    up(h, &env, &["probe"]).await;
    allowed_is_reached(h, &env, "probe").await;
    let addrs = h.host_addrs(&env).await;
    assert!(
        addrs
            .iter()
            .any(|a| a.on_internal && a.from_host.contains("fe80")),
        "the internal network's bridge has a link-local address: {addrs:?}"
    );
    for a in addrs.iter().filter(|a| a.on_host) {
        for port in [dual, v4]
            .into_iter()
            .filter(|p| *p == dual || !a.from_host.contains(':'))
        {
            let target = a.host_target(port);
            let on_host = af_fixtures::escape::parse_scoped(&target)
                .unwrap_or_else(|e| panic!("{target}: {e}"));
            // A bridge that just came up keeps its link-local address tentative for a moment.
            let mut outcome = af_fixtures::sim::tcp_connect(on_host).await;
            for _ in 0..10 {
                if outcome.is_ok() {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(300)).await;
                outcome = af_fixtures::sim::tcp_connect(on_host).await;
            }
            if let Err(e) = outcome {
                panic!("control: the host listener accepts at {target} ({a:?}): {e}");
            }
        }
    }
    let link_local = addrs
        .iter()
        .find(|a| a.on_internal && a.from_host.contains("fe80"))
        .map(|a| a.service_target(dual))
        .unwrap_or_default();
    let free = h.unconfined_probe(&env, &["tcp", &link_local]).await;
    assert_eq!(
        field(&free, "connected"),
        "true",
        "control: a container with IPv6 on reaches the host at {link_local}: {free}"
    );
    let forwarding = HostForwarding::set(true);
    for on in [true, false] {
        forwarding.turn(on);
        for a in &addrs {
            for port in [dual, v4] {
                let target = a.service_target(port);
                let v = probe(h, &env, "probe", &["tcp", &target]).await;
                assert_eq!(
                    field(&v, "connected"),
                    "false",
                    "a service reached the host at {target} ({}, IPv6 forwarding {on}): {v}",
                    a.bridge
                );
            }
        }
    }
    drop(forwarding);
    let v = probe(h, &env, "probe", &["ipv6"]).await;
    assert_eq!(field(&v, "addrs"), "", "a service has no IPv6 address: {v}");
}

/// A service cannot have an IPv6 packet routed on by the host, whether the host forwards IPv6
/// or not: neither through its routes nor in a frame it builds itself. An unconfined container
/// on the same network gets its frame through exactly when the host forwards.
pub(crate) async fn a_service_cannot_have_an_ipv6_packet_forwarded_by_the_host(
    h: &dyn HostEscapes,
) {
    let env = h.env("fwd6");
    up(h, &env, &["probe"]).await;
    allowed_is_reached(h, &env, "probe").await;
    // Made first, so that what it puts back is what the host had before the island (Docker
    // turns IPv6 forwarding on when it makes an IPv6 network).
    let forwarding = HostForwarding::set(true);
    let island = h.island(&env).await;
    let mac = h.next_hop_mac(&env).await;
    for on in [true, false] {
        forwarding.turn(on);
        let control = format!("control-{on}");
        let free = h
            .unconfined_probe(
                &env,
                &[
                    "frame6",
                    "eth0",
                    &mac,
                    "fdaf:17::5",
                    &island.receiver,
                    &control,
                ],
            )
            .await;
        assert_eq!(field(&free, "sent"), "true", "control frame: {free}");
        let via_frame = format!("service-frame-{on}");
        let v = probe(
            h,
            &env,
            "probe",
            &[
                "frame6",
                "eth0",
                &mac,
                "fdaf:17::5",
                &island.receiver,
                &via_frame,
            ],
        )
        .await;
        assert_eq!(field(&v, "sent"), "false", "a service sent a frame: {v}");
        let via_route = format!("service-route-{on}");
        let v = probe(h, &env, "probe", &["udp", &island.receiver, &via_route]).await;
        assert_eq!(field(&v, "sent"), "false", "a service sent IPv6: {v}");
        let received = wait_for(h, &island, &control, on).await;
        assert_eq!(
            received.contains(&control),
            on,
            "control: the host routes the frame exactly when it forwards IPv6 ({on}): {received:?}"
        );
        assert!(
            !received.iter().any(|t| t.starts_with("service-")),
            "a service's packet was forwarded (IPv6 forwarding {on}): {received:?}"
        );
    }
}

/// What the island received, waiting up to a few seconds for `expected` when it should come.
async fn wait_for(
    h: &dyn HostEscapes,
    island: &crate::support::Island,
    expected: &str,
    should_arrive: bool,
) -> Vec<String> {
    let rounds = if should_arrive { 20 } else { 6 };
    let mut received = Vec::new();
    for _ in 0..rounds {
        received = h.island_received(island).await;
        if received.iter().any(|t| t == expected) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    received
}
