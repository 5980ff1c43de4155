//! Who answers this query: the hickory `RequestHandler` that refuses what is not one plain
//! question, answers outside names with the sidecar's address, `localhost` locally, and asks the
//! runtime's resolver about inside names.

use std::{
    collections::HashMap,
    iter,
    net::{IpAddr, Ipv4Addr, Ipv6Addr},
};

use hickory_proto::{
    op::{Edns, Header, HeaderCounts, Metadata, OpCode, ResponseCode},
    rr::{DNSClass, LowerName, Name, RData, Record, RecordType},
    serialize::binary::{BinDecoder, BinEncodable, BinEncoder, NameEncoding},
};
use hickory_server::{
    net::runtime::Time,
    server::{Request, RequestHandler, ResponseHandler, ResponseInfo},
    zone_handler::{MessageResponseBuilder, Queries},
};

use crate::{
    FastHash,
    classify::{Classifier, NameClass, fqdn},
    config::{Checked, DnsConfig},
    error::DnsError,
    forward::{Forwarded, Forwarder},
    metrics::Metrics,
    sightings::{AnswerKind, Sightings},
};

/// The largest UDP payload we advertise in EDNS (the DNS flag day 2020 value).
const EDNS_PAYLOAD: u16 = 1232;

/// Answers every query the server receives.
pub(crate) struct Handler {
    /// Inside names answered here, never forwarded.
    hosts: HashMap<LowerName, Vec<IpAddr>, FastHash>,
    classifier: Classifier,
    forwarder: Forwarder,
    sidecar_v4: Ipv4Addr,
    /// Set only when IPv6 is allowed, so `AAAA` for outside names is empty otherwise.
    sidecar_v6: Option<Ipv6Addr>,
    ttl: u32,
    sightings: Sightings,
    metrics: Metrics,
}

/// The decision for one query: a response code, its records, and how to count it.
struct Reply {
    code: ResponseCode,
    records: Vec<Record>,
    kind: AnswerKind,
}

impl Reply {
    fn refused(code: ResponseCode) -> Self {
        Self {
            code,
            records: Vec::new(),
            kind: AnswerKind::Refused,
        }
    }

    fn records(kind: AnswerKind, records: Vec<Record>) -> Self {
        Self {
            code: ResponseCode::NoError,
            records,
            kind,
        }
    }
}

impl Handler {
    /// Builds the handler from a validated configuration.
    pub(crate) fn new(
        config: &DnsConfig,
        checked: &Checked,
        sightings: Sightings,
        metrics: Metrics,
    ) -> Result<Self, DnsError> {
        let hosts = checked
            .inside_hosts
            .iter()
            .filter_map(|(name, addrs)| Some((fqdn(name)?, addrs.clone())))
            .collect();
        Ok(Self {
            hosts,
            classifier: Classifier::new(
                &checked.inside_names,
                &checked.inside_zones,
                config.forward_unlisted_single_labels,
            ),
            forwarder: Forwarder::new(config)?,
            sidecar_v4: config.sidecar_v4,
            sidecar_v6: config.sidecar_v6.filter(|_| config.allow_ipv6),
            ttl: config.ttl_secs,
            sightings,
            metrics,
        })
    }

