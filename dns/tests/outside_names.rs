//! Outside names point at the sidecar; no type but A/AAAA carries data; nothing is forwarded.

mod common;

use std::net::IpAddr;

use common::{SIDECAR_V4, SIDECAR_V6, TRANSPORTS, addresses, ask, start};
use hickory_proto::{op::ResponseCode, rr::RecordType};

#[tokio::test]
async fn outside_name_a_query_gets_sidecar_address_with_five_second_ttl() {
    let env = start(|_| {}).await;
    for transport in TRANSPORTS {
        let answer = ask(env.addr, transport, "api.example.com.", RecordType::A).await;
        assert_eq!(answer.response_code, ResponseCode::NoError, "{transport:?}");
        assert_eq!(
            addresses(&answer),
            [IpAddr::V4(SIDECAR_V4)],
            "{transport:?}"
        );
        assert_eq!(answer.answers[0].ttl, 5, "{transport:?}");
        assert!(answer.metadata.authoritative);
    }
    assert!(
        env.resolver.queries().is_empty(),
        "outside names are never forwarded"
    );
}

#[tokio::test]
async fn outside_name_aaaa_is_empty_noerror_when_ipv6_is_not_allowed() {
    let env = start(|config| config.sidecar_v6 = Some(SIDECAR_V6)).await;
    for transport in TRANSPORTS {
        let answer = ask(env.addr, transport, "api.example.com.", RecordType::AAAA).await;
        assert_eq!(answer.response_code, ResponseCode::NoError, "{transport:?}");
        assert!(answer.answers.is_empty(), "{transport:?}: {answer:?}");
    }
}

#[tokio::test]
async fn outside_name_aaaa_gets_sidecar_v6_address_when_ipv6_is_allowed() {
    let env = start(|config| {
        config.allow_ipv6 = true;
        config.sidecar_v6 = Some(SIDECAR_V6);
    })
    .await;
    for transport in TRANSPORTS {
        let answer = ask(env.addr, transport, "api.example.com.", RecordType::AAAA).await;
        assert_eq!(
            addresses(&answer),
            [IpAddr::V6(SIDECAR_V6)],
            "{transport:?}"
        );
    }
}

#[tokio::test]
async fn outside_name_https_txt_mx_any_and_others_are_empty_noerror_and_never_forwarded() {
    let env = start(|config| {
        config.allow_ipv6 = true;
        config.sidecar_v6 = Some(SIDECAR_V6);
    })
    .await;
    let types = [
        RecordType::HTTPS,
        RecordType::SVCB,
        RecordType::TXT,
        RecordType::NULL,
        RecordType::CNAME,
        RecordType::SRV,
        RecordType::MX,
        RecordType::PTR,
        RecordType::CAA,
        RecordType::NS,
        RecordType::ANY,
        RecordType::Unknown(65_280),
    ];
    for transport in TRANSPORTS {
        for record_type in types {
            let answer = ask(env.addr, transport, "tunnel.example.com.", record_type).await;
            assert_eq!(
                answer.response_code,
                ResponseCode::NoError,
                "{transport:?} {record_type}"
            );
            assert!(
                answer.answers.is_empty(),
                "{transport:?} {record_type}: {answer:?}"
            );
            assert!(answer.additionals.is_empty() && answer.authorities.is_empty());
        }
    }
    assert!(
        env.resolver.queries().is_empty(),
        "outside names are never forwarded"
    );
    assert_eq!(env.metrics.snapshot().outside, 2 * types.len() as u64);
}

#[tokio::test]
async fn reverse_lookups_of_outside_addresses_are_empty_and_never_forwarded() {
    let env = start(|_| {}).await;
    let answer = ask(
        env.addr,
        common::Transport::Udp,
        "9.113.0.203.in-addr.arpa.",
        RecordType::PTR,
    )
    .await;
    assert_eq!(answer.response_code, ResponseCode::NoError);
    assert!(answer.answers.is_empty());
    assert!(env.resolver.queries().is_empty());
}
