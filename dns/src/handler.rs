//! Who answers this query: the hickory `RequestHandler` that refuses what is not one plain
//! question, answers outside names with the sidecar's address, `localhost` locally, and asks the
//! runtime's resolver about inside names.

use std::{
    iter,
    net::{IpAddr, Ipv4Addr, Ipv6Addr},
};

use hickory_proto::{
    op::{Edns, Header, HeaderCounts, Metadata, OpCode, ResponseCode},
    rr::{DNSClass, Name, RData, Record, RecordType},
};
use hickory_server::{
    net::runtime::Time,
    server::{Request, RequestHandler, ResponseHandler, ResponseInfo},
    zone_handler::MessageResponseBuilder,
};

use crate::{
    classify::{Classifier, NameClass},
    config::{Checked, DnsConfig},
    error::DnsError,
    forward::{Forwarded, Forwarder},
    metrics::Metrics,
    sightings::{AnswerKind, Sightings},
};

/// The largest UDP payload we advertise in EDNS (the DNS flag day 2020 value).
const EDNS_PAYLOAD: u16 = 1232;

/// Answers every query the server receives.
pub struct Handler {
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
    pub fn new(
        config: &DnsConfig,
        checked: &Checked,
        sightings: Sightings,
        metrics: Metrics,
    ) -> Result<Self, DnsError> {
        Ok(Self {
            classifier: Classifier::new(&checked.inside_names, &checked.inside_zones),
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
        let edns = response_edns(request, reply.code);

        let mut metadata = Metadata::response_from_request(&request.metadata);
        metadata.authoritative = true;
        metadata.recursion_available = true;
        metadata.response_code = reply.code;
        let response = MessageResponseBuilder::new(&request.queries, edns.as_ref()).build(
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

        // Counted and reported after the answer left, so neither delays it.
        self.metrics.answered(reply.kind);
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
