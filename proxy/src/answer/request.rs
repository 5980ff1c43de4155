//! One HTTP request, whichever way it came in (the proxy's absolute form, transparent HTTP, or
//! inside an intercepted TLS connection): decided on its own host, method and path, checked by
//! the live-credential tripwire, then refused, forwarded (allow, sandbox) or answered by the
//! sidecar itself (mock, capture, synth).
//!
//! Framing is hyper's: a head with both `Transfer-Encoding` and `Content-Length` is read by
//! its chunked encoding alone (RFC 9112 §6.3), differing `Content-Length`s are refused with 400,
//! and every request is forwarded re-framed, so bytes smuggled after a body are read as the
//! next request and decided on their own.

use std::net::SocketAddr;
use std::sync::Arc;

use af_policy::egress::Mode;
use af_policy::error::codes;
use http::{Request, Response, StatusCode};
use hyper::body::Incoming;

use crate::answer::body::ProxyBody;
use crate::answer::grpc;
use crate::answer::local;
use crate::answer::modes::sandbox;
use crate::answer::refusal::Refusal;
use crate::answer::refusal::live_credential;
use crate::answer::refuse::refuse;
use crate::decide::tripwire;
use crate::decide::{Ask, Serve, Ticket, decide_request, within_rate_limit};
use crate::leave::forward::http::{Upstream, forward};
use crate::leave::forward::upgrade::Upgrade;
use crate::metrics::Via;
use crate::state::State;

/// Where a request came from.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Origin {
    /// The listener (or `Intercept`).
    pub via: Via,
    /// For `Intercept`: the listener the opened connection arrived on (`Proxy`, `Tls`).
    pub arrived: Option<Via>,
    /// The client.
    pub client: SocketAddr,
    /// The port the request is decided and forwarded on.
    pub port: u16,
}

/// Decide and serve one request for `host`, asking the upstream for `authority` (the `Host` it
/// gets).
pub(crate) async fn respond(
    state: &Arc<State>,
    origin: Origin,
    mut req: Request<Incoming>,
    host: &str,
    authority: &str,
) -> Response<ProxyBody> {
    // A WebSocket over HTTP/2 is decided and forwarded as its HTTP/1.1 upgrade.
    Upgrade::read_extended_connect(&mut req);
    // The record redacts live secrets from the path (`Ticket`); the request keeps them, and
    // the tripwire below refuses it.
    let full_path = req.uri().path_and_query().map_or("/", |p| p.as_str());
    let ask = Ask {
        via: origin.via,
        arrived: origin.arrived,
        client: origin.client,
        method: req.method().as_str(),
        host,
        port: origin.port,
        path: full_path,
        tunnel: false,
    };
    let (ticket, verdict) = decide_request(state, &ask);
    let serve = match verdict {
        Ok(serve) => serve,
        Err(refusal) => return refuse(ticket, &refusal),
    };
    if let Some(hit) = tripwire::scan_head(full_path, req.headers()) {
        return refuse(ticket, &live_credential(&hit));
    }
    let upstream = match origin.via {
        Via::Intercept => Upstream::Https(&state.pools.here().https),
        _ => Upstream::Http(&state.pools.here().http),
    };
    let mut req = req;
    if serve == Serve::Sandbox
        && let Err(refusal) = with_test_credential(state, &ticket, &mut req)
    {
        return refuse(ticket, &refusal);
    }
    match serve {
        Serve::Forward | Serve::Sandbox => {
            if let Err(refusal) = within_rate_limit(state, &ticket) {
                return refuse(ticket, &refusal);
            }
            forward(state, upstream, req, origin.port, authority, ticket).await
        }
        // The sidecar's own answers are requests and responses, never a switched protocol,
        // and no pack describes gRPC.
        Serve::Locally(mode) if Upgrade::asked(&req) => refuse(ticket, &upgrade_unanswered(mode)),
        Serve::Locally(mode) if grpc::asked(&req) => refuse(ticket, &grpc_unanswered(mode)),
        // Boxed: answering locally is the larger state machine by far, and a connection keeps
        // room for its request future while it idles (hyper allocates it once).
        Serve::Locally(mode) => Box::pin(local::answer(state, mode, req, ticket)).await,
    }
}

/// The refusal of a protocol switch (a WebSocket) to a host the sidecar answers in `mode`.
fn upgrade_unanswered(mode: Mode) -> Refusal {
    Refusal::new(
        StatusCode::NOT_IMPLEMENTED,
        &codes::NET_UPGRADE_UNANSWERED,
        "upgrade_unanswered",
        format!(
            "This host is in {mode} mode and the sidecar answers it itself; it answers no switched protocol, so the WebSocket was not opened"
        ),
    )
}

/// The refusal of a gRPC call to a host the sidecar answers in `mode` (answered in gRPC's
/// terms, UNIMPLEMENTED, by [`grpc::answer`]).
fn grpc_unanswered(mode: Mode) -> Refusal {
    Refusal::new(
        StatusCode::NOT_IMPLEMENTED,
        &codes::NET_GRPC_UNANSWERED,
        "grpc_unanswered",
        format!(
            "This host is in {mode} mode and the sidecar answers it itself; no mock pack describes gRPC, so the call was not answered"
        ),
    )
}

/// Sandbox: the rule's test credential in place of the service's own, or a refusal.
fn with_test_credential(
    state: &State,
    ticket: &Ticket,
    req: &mut Request<Incoming>,
) -> Result<(), Box<Refusal>> {
    let host = ticket.host();
    let rule = ticket.rule().map(|id| state.catalogue.rule(id));
    let name = rule.and_then(|r| r.credential.as_deref());
    let credential = name.and_then(|n| state.modes.credentials.get(n));
    let Some(credential) = credential else {
        let statement = match name {
            Some(name) => format!(
                "{host} is in sandbox mode and its credential {name} has no value in this environment, so the request was not forwarded with the service's own key"
            ),
            None => format!(
                "{host} is in sandbox mode but its rule names no credential, so the request was not forwarded with the service's own key"
            ),
        };
        let next = match name {
            Some(name) => format!("Set {name} to the provider's test key before af up."),
            None => "Add `credential: NAME` to the rule and set NAME before af up.".to_owned(),
        };
        return Err(Box::new(
            Refusal::new(
                StatusCode::FORBIDDEN,
                &codes::NET_SANDBOX_CREDENTIAL,
                "no_credential",
                statement,
            )
            .with_next(next),
        ));
    };
    *req.uri_mut() = sandbox::without_query_credentials(req.uri());
    sandbox::swap(req.headers_mut(), host, credential).map_err(|e| {
        Box::new(Refusal::new(
            StatusCode::FORBIDDEN,
            &codes::NET_SANDBOX_CREDENTIAL,
            "bad_credential",
            e.to_string(),
        ))
    })
}
