//! DNS over UDP: our receive loop in front of [`crate::query`].
//!
//! hickory-server's own UDP transport spawns a task for every datagram with no bound, zeroes a
//! 4 KiB buffer on every poll of its socket and passes every response through a channel back
//! to the socket's task. Here each socket reads into one buffer kept for its lifetime; a query
//! that one poll finishes (an outside name, a fixed inside host: nearly all) is answered in the
//! loop, and only one still waiting (on the runtime's resolver) becomes a task. A socket keeps
//! at most `udp_max_in_flight` such tasks: a datagram past that is dropped unread and counted,
//! as a full socket buffer would drop it. Each answer is encoded by hickory, cut to the size
//! the client can take, and sent from the socket it came in on.

use std::{
    future::Future,
    io,
    net::{IpAddr, SocketAddr},
    sync::Arc,
    task::{Context, Waker},
};

use hickory_proto::{
    op::{Edns, Header, HeaderCounts, MessageType, Metadata, OpCode, ResponseCode},
    rr::Record,
    serialize::binary::{BinEncodable, BinEncoder},
};
use hickory_server::{
    net::{NetError, udp::MAX_RECEIVE_BUFFER_SIZE, xfer::Protocol},
    server::{ResponseHandler, ResponseInfo},
    zone_handler::MessageResponse,
};
use tokio::{net::UdpSocket, task::JoinSet};

use crate::{handler::Handler, metrics::Metrics, query};

/// The largest response a client without EDNS can take (RFC 1035, section 4.2.1).
const PLAIN_UDP_PAYLOAD: u16 = 512;

/// What every socket is served with.
pub(crate) struct UdpService {
    pub handler: Arc<Handler>,
    pub max_in_flight: usize,
    pub metrics: Metrics,
}

/// Answers what arrives on `socket` until it fails for good; the error it failed with.
pub(crate) async fn serve(socket: UdpSocket, service: UdpService) -> io::Error {
    let socket = Arc::new(socket);
    let mut datagram = vec![0; MAX_RECEIVE_BUFFER_SIZE];
    let mut queries = JoinSet::new();
    loop {
        let (len, src) = match socket.recv_from(&mut datagram).await {
            Ok(received) => received,
            Err(error) if gone(&error) => return error,
            Err(error) => {
                tracing::debug!(%error, "DNS over UDP: receive failed");
                continue;
            }
        };
        while queries.try_join_next().is_some() {}
        if !answerable(src) {
            continue;
        }
        let bytes = datagram[..len].to_vec();
        let handler = service.handler.clone();
        let responder = Responder {
            socket: socket.clone(),
            client: src,
        };
        let mut answer = Box::pin(async move {
            query::answer(&handler, bytes, src, Protocol::Udp, responder).await;
        });
        // Most answers are made here and now (an outside name, a fixed inside host): only a
        // query still waiting after one poll (the runtime's resolver) becomes a task of its
        // own (or, past the bound, is dropped). Its next poll, in the task, registers the task's
        // waker.
        if answer
            .as_mut()
            .poll(&mut Context::from_waker(Waker::noop()))
            .is_pending()
        {
            if queries.len() < service.max_in_flight {
                queries.spawn(answer);
            } else {
                service.metrics.udp_shed();
            }
        }
    }
}

/// Errors after which the socket cannot receive again (hickory-server's judgement).
fn gone(error: &io::Error) -> bool {
    matches!(
        error.kind(),
        io::ErrorKind::NotConnected | io::ErrorKind::ConnectionAborted
    )
}

/// Whether an answer to `src` could arrive anywhere: not port 0, not an unspecified or
/// broadcast address (a spoofed source of those would make us send to nobody or everybody).
fn answerable(src: SocketAddr) -> bool {
    src.port() != 0
        && match src.ip() {
            IpAddr::V4(ip) => !ip.is_unspecified() && !ip.is_broadcast(),
            IpAddr::V6(ip) => !ip.is_unspecified(),
        }
}

/// Sends one query's response to its client from the socket it came in on.
#[derive(Clone)]
struct Responder {
    socket: Arc<UdpSocket>,
    client: SocketAddr,
}

#[async_trait::async_trait]
impl ResponseHandler for Responder {
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
        let (info, bytes) = datagram(response)?;
        self.socket.send_to(&bytes, self.client).await?;
        Ok(info)
    }
}

/// `response` encoded as it goes in a datagram: by hickory's encoder, cut (with the
/// truncation flag) to the size the client can take, 512 bytes without EDNS.
pub(crate) fn datagram<'a>(
    response: MessageResponse<
        '_,
        'a,
        impl Iterator<Item = &'a Record> + Send + 'a,
        impl Iterator<Item = &'a Record> + Send + 'a,
        impl Iterator<Item = &'a Record> + Send + 'a,
        impl Iterator<Item = &'a Record> + Send + 'a,
    >,
) -> Result<(ResponseInfo, Vec<u8>), NetError> {
    let id = response.metadata().id;
    let limit = response.edns().map_or(PLAIN_UDP_PAYLOAD, Edns::max_payload);
    let mut bytes = Vec::with_capacity(usize::from(PLAIN_UDP_PAYLOAD));
    let mut encoder = BinEncoder::new(&mut bytes);
    encoder.set_max_size(limit);
    if let Ok(info) = response.destructive_emit(&mut encoder) {
        return Ok((info, bytes));
    }
    // Even the question section does not fit (a query over 512 bytes without EDNS): answered,
    // as hickory-server's own encoder answers it, with the header alone and SERVFAIL.
    bytes.clear();
    let mut metadata = Metadata::new(id, MessageType::Response, OpCode::Query);
    metadata.response_code = ResponseCode::ServFail;
    let header = Header {
        metadata,
        counts: HeaderCounts::default(),
    };
    header.emit(&mut BinEncoder::new(&mut bytes))?;
    Ok((ResponseInfo::from(header), bytes))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nowhere_and_everywhere_are_not_answered() {
        for src in [
            "0.0.0.0:53000",
            "255.255.255.255:53000",
            "[::]:53000",
            "192.0.2.1:0",
        ] {
            assert!(!answerable(src.parse().expect("address")), "{src}");
        }
        for src in ["192.0.2.1:53000", "[2001:db8::1]:53000", "[fe80::1]:53000"] {
            assert!(answerable(src.parse().expect("address")), "{src}");
        }
    }
}
