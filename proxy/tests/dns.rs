//! The sidecar's DNS listener: outside names answer with the sidecar, inside names are
//! forwarded, and each first sighting is journaled with the mode the catalogue gives it.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::time::Duration;

use common::{Setup, Sidecar, egress, resolver};
use hickory_proto::op::{Message, MessageType, OpCode, Query};
use hickory_proto::rr::{Name, RData, RecordType};
use tokio::net::UdpSocket;

const SIDECAR_V4: Ipv4Addr = Ipv4Addr::new(192, 0, 2, 53);
const WEB: Ipv4Addr = Ipv4Addr::new(198, 51, 100, 7);

async fn query(server: SocketAddr, name: &str, record_type: RecordType) -> Message {
    let mut message = Message::new(7, MessageType::Query, OpCode::Query);
    message.add_query(Query::query(
        Name::from_ascii(name).expect("test setup"),
        record_type,
    ));
    let socket = UdpSocket::bind("127.0.0.1:0").await.expect("test setup");
    socket
        .send_to(&message.to_vec().expect("test setup"), server)
        .await
        .expect("test setup");
    let mut buf = vec![0; 4096];
    let (len, _) = tokio::time::timeout(Duration::from_secs(5), socket.recv_from(&mut buf))
        .await
        .expect("the DNS listener answers")
        .expect("test setup");
    Message::from_vec(&buf[..len]).expect("test setup")
}

fn addresses(message: &Message) -> Vec<IpAddr> {
    message
        .answers
        .iter()
        .filter_map(|r| match &r.data {
            RData::A(a) => Some(IpAddr::V4(a.0)),
            RData::AAAA(a) => Some(IpAddr::V6(a.0)),
            _ => None,
        })
        .collect()
}

async fn sidecar_with_dns() -> (Sidecar, af_fixtures::test_resolver::TestResolver) {
    sidecar_with_dns_and("").await
}

/// A sidecar with its DNS listener on, `extra` added to `listeners.dns`.
async fn sidecar_with_dns_and(extra: &str) -> (Sidecar, af_fixtures::test_resolver::TestResolver) {
    let runtime_dns = resolver(vec![("web", vec![IpAddr::V4(WEB)])]).await;
    let mut setup = Setup::new(&egress(&[("api.allowed.test", "allow")]), runtime_dns.addr);
    setup.dns = format!(
        "    listen: \"127.0.0.1:0\"\n    answer_v4: \"{SIDECAR_V4}\"\n    inside_resolver: \"{}\"\n    udp_sockets: 1{extra}",
        runtime_dns.addr
    );
    setup.extra = "inside:\n  subnets: [\"198.51.100.0/24\"]\n  names: [web]\n".into();
    (Sidecar::start(&setup).await, runtime_dns)
}

#[tokio::test]
async fn outside_names_resolve_to_the_sidecar_and_inside_names_are_forwarded() {
    let (sidecar, _runtime_dns) = sidecar_with_dns().await;
    let outside = query(sidecar.dns(), "api.allowed.test.", RecordType::A).await;
    assert_eq!(addresses(&outside), [IpAddr::V4(SIDECAR_V4)]);
    // Positive control: the listener does forward inside names, so the answer above is the
    // sidecar's decision and not a resolver that answers everything alike.
    let inside = query(sidecar.dns(), "web.", RecordType::A).await;
    assert_eq!(addresses(&inside), [IpAddr::V4(WEB)]);
    let tunnel = query(sidecar.dns(), "exfil.evil.test.", RecordType::TXT).await;
    assert!(tunnel.answers.is_empty());
}

#[tokio::test]
async fn first_sightings_are_journaled_with_the_catalogue_mode() {
    let (sidecar, _runtime_dns) = sidecar_with_dns().await;
    query(sidecar.dns(), "api.allowed.test.", RecordType::A).await;
    query(sidecar.dns(), "api.allowed.test.", RecordType::A).await;
    query(sidecar.dns(), "unknown.evil.test.", RecordType::A).await;
    let records = sidecar.admin().wait_records("", 2).await;
    let sightings: Vec<_> = records
        .iter()
        .filter(|r| r["kind"] == "dns_sighting")
        .map(|r| {
            (
                r["host"].as_str().expect("test setup").to_owned(),
                r["mode"].as_str().expect("test setup").to_owned(),
                r["answer"].as_str().expect("test setup").to_owned(),
            )
        })
        .collect();
    assert_eq!(
        sightings,
        [
            ("api.allowed.test".into(), "allow".into(), "outside".into()),
            ("unknown.evil.test".into(), "block".into(), "outside".into()),
        ]
    );
}

#[tokio::test]
async fn dns_on_without_its_answer_address_is_refused_before_binding() {
    let mut setup = Setup::new(&egress(&[]), "127.0.0.1:53".parse().expect("test setup"));
    setup.dns = "    listen: \"127.0.0.1:0\"".into();
    let yaml = setup.yaml(
        std::path::Path::new("/nonexistent"),
        &common::Listen::ephemeral(),
    );
    let doc = af_proxy::config::parse(&yaml, false).expect("test setup");
    let refused = af_proxy::config::check(doc).err().expect("refused");
    assert_eq!(refused.code.code, "AF-NET-001");
    assert!(refused.statement.contains("answer_v4"), "{refused}");
}

#[tokio::test]
async fn a_flood_of_made_up_names_is_journaled_only_within_the_sighting_budget() {
    // One a second, ten at once.
    let (sidecar, _runtime_dns) = sidecar_with_dns_and("\n    sightings_per_second: 1").await;
    for i in 0..40 {
        let answer = query(sidecar.dns(), &format!("x{i}.flood.test."), RecordType::A).await;
        // Every name is still answered with the sidecar: the budget only bounds the journal.
        assert_eq!(addresses(&answer), [IpAddr::V4(SIDECAR_V4)]);
    }
    let admin = sidecar.admin();
    // Sightings reach the journal from af-dns's observer thread: wait until all 40 are
    // accounted for.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    let (journaled, not_journaled) = loop {
        let not_journaled = admin
            .metric("af_proxy_dns_sightings_over_budget_total")
            .await;
        let records = admin.records("").await;
        let journaled = records
            .iter()
            .filter(|r| r["kind"] == "dns_sighting")
            .count() as u64;
        if journaled + not_journaled == 40 || tokio::time::Instant::now() > deadline {
            break (journaled, not_journaled);
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert_eq!(
        journaled + not_journaled,
        40,
        "{journaled} + {not_journaled}"
    );
    // Positive control: the burst was journaled; the rest was counted, none lost silently.
    assert!(journaled >= 10, "{journaled}");
    assert!(not_journaled >= 20, "{not_journaled}");
}
