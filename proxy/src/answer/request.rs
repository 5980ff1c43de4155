//! One HTTP request, whichever way it came in (the proxy's absolute form, transparent HTTP, or
//! inside an intercepted TLS connection): decided on its own host, method and path, checked by
//! the live-credential tripwire, then refused, forwarded (allow, sandbox) or answered by the
//! sidecar itself (mock, capture, synth).
//!
//! Framing is hyper's: a head with both `Transfer-Encoding` and `Content-Length` is read by
//! its chunked encoding alone (RFC 9112 §6.3), differing `Content-Length`s are refused with 400,
//! and every request is forwarded re-framed, so bytes smuggled after a body are read as the
//! next request and decided on their own.

use std::error::Error;
use std::net::SocketAddr;
use std::sync::Arc;

use af_policy::error::codes;
use http::{Request, Response, StatusCode};
use hyper::body::Incoming;
use hyper_util::client::legacy::connect::HttpInfo;

use crate::answer::local;
use crate::answer::modes::sandbox;
use crate::answer::refusal::Refusal;
use crate::decide::tripwire;
use crate::decide::{Ask, HostPort, Serve, Ticket, decide_request, within_rate_limit};
use crate::leave::forward::http::{ProxyBody, Upstream, forward};
use crate::metrics::Via;
use crate::state::State;

/// Where a request came from.
#[derive(Debug, Clone, Copy)]
pub struct Origin {
    /// The listener (or `Intercept`).
    pub via: Via,
    /// The client.
    pub client: SocketAddr,
    /// The port the request is decided and forwarded on.
    pub port: u16,
}

/// Decide and serve one request for `host`, asking the upstream for `authority` (the `Host` it
/// gets).
pub async fn respond(
    state: &Arc<State>,
    origin: Origin,
    req: Request<Incoming>,
    host: &str,
    authority: &str,
) -> Response<ProxyBody> {
    // The record redacts live secrets from the path (`Ticket`); the request keeps them, and
    // the tripwire below refuses it.
    let full_path = req.uri().path_and_query().map_or("/", |p| p.as_str());
    let ask = Ask {
        via: origin.via,
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
    let host = ticket.host().to_owned();
    let upstream = match origin.via {
        Via::Intercept => Upstream::Https(&state.https_client),
        _ => Upstream::Http(&state.client),
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
            forward(upstream, req, &host, origin.port, authority, ticket).await
        }
        // Boxed: answering locally is the larger state machine by far, and a connection keeps
        // room for its request future while it idles (hyper allocates it once).
        Serve::Locally(mode) => Box::pin(local::answer(state, mode, req, ticket)).await,
    }
}

/// Close the ticket as refused and answer.
pub fn refuse(ticket: Ticket, refusal: &Refusal) -> Response<ProxyBody> {
    let resp = refusal.response();
    ticket.refused(refusal);
    resp
}

/// The refusal of a request that already passed through this sidecar (a forwarding loop).
pub fn loop_refusal(host: &str, port: u16) -> Refusal {
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
pub fn refuse_loop(ticket: Ticket, host: &str, port: u16) -> Response<ProxyBody> {
    ticket.loops().remember(ticket.client());
    refuse(ticket, &loop_refusal(host, port))
}

/// Whether `resp`, the upstream's answer to the request `ticket` forwarded, is this sidecar
/// refusing that request as a loop (see [`crate::decide::loops`]).
pub fn came_back<B>(ticket: &Ticket, resp: &Response<B>) -> bool {
    resp.status() == StatusCode::LOOP_DETECTED
        && resp
            .extensions()
            .get::<HttpInfo>()
            .is_some_and(|info| ticket.loops().take(info.local_addr()))
}

/// When forwarding failed because the client's own request body could not be read (a
/// malformed chunk, or the client gone in the middle of it): the client's error, `400`, not
/// the upstream's. The request was allowed, and had begun to leave.
pub fn client_body_refusal(error: &(dyn Error + 'static)) -> Option<Refusal> {
    // hyper reports a failed request body as a user error ("error from user's Body stream")
    // whose source is the error reading it from the client.
    let mut cur = Some(error);
    let body_error = loop {
        let err = cur?;
        if let Some(e) = err.downcast_ref::<hyper::Error>()
            && e.is_user()
            && let Some(source) = e.source().and_then(|s| s.downcast_ref::<hyper::Error>())
        {
            break source;
        }
        cur = err.source();
    };
    let mut why = body_error.to_string();
    let mut cause = body_error.source();
    while let Some(e) = cause {
        why = format!("{why}: {e}");
        cause = e.source();
    }
    Some(Refusal {
        decision: "allow",
        ..Refusal::new(
            StatusCode::BAD_REQUEST,
            &codes::NET_BAD_REQUEST,
            "bad_body",
            format!(
                "The request body from the client could not be read ({why}), so the upstream got it cut short"
            ),
        )
        .with_next("Send a well-formed body (valid chunked encoding, or exactly Content-Length bytes).")
    })
}

/// The refusal for a live-looking secret (the secret itself is not in it).
pub fn live_credential(hit: &tripwire::Hit) -> Refusal {
    Refusal::new(
        StatusCode::FORBIDDEN,
        &codes::NET_LIVE_CREDENTIAL,
        "live_credential",
        hit.statement(),
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
