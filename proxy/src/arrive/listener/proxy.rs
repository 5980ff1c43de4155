//! The explicit proxy listener: absolute-form `http://` requests and CONNECT tunnels, over
//! HTTP/1.1 or HTTP/2 with prior knowledge (a stream's `:scheme` and `:authority` are its
//! absolute form, decided the same way).

use std::sync::Arc;

use af_policy::error::codes;
use bytes::Bytes;
use http::uri::Authority;
use http::{Method, Request, Response, StatusCode};
use http_body_util::{Either, Full};
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;

use super::authority::authority_port;
use super::{Conn, bad_request, serve_cleartext, tunnel_client};
use crate::answer::body::ProxyBody;
use crate::answer::refusal::Refusal;
use crate::answer::refuse::refuse;
use crate::answer::request::{Origin, respond};
use crate::arrive::intercept::{Interception, Protocols, session};
use crate::decide::tripwire;
use crate::decide::{Ask, Ticket, TunnelVerdict, decide_tunnel};
use crate::leave::forward::{dial_failed, tunnel};
use crate::metrics::Via;
use crate::state::State;

/// Serve one client connection.
pub(crate) async fn serve(state: Arc<State>, stream: TcpStream, conn: Conn) {
    let s = state.clone();
    let c = conn.clone();
    let origin = Origin {
        via: Via::Proxy,
        arrived: None,
        client: conn.peer,
        port: 0,
    };
    serve_cleartext(&state, stream, &conn, origin, move |req| {
        handle(s.clone(), c.clone(), req)
    })
    .await;
}

async fn handle(state: Arc<State>, conn: Conn, req: Request<Incoming>) -> Response<ProxyBody> {
    if req.method() == Method::CONNECT {
        return connect(state, conn, req).await;
    }
    let uri = req.uri().clone();
    let method = req.method().clone();
    let path = uri.path_and_query().map_or("/", |p| p.as_str());
    let mut ask = Ask {
        via: Via::Proxy,
        arrived: None,
        client: conn.peer,
        method: method.as_str(),
        host: "",
        port: 80,
        path,
        tunnel: false,
    };
    let (host, authority) = match (uri.scheme_str(), uri.host(), uri.authority()) {
        (Some("http"), Some(host), Some(authority)) => (host, authority),
        (Some(_), Some(host), _) => {
            ask.host = host;
            let refusal = Refusal::new(
                StatusCode::BAD_REQUEST,
                &codes::NET_BAD_REQUEST,
                "bad_request",
                format!(
                    "{}://{host}{} is not an http:// URL; this proxy forwards plain HTTP and tunnels everything else",
                    uri.scheme_str().unwrap_or_default(),
                    tripwire::redact_path(host, path)
                ),
            )
            .with_next("Send https:// requests as CONNECT (HTTPS_PROXY does this).");
            return bad_request(&state, &ask, refusal);
        }
        _ => {
            let refusal = Refusal::new(
                StatusCode::BAD_REQUEST,
                &codes::NET_NOT_PROXY_REQUEST,
                "not_proxy_request",
                format!(
                    "{method} {} reached the proxy port without an absolute URL",
                    tripwire::redact_path(uri.host().unwrap_or_default(), path)
                ),
            );
            return bad_request(&state, &ask, refusal);
        }
    };
    ask.host = host;
    let port = match authority_port(authority) {
        Ok(port) => port.unwrap_or(80),
        Err(bad) => {
            let what = format!(
                "{method} http://{}{}",
                bad.authority(),
                tripwire::redact_path(host, path)
            );
            return bad_request(&state, &ask, bad.refusal(&what, "URL"));
        }
    };
    let origin = Origin {
        via: Via::Proxy,
        arrived: None,
        client: conn.peer,
        port,
    };
    // Borrowed from the URI's clone above: no copy per request.
    let authority = authority.as_str();
    let authority = authority.rsplit_once('@').map_or(authority, |(_, a)| a);
    respond(&state, origin, req, host, authority).await
}

