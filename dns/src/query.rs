//! One query, from the bytes that carried it to its answer, whichever transport it came by:
//! what hickory-server does with a datagram, in front of our [`Handler`]. A message shorter
//! than a header is dropped, one that does not decode gets `FORMERR`, and a response is never
//! answered (no reflection).

use std::net::SocketAddr;

use hickory_proto::{
    op::{Header, MessageType, ResponseCode},
    serialize::binary::{BinDecodable, BinDecoder},
};
use hickory_server::{
    net::{runtime::TokioTime, xfer::Protocol},
    server::{Request, RequestHandler, ResponseHandler},
    zone_handler::{MessageResponseBuilder, Queries},
};

use crate::handler::Handler;

/// Answer the query in `bytes` from `src` through `response`.
pub(crate) async fn answer<R: ResponseHandler>(
    handler: &Handler,
    bytes: Vec<u8>,
    src: SocketAddr,
    protocol: Protocol,
    mut response: R,
) {
    let Ok(header) = Header::read(&mut BinDecoder::new(&bytes)) else {
        return;
    };
    match Request::from_bytes(bytes, src, protocol) {
        Ok(request) if request.metadata.message_type == MessageType::Query => {
            handler
                .handle_request::<_, TokioTime>(&request, response)
                .await;
        }
        Ok(_) => {}
        Err(error) => {
            tracing::debug!(%error, client = %src, %protocol, "undecodable DNS message");
            // No question could be read, so none is echoed (reading zero from nothing is how
            // to get hickory's empty `Queries` outside its crate).
            let Ok(no_queries) = Queries::read(&mut BinDecoder::new(&[]), 0) else {
                return;
            };
            let reply = MessageResponseBuilder::new(&no_queries, None)
                .error_msg(&header.metadata, ResponseCode::FormErr);
            if let Err(error) = response.send_response(reply).await {
                tracing::debug!(%error, client = %src, "FORMERR not sent");
            }
        }
    }
}
