//! `localhost` and names below it are answered locally and never forwarded.

mod common;

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use af_dns::AnswerKind;
use common::{TRANSPORTS, addresses, ask, start};
use hickory_proto::{op::ResponseCode, rr::RecordType};

#[tokio::test]
async fn localhost_and_foo_localhost_resolve_to_loopback_without_forwarding() {
    let env = start(|_| {}).await;
    for transport in TRANSPORTS {
        for name in ["localhost.", "foo.localhost.", "A.B.LocalHost."] {
            let answer = ask(env.addr, transport, name, RecordType::A).await;
            assert_eq!(answer.response_code, ResponseCode::NoError);
            assert_eq!(
                addresses(&answer),
                [IpAddr::V4(Ipv4Addr::LOCALHOST)],
                "{name}"
            );

            let answer = ask(env.addr, transport, name, RecordType::AAAA).await;
            assert_eq!(
                addresses(&answer),
                [IpAddr::V6(Ipv6Addr::LOCALHOST)],
                "{name}"
            );

            let answer = ask(env.addr, transport, name, RecordType::TXT).await;
            assert!(answer.answers.is_empty(), "{name}");
        }
    }
    assert!(
        env.resolver.queries().is_empty(),
        "localhost is never forwarded"
    );
    let sightings = env.recorder.wait_for(9).await;
    assert_eq!(sightings.len(), 9, "three names, three types, each once");
    assert!(sightings.iter().all(|s| s.answer == AnswerKind::Localhost));
    assert!(sightings.iter().any(|s| s.name == "a.b.localhost"));
}