/// CONNECT: decide on the authority, dial through the guard, answer 200 and tunnel.
async fn connect(state: Arc<State>, conn: Conn, mut req: Request<Incoming>) -> Response<ProxyBody> {
    let authority = req.uri().authority().cloned();
    let mut ask = Ask {
        via: Via::Proxy,
        arrived: None,
        client: conn.peer,
        method: "CONNECT",
        host: "",
        port: 0,
        path: "",
        tunnel: true,
    };
    let target = authority
        .as_ref()
        .map(|a| authority_port(a).map(|p| p.map(|p| (a.host(), p))));
    let Some((host, port)) = (match target {
        Some(Ok(named)) => named,
        None => None,
        Some(Err(bad)) => {
            ask.host = authority.as_ref().map_or("", Authority::host);
            let what = format!("CONNECT {}", bad.authority());
            return bad_request(&state, &ask, bad.refusal(&what, "target"));
        }
    }) else {
        let refusal = Refusal::new(
            StatusCode::BAD_REQUEST,
            &codes::NET_BAD_REQUEST,
            "bad_request",
            format!(
                "CONNECT {} does not name a host and port",
                tripwire::redact_path("", &req.uri().to_string())
            ),
        )
        .with_next("Send CONNECT host:port.");
        return bad_request(&state, &ask, refusal);
    };
    ask.host = host;
    ask.port = port;
    let (ticket, verdict) = decide_tunnel(&state, &ask);
    match verdict {
        TunnelVerdict::Tunnel => {}
        TunnelVerdict::Intercept(interception) => {
            return intercept(interception, state, conn, req, ticket, port);
        }
        TunnelVerdict::Refuse(refusal) => return refuse(ticket, &refusal),
    }
    let upstream = match state.guard.dial(ticket.host(), port).await {
        Ok(s) => s,
        Err(e) => return dial_failed(&e, ticket, true).response().map(Either::Left),
    };
    let on_upgrade = hyper::upgrade::on(&mut req);
    let s = state.clone();
    state.drain.spawn(async move {
        let _admitted = conn.admitted.clone();
        let taken = match on_upgrade.await {
            Ok(upgraded) => tunnel_client(upgraded).await,
            Err(e) => Err(std::io::Error::other(e)),
        };
        match taken {
            Ok((client, replay)) => {
                let end = tunnel::run(client, upstream, &replay, &s, conn.activity.clone()).await;
                end.close(ticket, Some(200));
            }
            Err(e) => ticket.upstream_failed(
                Some(200),
                &codes::NET_BAD_REQUEST,
                "tunnel",
                format!("the client connection could not be taken over: {e}"),
                0,
                0,
            ),
        }
    });
    Response::new(Either::Left(Full::new(Bytes::new())))
}

/// CONNECT to a host that needs TLS opened: answer 200, then open the client's TLS with the
/// environment CA and serve the requests inside.
fn intercept(
    interception: Arc<Interception>,
    state: Arc<State>,
    conn: Conn,
    mut req: Request<Incoming>,
    ticket: Ticket,
    port: u16,
) -> Response<ProxyBody> {
    let on_upgrade = hyper::upgrade::on(&mut req);
    let drain = state.drain.clone();
    drain.spawn(async move {
        let _admitted = conn.admitted.clone();
        let upgraded = match on_upgrade.await {
            Ok(upgraded) => upgraded,
            Err(e) => {
                return ticket.upstream_failed(
                    Some(200),
                    &codes::NET_BAD_REQUEST,
                    "tunnel",
                    format!("the client connection could not be taken over: {e}"),
                    0,
                    0,
                );
            }
        };
        let host = ticket.host().to_owned();
        let handshake = interception.accept(TokioIo::new(upgraded), &host, Protocols::Http);
        session::open(state, conn, ticket, port, handshake).await;
    });
    Response::new(Either::Left(Full::new(Bytes::new())))
}