    async fn decide(&self, request: &Request) -> Reply {
        if request.version() > 0 {
            return Reply::refused(ResponseCode::BADVERS);
        }
        if request.metadata.op_code != OpCode::Query {
            return Reply::refused(ResponseCode::NotImp);
        }
        let Ok(info) = request.request_info() else {
            // Not exactly one question.
            return Reply::refused(ResponseCode::FormErr);
        };
        let query = info.query;
        if query.query_class() != DNSClass::IN {
            return Reply::refused(ResponseCode::Refused);
        }
        let owner = query.original().name();
        let record_type = query.query_type();
        if let Some(addrs) = self.hosts.get(query.name()) {
            return Reply::records(
                AnswerKind::Inside,
                host_records(owner, record_type, self.ttl, addrs),
            );
        }
        match self.classifier.classify(query.name()) {
            NameClass::Localhost => Reply::records(
                AnswerKind::Localhost,
                address_records(
                    owner,
                    record_type,
                    self.ttl,
                    Some(Ipv4Addr::LOCALHOST),
                    Some(Ipv6Addr::LOCALHOST),
                ),
            ),
            NameClass::Outside => self.outside(owner, record_type),
            NameClass::Inside if matches!(record_type, RecordType::A | RecordType::AAAA) => {
                match self.forwarder.resolve(query.name(), record_type).await {
                    Forwarded::Inside { addrs, ttl } => Reply::records(
                        AnswerKind::Inside,
                        addrs
                            .into_iter()
                            .map(|addr| Record::from_rdata(owner.clone(), ttl, RData::from(addr)))
                            .collect(),
                    ),
                    Forwarded::NoData => Reply::records(AnswerKind::Inside, Vec::new()),
                    Forwarded::NotInside => self.outside(owner, record_type),
                    Forwarded::Failed => Reply {
                        code: ResponseCode::ServFail,
                        records: Vec::new(),
                        kind: AnswerKind::Failed,
                    },
                }
            }
            // Only addresses are ever forwarded: no other type can carry data in or out.
            NameClass::Inside => Reply::records(AnswerKind::Inside, Vec::new()),
        }
    }

    fn outside(&self, owner: &Name, record_type: RecordType) -> Reply {
        Reply::records(
            AnswerKind::Outside,
            address_records(
                owner,
                record_type,
                self.ttl,
                Some(self.sidecar_v4),
                self.sidecar_v6,
            ),
        )
    }
}

/// One `A` or `AAAA` record when the type asks for it and an address is given; else none.
fn address_records(
    owner: &Name,
    record_type: RecordType,
    ttl: u32,
    v4: Option<Ipv4Addr>,
    v6: Option<Ipv6Addr>,
) -> Vec<Record> {
    let addr = match record_type {
        RecordType::A => v4.map(IpAddr::V4),
        RecordType::AAAA => v6.map(IpAddr::V6),
        _ => None,
    };
    addr.map(|addr| Record::from_rdata(owner.clone(), ttl, RData::from(addr)))
        .into_iter()
        .collect()
}

/// The records of an inside host for `record_type`: its addresses of that family.
fn host_records(owner: &Name, record_type: RecordType, ttl: u32, addrs: &[IpAddr]) -> Vec<Record> {
    addrs
        .iter()
        .filter(|addr| match record_type {
            RecordType::A => addr.is_ipv4(),
            RecordType::AAAA => addr.is_ipv6(),
            _ => false,
        })
        .map(|addr| Record::from_rdata(owner.clone(), ttl, RData::from(*addr)))
        .collect()
}

/// The question section to answer with. hickory echoes the client's bytes, and a compression
/// pointer in them may point into the request's own header: the same pointer in the response
/// points at other bytes and the response no longer decodes. Questions whose bytes may hold a
/// pointer (a byte with both top bits set) are encoded afresh, uncompressed.
fn question_section(request: &Request) -> Option<Queries> {
    let queries = &request.queries;
    if !queries.as_bytes().iter().any(|&b| b & 0xC0 == 0xC0) {
        return None;
    }
    let mut bytes = Vec::new();
    let mut encoder = BinEncoder::new(&mut bytes);
    encoder.set_name_encoding(NameEncoding::Uncompressed);
    for query in queries.queries() {
        query.emit(&mut encoder).ok()?;
    }
    Queries::read(&mut BinDecoder::new(&bytes), queries.len()).ok()
}

/// The EDNS section of the response: present when the query had one (RFC 6891).
fn response_edns(request: &Request, code: ResponseCode) -> Option<Edns> {
    request.edns.as_ref().map(|query_edns| {
        let mut edns = Edns::new();
        edns.set_max_payload(query_edns.max_payload().clamp(512, EDNS_PAYLOAD));
        edns.set_version(0);
        edns.set_rcode_high(code.high());
        edns
    })
}

