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
    let host_header = req
        .uri()
        .authority()
        .map(|a| a.as_str().to_owned())
        .or_else(|| {
            req.headers()
                .get(header::HOST)
                .and_then(|h| h.to_str().ok())
                .map(str::to_owned)
        });
    let authority = host_header
        .as_deref()
        .and_then(|h| h.parse::<Authority>().ok());
    let mut ask = Ask {
        via: Via::Transparent,
        client: conn.peer,
        method: method.as_str(),
        host: "",
        port,
        path: &path,
        tunnel: false,
    };
    let Some(authority) = authority.filter(|a| !a.host().is_empty()) else {
        let refusal = Refusal::new(
            StatusCode::BAD_REQUEST,
            &codes::NET_BAD_REQUEST,
            "bad_request",
            format!("{method} {path} has no usable Host header, so it cannot be decided"),
        )
        .with_next("Send a Host header naming the server.");
        return bad_request(&state, &ask, refusal);
    };
    ask.host = authority.host();
    let (ticket, refusal) = decide(&state, &ask);
    if let Some(refusal) = refusal {
        let resp = refusal.response();
        ticket.refused(&refusal);
        return resp;
    }
    let host = ticket.host().to_owned();
    forward(&state.client, req, &host, port, None, ticket).await
}
