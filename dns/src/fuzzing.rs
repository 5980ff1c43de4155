//! The query path without sockets, for the fuzz targets (`fuzz/fuzz_targets/dns.rs`) and the
//! handler's property tests: a whole packet goes through hickory's parser, the [`Handler`] and
//! hickory's encoder, as on the wire. Not part of the crate's API.

use std::{
    net::SocketAddr,
    num::NonZeroU32,
    sync::{Arc, Mutex},
};

use hickory_proto::{
    op::{Message, MessageType},
    rr::{RData, Record, RecordType},
};
use hickory_server::{
    net::{NetError, runtime::TokioTime, xfer::Protocol},
    server::{Request, RequestHandler, ResponseHandler, ResponseInfo},
    zone_handler::MessageResponse,
};

use crate::{
    config::DnsConfig,
    error::DnsError,
    handler::Handler,
    metrics::Metrics,
    sightings::{IgnoreSightings, SightingBounds, Sightings},
    udp,
};

/// The client every packet comes from.
const CLIENT: SocketAddr =
    SocketAddr::new(std::net::IpAddr::V4(std::net::Ipv4Addr::LOCALHOST), 5300);

/// The handler of a validated configuration, fed packets instead of sockets.
pub struct QueryPath {
    handler: Handler,
}

/// What became of one packet.
#[derive(Debug)]
pub enum Outcome {
    /// hickory could not read it, or it is a response: the server drops it (or hickory answers
    /// `FORMERR` itself) before the handler sees it.
    Dropped,
    /// The handler's responses, encoded as they would be sent.
    Answered {
        /// The query's id.
        id: u16,
        /// Every response sent for it.
        responses: Vec<Vec<u8>>,
    },
}

impl QueryPath {
    /// The query path of `config`; sightings are counted and dropped. Call inside a Tokio
    /// runtime (forwarding uses it).
    pub fn new(config: &DnsConfig) -> Result<Self, DnsError> {
        let checked = config.validate()?;
        let metrics = Metrics::default();
        let bounds = SightingBounds {
            seen_capacity: config.seen_capacity,
            queue: config.sighting_queue,
            per_second: NonZeroU32::new(config.sightings_per_second).unwrap_or(NonZeroU32::MIN),
        };
        let sightings = Sightings::start(Arc::new(IgnoreSightings), bounds, metrics.clone())
            .map_err(|error| DnsError::Stopped {
                reason: format!("cannot start the sightings thread: {error}"),
            })?;
        Ok(Self {
            handler: Handler::new(config, &checked, sightings, metrics)?,
        })
    }

    /// Run `packet` as a UDP query: what the server does with it.
    pub async fn answer(&self, packet: &[u8]) -> Outcome {
        let Ok(request) = Request::from_bytes(packet.to_vec(), CLIENT, Protocol::Udp) else {
            return Outcome::Dropped;
        };
        if request.metadata.message_type == MessageType::Response {
            return Outcome::Dropped;
        }
        let sent = Sent::default();
        self.handler
            .handle_request::<_, TokioTime>(&request, sent.clone())
            .await;
        let responses = sent.0.lock().map(|r| r.clone()).unwrap_or_default();
        Outcome::Answered {
            id: request.metadata.id,
            responses,
        }
    }
}

impl Outcome {
    /// Whether the handler kept its promises for `packet`: a query it was handed got exactly one
    /// response, which decodes, carries the query's id, and answers only one `A`/`AAAA`
    /// question, with addresses only.
    pub fn check(&self, packet: &[u8]) -> Result<(), String> {
        let Outcome::Answered { id, responses } = self else {
            return Ok(());
        };
        let [response] = &responses[..] else {
            return Err(format!("{} responses to one query", responses.len()));
        };
        let response = Message::from_vec(response)
            .map_err(|error| format!("the response does not decode: {error}"))?;
        if response.metadata.id != *id {
            return Err(format!(
                "response id {} for query {id}",
                response.metadata.id
            ));
        }
        if response.metadata.message_type != MessageType::Response {
            return Err("the response is not marked as one".to_owned());
        }
        let request = Request::from_bytes(packet.to_vec(), CLIENT, Protocol::Udp)
            .map_err(|error| format!("an answered packet no longer parses: {error}"))?;
        let asked_address = matches!(
            request.queries.queries(),
            [query] if matches!(query.query_type(), RecordType::A | RecordType::AAAA)
        );
        for record in &response.answers {
            if !asked_address || !matches!(record.data, RData::A(_) | RData::AAAA(_)) {
                return Err(format!(
                    "answer {record:?} to {:?}",
                    request.queries.queries()
                ));
            }
        }
        Ok(())
    }
}

/// Keeps every response the handler sends, encoded as it would go in a datagram.
#[derive(Clone, Default)]
struct Sent(Arc<Mutex<Vec<Vec<u8>>>>);

#[async_trait::async_trait]
impl ResponseHandler for Sent {
    async fn send_response<'a>(
        &mut self,
        response: MessageResponse<
            '_,
            'a,
            impl Iterator<Item = &'a Record> + Send + 'a,
            impl Iterator<Item = &'a Record> + Send + 'a,
            impl Iterator<Item = &'a Record> + Send + 'a,
            impl Iterator<Item = &'a Record> + Send + 'a,
        >,
    ) -> Result<ResponseInfo, NetError> {
        let (info, bytes) = udp::datagram(response)?;
        self.0
            .lock()
            .map_err(|_| NetError::Message("poisoned"))?
            .push(bytes);
        Ok(info)
    }
}
