//! Inside names go to the runtime's resolver and are kept only if every address is inside.

mod common;

use std::{net::IpAddr, time::Duration};

use af_dns::AnswerKind;
use common::{SIDECAR_V4, TRANSPORTS, Transport, addresses, ask, ip, start};
use hickory_proto::{op::ResponseCode, rr::RecordType};

#[tokio::test]
async fn inside_service_name_is_forwarded_and_its_real_address_comes_back() {
    let env = start(|_| {}).await;
    for transport in TRANSPORTS {
        let answer = ask(env.addr, transport, "db.", RecordType::A).await;
        assert_eq!(answer.response_code, ResponseCode::NoError);
        assert_eq!(addresses(&answer), [ip("198.51.100.20")], "{transport:?}");

        let answer = ask(env.addr, transport, "API.svc.cluster.local.", RecordType::A).await;
        assert_eq!(
            addresses(&answer),
            [ip("198.51.100.21"), ip("198.51.100.22")],
            "{transport:?}"
        );
        assert!(answer.answers.iter().all(|r| r.ttl <= 5), "TTL capped");
    }
    let asked = env.resolver.queries();
    assert!(
        asked.contains(&("db".to_owned(), RecordType::A)),
        "{asked:?}"
    );
    let sightings = env.recorder.wait_for(2).await;
    assert!(
        sightings.iter().all(|s| s.answer == AnswerKind::Inside),
        "{sightings:?}"
    );
}

#[tokio::test]
async fn configured_inside_name_with_a_dot_is_forwarded() {
    let env = start(|config| config.inside_names = vec!["Cache.Internal".into()]).await;
    let answer = ask(env.addr, Transport::Udp, "cache.internal.", RecordType::A).await;
    // Not in the test resolver's table: NXDOMAIN upstream, so it is answered as outside.
    assert_eq!(addresses(&answer), [IpAddr::V4(SIDECAR_V4)]);
    assert_eq!(
        env.resolver.queries(),
        [("cache.internal".to_owned(), RecordType::A)],
        "it was asked of the runtime resolver"
    );
}

#[tokio::test]
async fn inside_looking_name_with_an_outside_address_is_answered_as_outside() {
    let env = start(|_| {}).await;
    for transport in TRANSPORTS {
        let answer = ask(
            env.addr,
            transport,
            "leak.svc.cluster.local.",
            RecordType::A,
        )
        .await;
        assert_eq!(
            addresses(&answer),
            [IpAddr::V4(SIDECAR_V4)],
            "{transport:?}"
        );
    }
    let sightings = env.recorder.wait_for(1).await;
    assert_eq!(sightings[0].answer, AnswerKind::Outside);
    assert_eq!(sightings[0].name, "leak.svc.cluster.local");
}

#[tokio::test]
async fn an_unlisted_single_label_name_is_outside_and_never_reaches_the_runtime_resolver() {
    let env = start(|_| {}).await;
    let answer = ask(env.addr, Transport::Udp, "printer.", RecordType::A).await;
    assert_eq!(addresses(&answer), [IpAddr::V4(SIDECAR_V4)]);
    assert!(
        env.resolver.queries().is_empty(),
        "a made-up short name must not leave through the runtime's resolver"
    );
    // Positive control: a listed short name is asked of the runtime's resolver.
    let db = ask(env.addr, Transport::Udp, "db.", RecordType::A).await;
    assert_eq!(addresses(&db), [ip("198.51.100.20")]);
    assert_eq!(env.resolver.queries().len(), 1);
}

#[tokio::test]
async fn forwarding_unlisted_single_labels_is_opt_in() {
    let env = start(|config| config.forward_unlisted_single_labels = true).await;
    let answer = ask(env.addr, Transport::Udp, "printer.", RecordType::A).await;
    // The runtime's resolver does not know it: still the sidecar's address, but it was asked.
    assert_eq!(addresses(&answer), [IpAddr::V4(SIDECAR_V4)]);
    assert_eq!(env.resolver.queries().len(), 1);
}

#[tokio::test]
async fn inside_name_without_an_address_of_that_type_is_empty_noerror() {
    let env = start(|config| {
        config.allow_ipv6 = true;
        config.sidecar_v6 = Some(common::SIDECAR_V6);
    })
    .await;
    // `db` has only IPv4: its AAAA must be empty, not the sidecar (clients would prefer it).
    let answer = ask(env.addr, Transport::Udp, "db.", RecordType::AAAA).await;
    assert_eq!(answer.response_code, ResponseCode::NoError);
    assert!(answer.answers.is_empty(), "{answer:?}");
}