#[async_trait::async_trait]
impl RequestHandler for Handler {
    async fn handle_request<R: ResponseHandler, T: Time>(
        &self,
        request: &Request,
        mut response_handle: R,
    ) -> ResponseInfo {
        let reply = self.decide(request).await;
        self.metrics.answered(reply.kind);
        let edns = response_edns(request, reply.code);

        let mut metadata = Metadata::response_from_request(&request.metadata);
        metadata.authoritative = true;
        metadata.recursion_available = true;
        metadata.response_code = reply.code;
        let questions = question_section(request);
        let questions = questions.as_ref().unwrap_or(&request.queries);
        let response = MessageResponseBuilder::new(questions, edns.as_ref()).build(
            metadata,
            reply.records.iter(),
            iter::empty(),
            iter::empty(),
            iter::empty(),
        );
        let info = match response_handle.send_response(response).await {
            Ok(info) => info,
            Err(error) => {
                tracing::debug!(%error, client = %request.src(), "DNS response not sent");
                metadata.response_code = ResponseCode::ServFail;
                ResponseInfo::from(Header {
                    metadata,
                    counts: HeaderCounts::default(),
                })
            }
        };

        // Reported after the answer left, so the seen set's lock never delays it.
        if let Ok(info) = request.request_info() {
            self.sightings.record(
                info.query.name(),
                info.query.query_type(),
                request.src(),
                reply.kind,
            );
        }
        info
    }
}

#[cfg(test)]
mod tests {
    //! Fuzzing the query path: arbitrary bytes and arbitrary well-formed-ish messages go through
    //! hickory's parser and this handler; the handler must never panic, must answer every parsed
    //! query exactly once, and must never answer with anything but A/AAAA records
    //! ([`crate::fuzzing::Outcome::check`], which the fuzz target asserts too).

    use af_fixtures::test_resolver::TestResolver;
    use hickory_proto::op::{Message, MessageType, Query};
    use proptest::{
        collection::vec,
        prelude::*,
        test_runner::{Config, TestRunner},
    };

    use super::*;
    use crate::fuzzing::QueryPath;

    fn query_path(upstream: std::net::SocketAddr) -> QueryPath {
        let mut config = DnsConfig::new(
            Ipv4Addr::new(198, 51, 100, 2),
            vec!["198.51.100.0/24".parse().expect("subnet")],
            upstream,
        );
        config.inside_zones = vec!["svc.cluster.local".into()];
        config.upstream_timeout_ms = 500;
        config.seen_capacity = 1024;
        config.sighting_queue = 1024;
        config.sightings_per_second = 1_000_000;
        QueryPath::new(&config).expect("query path")
    }

    fn name() -> impl Strategy<Value = String> {
        let suffix =
            prop::sample::select(vec!["", "localhost.", "svc.cluster.local.", "example.com."]);
        (vec("[a-zA-Z0-9_*-]{1,24}", 0..6), suffix)
            .prop_map(|(labels, suffix)| format!("{}.{suffix}", labels.join(".")))
    }

