//! The transparent HTTP listener: origin-form requests with `Host`, decided on the listener's
//! advertised port (never on a port in `Host`). Every request on a keep-alive connection is
//! decided on its own.

use std::sync::Arc;

use af_policy::error::codes;
use http::uri::Authority;
use http::{Request, Response, StatusCode, header};
use hyper::body::Incoming;
use tokio::net::TcpStream;

use super::{Conn, bad_request, serve_http};
use crate::answer::Refusal;
use crate::decide::{Ask, decide};
use crate::forward::http::{ProxyBody, forward};
use crate::metrics::Via;
use crate::state::State;

/// Serve one client connection.
pub async fn serve(state: Arc<State>, stream: TcpStream, conn: Conn) {
    let s = state.clone();
    let c = conn.clone();
    serve_http(&state, stream, &conn, move |req| {
        handle(s.clone(), c.clone(), req)
    })
    .await;
}

async fn handle(state: Arc<State>, conn: Conn, req: Request<Incoming>) -> Response<ProxyBody> {
    let method = req.method().clone();
    let path = req
        .uri()
        .path_and_query()
        .map_or("/", |p| p.as_str())
        .to_owned();
    let port = state.tuning.http_port;
    let mut ask = Ask {
        via: Via::Transparent,
        client: conn.peer,
        method: method.as_str(),
        host: "",
        port,
        path: &path,
        tunnel: false,
    };
    let authority = match request_authority(&req) {
        Ok(authority) => authority,
        Err(problem) => {
            let refusal = Refusal::new(
                StatusCode::BAD_REQUEST,
                &codes::NET_BAD_REQUEST,
                "bad_request",
                format!("{method} {path} {problem}, so it cannot be decided"),
            )
            .with_next("Send exactly one Host header naming the server.");
            return bad_request(&state, &ask, refusal);
        }
    };
    ask.host = authority.host();
    let (ticket, refusal) = decide(&state, &ask);
    if let Some(refusal) = refusal {
        let resp = refusal.response();
        ticket.refused(&refusal);
        return resp;
    }
    let host = ticket.host().to_owned();
    // The upstream gets the Host that was decided, never a second or different one.
    forward(&state.client, req, &host, port, authority.as_str(), ticket).await
}

/// The one host a transparent request names: its absolute-form authority or its single `Host`
/// header. Two `Host` headers, or an authority and a `Host` that disagree, are refused: an
/// upstream might serve the one that was not decided.
fn request_authority(req: &Request<Incoming>) -> Result<Authority, &'static str> {
    let mut hosts = req.headers().get_all(header::HOST).iter();
    let header_host = hosts
        .next()
        .map(|h| h.to_str().map_err(|_| "has a Host header that is not text"))
        .transpose()?;
    if hosts.next().is_some() {
        return Err("has more than one Host header");
    }
    let named = match (req.uri().authority(), header_host) {
        (Some(uri), Some(host)) if !uri.as_str().eq_ignore_ascii_case(host) => {
            return Err("names one host in its URL and another in its Host header");
        }
        (Some(uri), _) => uri.as_str(),
        (None, Some(host)) => host,
        (None, None) => return Err("has no Host header"),
    };
    named
        .parse::<Authority>()
        .ok()
        .filter(|a| !a.host().is_empty())
        .ok_or("has no usable Host header")
}