#[tokio::test]
async fn inside_ipv6_address_outside_the_subnets_is_answered_as_outside() {
    let env = start(|_| {}).await;
    // 2001:db8::20 is not in the inside subnet; IPv6 is not allowed, so AAAA is empty.
    let answer = ask(env.addr, Transport::Udp, "v6only.", RecordType::AAAA).await;
    assert!(answer.answers.is_empty(), "{answer:?}");
    let sightings = env.recorder.wait_for(1).await;
    assert_eq!(sightings[0].answer, AnswerKind::Outside);
}

#[tokio::test]
async fn inside_names_never_forward_types_other_than_addresses() {
    let env = start(|_| {}).await;
    for record_type in [
        RecordType::TXT,
        RecordType::SRV,
        RecordType::ANY,
        RecordType::HTTPS,
    ] {
        let answer = ask(env.addr, Transport::Udp, "db.", record_type).await;
        assert_eq!(answer.response_code, ResponseCode::NoError);
        assert!(answer.answers.is_empty(), "{record_type}");
    }
    assert!(
        env.resolver.queries().is_empty(),
        "{:?}",
        env.resolver.queries()
    );
}

#[tokio::test]
async fn silent_runtime_resolver_gives_servfail_for_inside_names_only() {
    // A UDP socket that never answers stands in for a dead runtime resolver.
    let silent = tokio::net::UdpSocket::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let resolver_addr = silent.local_addr().expect("addr");
    let recorder = std::sync::Arc::new(common::Recorder::default());
    let mut config = common::config(resolver_addr);
    config.upstream_timeout_ms = 200;
    let server = af_dns::DnsServer::bind(config, recorder)
        .await
        .expect("binds");

    let answer = ask(server.local_addr(), Transport::Udp, "db.", RecordType::A).await;
    assert_eq!(answer.response_code, ResponseCode::ServFail);
    common::assert_answered_as_outside(server.local_addr(), Transport::Udp).await;
    assert_eq!(server.metrics().snapshot().failed, 1);
}

#[tokio::test]
async fn an_inside_host_is_answered_here_and_never_asked_of_the_runtime_resolver() {
    let env = start(|config| {
        config
            .inside_subnets
            .push("2001:db8::40/128".parse().expect("net"));
        config.inside_hosts = [(
            "Worker.af-pr-1.svc.cluster.local".to_owned(),
            vec![ip("198.51.100.40"), ip("2001:db8::40")],
        )]
        .into();
    })
    .await;
    for transport in TRANSPORTS {
        let name = "worker.af-pr-1.svc.cluster.local.";
        let a = ask(env.addr, transport, name, RecordType::A).await;
        assert_eq!(a.response_code, ResponseCode::NoError);
        assert_eq!(addresses(&a), [ip("198.51.100.40")], "{transport:?}");
        let aaaa = ask(env.addr, transport, name, RecordType::AAAA).await;
        assert_eq!(addresses(&aaaa), [ip("2001:db8::40")], "{transport:?}");
        let txt = ask(env.addr, transport, name, RecordType::TXT).await;
        assert!(txt.answers.is_empty(), "only addresses: {txt:?}");
    }
    assert!(
        env.resolver.queries().is_empty(),
        "a host is never forwarded: {:?}",
        env.resolver.queries()
    );
    // Positive control: the same server still forwards a listed inside name.
    let db = ask(env.addr, Transport::Udp, "db.", RecordType::A).await;
    assert_eq!(addresses(&db), [ip("198.51.100.20")]);
    assert_eq!(env.resolver.queries().len(), 1);
}

#[test]
fn an_inside_host_outside_the_inside_subnets_is_refused() {
    let mut config = common::config(([127, 0, 0, 1], 9).into());
    config.inside_hosts = [("web".to_owned(), vec![ip("203.0.113.5")])].into();
    let error = config.validate().expect_err("refused").to_string();
    assert!(error.contains("AF-NET-030"), "{error}");
    assert!(error.contains("203.0.113.5"), "{error}");
}

/// A UDP answer fits what the client can take: 512 bytes without EDNS (cut, with the
/// truncation flag, so the client asks again over TCP), the size its EDNS names with it; TCP
/// carries the whole answer.
#[tokio::test]
async fn a_udp_answer_is_cut_to_the_size_the_client_takes() {
    let many: Vec<IpAddr> = (1..=60).map(|n| ip(&format!("198.51.100.{n}"))).collect();
    let env = start(|config| {
        config.inside_hosts = [("pool".to_owned(), many.clone())].into();
    })
    .await;
    let plain = common::query(0x512, "pool.", RecordType::A);
    let bytes = plain.to_vec().expect("encode");
    let reply = common::udp_raw(env.addr, &bytes).await.expect("answered");
    assert!(reply.len() <= 512, "{} bytes without EDNS", reply.len());
    let cut = hickory_proto::op::Message::from_vec(&reply).expect("decodes");
    assert!(cut.metadata.truncation, "the cut answer says so");
    assert!(addresses(&cut).len() < many.len(), "{cut:?}");

    let mut with_edns = common::query(0x1000, "pool.", RecordType::A);
    let mut edns = hickory_proto::op::Edns::new();
    edns.set_max_payload(4096);
    with_edns.set_edns(edns);
    let whole = common::exchange(env.addr, Transport::Udp, &with_edns).await;
    assert!(!whole.metadata.truncation);
    assert_eq!(addresses(&whole), many, "EDNS 4096 takes all 60");

    let tcp = ask(env.addr, Transport::Tcp, "pool.", RecordType::A).await;
    assert_eq!(addresses(&tcp), many, "TCP carries all of them");
}