    /// A query message with random header, 0 to 2 questions, optional EDNS, then byte flips.
    fn message() -> impl Strategy<Value = Vec<u8>> {
        // A and AAAA often, so questions reach the sidecar, localhost and forwarding branches.
        let record_type = prop_oneof![Just(1u16), Just(28u16), any::<u16>()];
        let class = prop::sample::select(vec![1u16, 1, 1, 3, 4, 254, 255]);
        let question = (name(), record_type, class);
        (
            any::<u16>(),
            prop::sample::select(vec![0u8, 0, 0, 0, 1, 2, 4, 5, 15]),
            vec(question, 0..3),
            prop::option::of((any::<u8>(), any::<u16>())),
            vec((any::<usize>(), any::<u8>()), 0..3),
        )
            .prop_map(|(id, opcode, questions, edns, flips)| {
                let mut message = Message::new(id, MessageType::Query, OpCode::from_u8(opcode));
                for (name, record_type, class) in questions {
                    if let Ok(name) = Name::from_ascii(&name) {
                        let mut query = Query::query(name, RecordType::from(record_type));
                        query.set_query_class(DNSClass::from(class));
                        message.add_query(query);
                    }
                }
                if let Some((version, payload)) = edns {
                    let mut opt = Edns::new();
                    opt.set_version(version % 3).set_max_payload(payload);
                    message.set_edns(opt);
                }
                let mut bytes = message.to_vec().unwrap_or_default();
                for (at, byte) in flips {
                    if !bytes.is_empty() {
                        let at = at % bytes.len();
                        bytes[at] = byte;
                    }
                }
                bytes
            })
    }

    /// A runtime, the test resolver (kept alive) and the query path that forwards to it.
    fn served() -> (tokio::runtime::Runtime, TestResolver, QueryPath) {
        let runtime = tokio::runtime::Runtime::new().expect("runtime");
        let resolver = runtime
            .block_on(TestResolver::start([(
                "api.svc.cluster.local",
                vec!["198.51.100.21".parse().expect("ip")],
            )]))
            .expect("resolver");
        let path = runtime.block_on(async { query_path(resolver.addr) });
        (runtime, resolver, path)
    }

    fn fuzz(strategy: impl Strategy<Value = Vec<u8>>, cases: u32) {
        let (runtime, _resolver, path) = served();
        let mut runner = TestRunner::new(Config {
            cases,
            ..Config::default()
        });
        runner
            .run(&strategy, |packet| {
                let outcome = runtime.block_on(path.answer(&packet));
                outcome.check(&packet).map_err(TestCaseError::fail)
            })
            .expect("the handler holds its invariants");
    }

    #[test]
    fn arbitrary_bytes_never_panic_the_query_path() {
        fuzz(vec(any::<u8>(), 0..600), 2048);
    }

    #[test]
    fn arbitrary_messages_get_one_answer_with_addresses_only() {
        fuzz(message(), 1024);
    }

    /// Found by `fuzz/fuzz_targets/dns.rs`: the question's name ends in a compression pointer
    /// to offset 3, inside the header. Echoed as sent, the same pointer in the response pointed
    /// at the response's flags and the response did not decode.
    #[test]
    fn a_question_pointing_into_the_header_gets_a_response_that_decodes() {
        const CRASH: &[u8] = b"\x10\x06\x01\x00\x00\x01\x00\x00\x00\x00\x00\x00\x04lea\x09\xc0\x03svc\x07cluster\x05local\x00\x00\x01\x00\x01";
        let (runtime, _resolver, path) = served();
        let outcome = runtime.block_on(path.answer(CRASH));
        outcome.check(CRASH).expect("a well-formed response");
        let crate::fuzzing::Outcome::Answered { responses, .. } = outcome else {
            panic!("the query is answered");
        };
        let response = Message::from_vec(&responses[0]).expect("decodes");
        let request = Message::from_vec(CRASH).expect("the query decodes");
        assert_eq!(response.queries, request.queries, "the question is kept");
        // The usual question is still echoed as sent, and answered.
        let mut query = Message::new(7, MessageType::Query, OpCode::Query);
        let name = Name::from_ascii("Api.Example.com.").expect("name");
        query.add_query(Query::query(name, RecordType::A));
        let plain = query.to_vec().expect("encodes");
        let outcome = runtime.block_on(path.answer(&plain));
        outcome.check(&plain).expect("a well-formed response");
        let crate::fuzzing::Outcome::Answered { responses, .. } = outcome else {
            panic!("the query is answered");
        };
        let response = Message::from_vec(&responses[0]).expect("decodes");
        assert_eq!(response.queries[0].name().to_ascii(), "Api.Example.com.");
        assert_eq!(response.answers.len(), 1);
    }
}
