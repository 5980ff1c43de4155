//! Refusing a decided request: close its ticket as refused and answer with the refusal; and
//! the loop check on what came back from upstream.

use af_policy::error::codes;
use http::{Response, StatusCode};
use http_body_util::Either;
use hyper_util::client::legacy::connect::HttpInfo;

use crate::answer::body::ProxyBody;
use crate::answer::refusal::Refusal;
use crate::decide::{HostPort, Ticket};

/// Close the ticket as refused and answer.
pub(crate) fn refuse(ticket: Ticket, refusal: &Refusal) -> Response<ProxyBody> {
    let resp = refusal.response().map(Either::Left);
    ticket.refused(refusal);
    resp
}

/// The refusal of a request that already passed through this sidecar (a forwarding loop).
pub(crate) fn loop_refusal(host: &str, port: u16) -> Refusal {
    Refusal::new(
        StatusCode::LOOP_DETECTED,
        &codes::NET_BAD_REQUEST,
        "loop",
        format!(
            "The request to {} already passed through this sidecar (a forwarding loop)",
            HostPort(host, port)
        ),
    )
    .with_next("Send requests to the destination, not to the sidecar's own address.")
}

/// Refuse a request that carries this sidecar's own `Via`, remembering the connection it came
/// on so that the hop of this sidecar that sent it records it as refused too.
pub(crate) fn refuse_loop(ticket: Ticket, port: u16) -> Response<ProxyBody> {
    ticket.loops().remember(ticket.client());
    let refusal = loop_refusal(ticket.host(), port);
    refuse(ticket, &refusal)
}

/// Whether `resp`, the upstream's answer to the request `ticket` forwarded, is this sidecar
/// refusing that request as a loop (see [`crate::decide::loops`]).
pub(crate) fn came_back<B>(ticket: &Ticket, resp: &Response<B>) -> bool {
    resp.status() == StatusCode::LOOP_DETECTED
        && resp
            .extensions()
            .get::<HttpInfo>()
            .is_some_and(|info| ticket.loops().take(info.local_addr()))
}