/// A query whose questions alone are more than a datagram without EDNS carries (found by the
/// fuzzer: six long names) is still answered, as hickory answers it: the header alone, its id,
/// `SERVFAIL`.
#[tokio::test]
async fn a_query_too_large_to_echo_in_a_datagram_is_answered_servfail_with_the_header_alone() {
    let env = start(|_| {}).await;
    // Four labels of one letter each, no two names sharing one (that would be compressed).
    let long = |letters: [char; 4]| {
        let [a, b, c, d] = letters.map(|l| std::iter::repeat_n(l, 61).collect::<String>());
        format!("{a}.{b}.{c}.{d}.")
    };
    let mut query = common::query(0x0bad, &long(['a', 'b', 'c', 'd']), RecordType::A);
    for first in [['e', 'f', 'g', 'h'], ['i', 'j', 'k', 'l']] {
        query.queries.push(hickory_proto::op::Query::query(
            hickory_proto::rr::Name::from_ascii(long(first)).expect("name"),
            RecordType::A,
        ));
    }
    let bytes = query.to_vec().expect("encode");
    assert!(
        bytes.len() > 512,
        "the control: {} bytes asked",
        bytes.len()
    );
    let reply = common::udp_raw(env.addr, &bytes).await.expect("answered");
    let answer = hickory_proto::op::Message::from_vec(&reply).expect("decodes");
    assert_eq!(answer.metadata.id, 0x0bad);
    assert_eq!(answer.metadata.response_code, ResponseCode::ServFail);
    assert!(
        answer.queries.is_empty() && answer.answers.is_empty(),
        "{answer:?}"
    );
}

/// A socket keeps at most `udp_max_in_flight` queries waiting on the runtime's resolver: with
/// it silent, the inside names past the bound are dropped and counted, while an outside name
/// is still answered at once; once the waiting ones have their `SERVFAIL`, inside names wait
/// again.
#[tokio::test]
async fn queries_past_udp_max_in_flight_are_shed_and_counted() {
    let silent = tokio::net::UdpSocket::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let mut config = common::config(silent.local_addr().expect("addr"));
    config.udp_sockets = 1;
    config.udp_max_in_flight = 2;
    config.upstream_timeout_ms = 500;
    let server = af_dns::DnsServer::bind(config, std::sync::Arc::new(common::Recorder::default()))
        .await
        .expect("binds");
    let client = tokio::net::UdpSocket::bind("127.0.0.1:0")
        .await
        .expect("bind client");
    for id in 0..5 {
        let name = format!("waits{id}.svc.cluster.local.");
        let bytes = common::query(id, &name, RecordType::A)
            .to_vec()
            .expect("encode");
        client
            .send_to(&bytes, server.local_addr())
            .await
            .expect("send");
    }
    // While two wait, an outside name is answered at once.
    common::assert_answered_as_outside(server.local_addr(), Transport::Udp).await;
    assert_eq!(
        server.metrics().snapshot().failed,
        0,
        "nothing timed out yet"
    );
    let mut answered = Vec::new();
    let mut buf = vec![0; 4096];
    while let Ok(Ok((len, _))) =
        tokio::time::timeout(Duration::from_secs(2), client.recv_from(&mut buf)).await
    {
        let reply = hickory_proto::op::Message::from_vec(&buf[..len]).expect("decodes");
        assert_eq!(reply.response_code, ResponseCode::ServFail);
        answered.push(reply.metadata.id);
        if answered.len() == 2 {
            break;
        }
    }
    assert_eq!(answered.len(), 2, "the two in flight were answered");
    let snapshot = server.metrics().snapshot();
    assert_eq!(snapshot.udp_shed, 3, "{snapshot:?}");
    assert_eq!(snapshot.failed, 2, "{snapshot:?}");
    // With room again, an inside name waits for its answer (a SERVFAIL) instead of being shed.
    let answer = ask(server.local_addr(), Transport::Udp, "db.", RecordType::A).await;
    assert_eq!(answer.response_code, ResponseCode::ServFail);
    assert_eq!(server.metrics().snapshot().udp_shed, 3);
}
