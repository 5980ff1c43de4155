//! The transparent HTTP listener: origin-form requests with `Host`, decided on the listener's
//! advertised port (never on a port in `Host`). Every request on a keep-alive connection is
//! decided on its own.

use std::sync::Arc;

use af_policy::error::codes;
use http::{Request, Response, StatusCode};
use hyper::body::Incoming;
use tokio::net::TcpStream;

use super::{Conn, bad_request, request_authority, serve_http};
use crate::answer::Refusal;
use crate::decide::Ask;
use crate::forward::http::ProxyBody;
use crate::metrics::Via;
use crate::respond::{Origin, respond};
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
    let port = state.tuning.http_port;
    let authority = match request_authority(&req).and_then(|a| a.ok_or("has no Host header")) {
        Ok(authority) => authority,
        Err(problem) => {
            let path = req.uri().path_and_query().map_or("/", |p| p.as_str());
            let ask = Ask {
                via: Via::Transparent,
                client: conn.peer,
                method: req.method().as_str(),
                host: "",
                port,
                path,
                tunnel: false,
            };
            let refusal = Refusal::new(
                StatusCode::BAD_REQUEST,
                &codes::NET_BAD_REQUEST,
                "bad_request",
                format!("{} {path} {problem}, so it cannot be decided", ask.method),
            )
            .with_next("Send exactly one Host header naming the server.");
            return bad_request(&state, &ask, refusal);
        }
    };
    let origin = Origin {
        via: Via::Transparent,
        client: conn.peer,
        port,
    };
    // The upstream gets the Host that was decided, never a second or different one.
    respond(&state, origin, req, authority.host(), authority.as_str()).await
}
