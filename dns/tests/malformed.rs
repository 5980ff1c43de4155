//! Anything but one plain IN question is refused, and no packet stops the server.

mod common;

use std::net::IpAddr;

use common::{SIDECAR_V4, TRANSPORTS, Transport, addresses, ask, exchange, query, start, udp_raw};
use hickory_proto::{
    op::{Edns, Message, MessageType, OpCode, Query, ResponseCode},
    rr::{DNSClass, RecordType},
};
use proptest::{
    collection::vec,
    prelude::any,
    test_runner::{Config, TestRunner},
};

#[tokio::test]
async fn two_questions_in_one_message_get_formerr() {
    let env = start(|_| {}).await;
    for transport in TRANSPORTS {
        let mut message = query(1, "one.example.com.", RecordType::A);
        message.add_query(Query::query(
            "two.example.com.".parse().expect("name"),
            RecordType::A,
        ));
        let answer = exchange(env.addr, transport, &message).await;
        assert_eq!(answer.response_code, ResponseCode::FormErr, "{transport:?}");
        assert!(answer.answers.is_empty());
    }
}

#[tokio::test]
async fn a_message_without_a_question_gets_formerr() {
    let env = start(|_| {}).await;
    let message = Message::new(2, MessageType::Query, OpCode::Query);
    let answer = exchange(env.addr, Transport::Udp, &message).await;
    assert_eq!(answer.response_code, ResponseCode::FormErr);
}

#[tokio::test]
async fn opcodes_other_than_query_get_notimp() {
    let env = start(|_| {}).await;
    let mut message = query(3, "example.com.", RecordType::A);
    message.metadata.op_code = OpCode::Status;
    let answer = exchange(env.addr, Transport::Udp, &message).await;
    assert_eq!(answer.response_code, ResponseCode::NotImp);
    assert!(answer.answers.is_empty());
}

#[tokio::test]
async fn classes_other_than_in_are_refused() {
    let env = start(|_| {}).await;
    let mut message = Message::new(4, MessageType::Query, OpCode::Query);
    let mut question = Query::query("version.bind.".parse().expect("name"), RecordType::TXT);
    question.set_query_class(DNSClass::CH);
    message.add_query(question);
    let answer = exchange(env.addr, Transport::Udp, &message).await;
    assert_eq!(answer.response_code, ResponseCode::Refused);
    assert_eq!(env.metrics.snapshot().refused, 1);
}

#[tokio::test]
async fn edns_version_above_zero_gets_badvers_and_version_zero_is_echoed() {
    let env = start(|_| {}).await;
    let mut message = query(5, "example.com.", RecordType::A);
    let mut edns = Edns::new();
    edns.set_version(1);
    message.set_edns(edns);
    let answer = exchange(env.addr, Transport::Udp, &message).await;
    // BADVERS and BADSIG share code 16; hickory decodes it as BADSIG.
    assert_eq!(
        u16::from(answer.response_code),
        16,
        "{:?}",
        answer.response_code
    );

    let mut message = query(6, "example.com.", RecordType::A);
    message.set_edns(Edns::new());
    let answer = exchange(env.addr, Transport::Udp, &message).await;
    assert_eq!(addresses(&answer), [IpAddr::V4(SIDECAR_V4)]);
    assert!(answer.edns.is_some(), "EDNS answered with EDNS");
}

/// A header for one question, then `name` in wire form, type A, class IN.
fn raw_query(name: &[u8]) -> Vec<u8> {
    let mut bytes = vec![0x12, 0x34, 0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0];
    bytes.extend_from_slice(name);
    bytes.extend_from_slice(&[0, 1, 0, 1]);
    bytes
}

#[tokio::test]
async fn a_name_longer_than_255_bytes_gets_formerr_without_an_address() {
    let env = start(|_| {}).await;
    let mut name = Vec::new();
    for _ in 0..5 {
        name.push(63);
        name.extend_from_slice(&[b'a'; 63]);
    }
    name.push(0);
    for transport in TRANSPORTS {
        let raw = raw_query(&name);
        let reply = match transport {
            Transport::Udp => udp_raw(env.addr, &raw).await,
            Transport::Tcp => common::tcp_raw(env.addr, &raw).await,
        };
        let reply = reply.expect("hickory answers a readable header with FORMERR");
        let answer = Message::from_vec(&reply).expect("a reply is a DNS message");
        assert_eq!(answer.response_code, ResponseCode::FormErr, "{transport:?}");
        assert!(answer.answers.is_empty());
    }
    // A label longer than 63 bytes cannot even be encoded: its length byte is a pointer tag.
    let mut long_label = vec![64];
    long_label.extend_from_slice(&[b'b'; 64]);
    long_label.push(0);
    let reply = udp_raw(env.addr, &raw_query(&long_label))
        .await
        .expect("FORMERR");
    let answer = Message::from_vec(&reply).expect("a reply is a DNS message");
    assert_eq!(answer.response_code, ResponseCode::FormErr);
    let answer = ask(env.addr, Transport::Udp, "example.com.", RecordType::A).await;
    assert_eq!(
        addresses(&answer),
        [IpAddr::V4(SIDECAR_V4)],
        "still serving"
    );
}

#[tokio::test]
async fn malformed_packets_get_formerr_or_nothing_and_the_next_query_is_answered() {
    let env = start(|_| {}).await;
    let truncated_question = raw_query(&[3, b'a', b'b'])[..15].to_vec();
    let packets: [&[u8]; 5] = [
        &[],
        &[0xff; 5],
        &[0x12, 0x34, 0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0],
        &truncated_question,
        &[0xab; 512],
    ];
    for packet in packets {
        if let Some(reply) = udp_raw(env.addr, packet).await {
            let answer = Message::from_vec(&reply).expect("a reply is a DNS message");
            assert_eq!(answer.response_code, ResponseCode::FormErr, "{packet:?}");
        }
    }
    common::assert_answered_as_outside(env.addr, Transport::Udp).await;
}

#[tokio::test]
async fn responses_sent_to_the_server_are_ignored() {
    let env = start(|_| {}).await;
    let mut message = query(7, "example.com.", RecordType::A);
    message.metadata.message_type = MessageType::Response;
    let bytes = message.to_vec().expect("encode");
    assert!(udp_raw(env.addr, &bytes).await.is_none(), "no reflection");
}

#[test]
fn random_udp_packets_never_stop_the_server() {
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    let env = runtime.block_on(start(|_| {}));
    let client = runtime
        .block_on(tokio::net::UdpSocket::bind("127.0.0.1:0"))
        .expect("bind");
    let mut runner = TestRunner::new(Config {
        cases: 128,
        ..Config::default()
    });
    runner
        .run(&vec(any::<u8>(), 0..700), |packet| {
            runtime.block_on(async {
                client.send_to(&packet, env.addr).await.expect("send");
                common::assert_answered_as_outside(env.addr, Transport::Udp).await;
            });
            Ok(())
        })
        .expect("server survives every packet");
}
