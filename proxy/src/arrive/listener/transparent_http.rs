//! The transparent HTTP listener: origin-form requests with `Host`, decided on the listener's
//! advertised port (never on a port in `Host`), over HTTP/1.1 or HTTP/2 with prior knowledge
//! (`:authority` in place of `Host`). Every request on a keep-alive connection, and every
//! HTTP/2 stream, is decided on its own.

use std::sync::Arc;

use http::{Request, Response};
use hyper::body::Incoming;
use tokio::net::TcpStream;

use super::authority::HostProblem;
use super::{Conn, no_single_host, request_authority, serve_cleartext};
use crate::answer::body::ProxyBody;
use crate::answer::request::{Origin, respond};
use crate::metrics::Via;
use crate::state::State;

/// Serve one client connection.
pub(crate) async fn serve(state: Arc<State>, stream: TcpStream, conn: Conn) {
    let s = state.clone();
    let c = conn.clone();
    let origin = Origin {
        via: Via::Transparent,
        arrived: None,
        client: conn.peer,
        port: state.tuning.http_port,
    };
    serve_cleartext(&state, stream, &conn, origin, move |req| {
        handle(s.clone(), c.clone(), req)
    })
    .await;
}

async fn handle(state: Arc<State>, conn: Conn, req: Request<Incoming>) -> Response<ProxyBody> {
    let origin = Origin {
        via: Via::Transparent,
        arrived: None,
        client: conn.peer,
        port: state.tuning.http_port,
    };
    let authority = match request_authority(&req)
        .and_then(|a| a.ok_or(HostProblem::NotOne("has no Host header")))
    {
        Ok(authority) => authority,
        Err(problem) => return no_single_host(&state, origin, "", &req, &problem),
    };
    // The upstream gets the Host that was decided, never a second or different one.
    respond(&state, origin, req, authority.host(), authority.as_str()).await
}
