//! A request that switches protocols (HTTP/1.1 `Upgrade`, WebSocket above all): decided like
//! any request, forwarded with its `Connection: upgrade` and `Upgrade` kept, and, once the
//! upstream answers `101 Switching Protocols`, answered the same and relayed byte for byte both
//! ways until a side closes, under the idle watchdog and the drain deadline. Its one record is
//! written at the close, with the bytes that moved.
//!
//! A WebSocket opened over HTTP/2 (RFC 8441: `CONNECT` with `:protocol: websocket`) is the same
//! request in HTTP/2's terms. It is read as its HTTP/1.1 form ([`Upgrade::read_extended_connect`]:
//! `GET`, `Upgrade: websocket`, a `Sec-WebSocket-Key` of the sidecar's own), so it is decided
//! by the same rules and forwarded over HTTP/1.1; the upstream's `101`, its
//! `Sec-WebSocket-Accept` checked against that key, is answered as HTTP/2's `200`, and the
//! stream is relayed the same way.

use std::sync::Arc;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use bytes::Bytes;
use http::header::{self, HeaderMap, HeaderValue};
use http::{Method, Request, Response, StatusCode};
use http_body_util::{Either, Full};
use hyper::body::Incoming;
use hyper::upgrade::OnUpgrade;
use hyper_util::rt::TokioIo;

use super::client::SentBytes;
use super::tunnel::{self, Closed, TunnelEnd};
use crate::answer::body::ProxyBody;
use crate::decide::Ticket;
use crate::limits::Activity;
use crate::state::State;

/// RFC 6455's GUID, which the server's `Sec-WebSocket-Accept` hashes with the key.
const WEBSOCKET_GUID: &[u8] = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11";

/// Marks a request that came as RFC 8441's extended `CONNECT`, with the key the sidecar sent
/// upstream in its name.
#[derive(Clone)]
struct ExtendedConnect {
    key: HeaderValue,
}

/// The switch a request asks for, taken from it before its hop-by-hop headers go.
pub(crate) struct Upgrade {
    client: OnUpgrade,
    protocol: HeaderValue,
    /// Set when the client asked over HTTP/2 (RFC 8441): answered `200`, not `101`.
    extended: Option<ExtendedConnect>,
}

impl Upgrade {
    /// Read an RFC 8441 WebSocket (`CONNECT`, `:protocol: websocket`) as its HTTP/1.1 form, in
    /// place: `GET` with `Connection: upgrade`, `Upgrade: websocket` and a fresh
    /// `Sec-WebSocket-Key`. Any other request is left as it is.
    pub(crate) fn read_extended_connect<B>(req: &mut Request<B>) {
        let websocket = req.method() == Method::CONNECT
            && req
                .extensions()
                .get::<hyper::ext::Protocol>()
                .is_some_and(|p| p.as_str().eq_ignore_ascii_case("websocket"));
        if !websocket {
            return;
        }
        let key = websocket_key();
        *req.method_mut() = Method::GET;
        let headers = req.headers_mut();
        headers.insert(header::CONNECTION, HeaderValue::from_static("upgrade"));
        headers.insert(header::UPGRADE, HeaderValue::from_static("websocket"));
        headers.insert(header::SEC_WEBSOCKET_KEY, key.clone());
        req.extensions_mut().insert(ExtendedConnect { key });
    }

    /// Whether `req` asks to switch protocols: HTTP/1.1 whose `Connection` names `upgrade` and
    /// which says to what (`Upgrade: websocket`), or a WebSocket over HTTP/2 read so.
    pub(crate) fn asked<B>(req: &Request<B>) -> bool {
        (req.version() == http::Version::HTTP_11
            || req.extensions().get::<ExtendedConnect>().is_some())
            && req.headers().contains_key(header::UPGRADE)
            && req
                .headers()
                .get_all(header::CONNECTION)
                .iter()
                .filter_map(|v| v.to_str().ok())
                .flat_map(|v| v.split(','))
                .any(|token| token.trim().eq_ignore_ascii_case("upgrade"))
    }

    /// The switch `req` asks for ([`Upgrade::asked`]); `None` for any other request.
    pub(crate) fn take(req: &mut Request<Incoming>) -> Option<Upgrade> {
        if !Self::asked(req) {
            return None;
        }
        let protocol = req.headers().get(header::UPGRADE)?.clone();
        let extended = req.extensions_mut().remove::<ExtendedConnect>();
        Some(Upgrade {
            client: hyper::upgrade::on(req),
            protocol,
            extended,
        })
    }

    /// Ask the upstream for the same switch (after the hop-by-hop headers were stripped).
    pub(crate) fn ask(&self, headers: &mut HeaderMap) {
        headers.insert(header::CONNECTION, HeaderValue::from_static("upgrade"));
        headers.insert(header::UPGRADE, self.protocol.clone());
    }

    /// Whether the upstream's answer switched (`101`); any other is answered as usual. For a
    /// WebSocket the sidecar opened on a client's behalf (RFC 8441) the upstream must also
    /// prove it read the sidecar's key.
    pub(crate) fn switched(&self, resp: &Response<Incoming>) -> bool {
        resp.status() == StatusCode::SWITCHING_PROTOCOLS
            && self.extended.as_ref().is_none_or(|e| {
                resp.headers()
                    .get(header::SEC_WEBSOCKET_ACCEPT)
                    .is_some_and(|accept| *accept == websocket_accept(&e.key))
            })
    }

    /// The upstream switched (`resp`, a `101`): the client is answered the same, with the
    /// protocol the upstream switched to, and the two connections relayed on their own task.
    pub(crate) fn switch(
        self,
        resp: &mut Response<Incoming>,
        ticket: Ticket,
        sent: &SentBytes,
        state: &Arc<State>,
    ) -> Response<ProxyBody> {
        let upstream = hyper::upgrade::on(&mut *resp);
        let mut answer = Response::new(Either::Left(Full::new(Bytes::new())));
        let headers = answer.headers_mut();
        for (name, value) in resp.headers() {
            if !super::http::is_hop_by_hop(name) {
                headers.append(name.clone(), value.clone());
            }
        }
        let status = if self.extended.is_some() {
            // HTTP/2's answer to an extended CONNECT: 200, and no proof of a key the client
            // never sent.
            headers.remove(header::SEC_WEBSOCKET_ACCEPT);
            StatusCode::OK
        } else {
            let protocol = resp
                .headers()
                .get(header::UPGRADE)
                .cloned()
                .unwrap_or(self.protocol);
            headers.insert(header::CONNECTION, HeaderValue::from_static("upgrade"));
            headers.insert(header::UPGRADE, protocol);
            StatusCode::SWITCHING_PROTOCOLS
        };
        *answer.status_mut() = status;
        let before = sent.get();
        let state_for_relay = state.clone();
        let client = self.client;
        state.drain.spawn(async move {
            let end = relay(client, upstream, &state_for_relay).await;
            let TunnelEnd { up, down, closed } = end;
            TunnelEnd {
                up: up + before,
                down,
                closed,
            }
            .close(ticket, Some(status.as_u16()));
        });
        answer
    }
}

/// A fresh `Sec-WebSocket-Key`: 16 random bytes, base64.
fn websocket_key() -> HeaderValue {
    use ring::rand::SecureRandom;
    let mut nonce = [0u8; 16];
    // The system's randomness does not fail on Linux; were it to, a key of zeros still
    // opens the WebSocket (the key proves a WebSocket server, not a secret).
    let _ = ring::rand::SystemRandom::new().fill(&mut nonce);
    HeaderValue::from_str(&STANDARD.encode(nonce)).unwrap_or(HeaderValue::from_static(""))
}

/// The `Sec-WebSocket-Accept` a WebSocket server answers `key` with (RFC 6455 section 4.2.2).
fn websocket_accept(key: &HeaderValue) -> String {
    let mut hash = ring::digest::Context::new(&ring::digest::SHA1_FOR_LEGACY_USE_ONLY);
    hash.update(key.as_bytes());
    hash.update(WEBSOCKET_GUID);
    STANDARD.encode(hash.finish())
}

/// Bytes both ways between the two switched connections.
async fn relay(client: OnUpgrade, upstream: OnUpgrade, state: &State) -> TunnelEnd {
    let failed = |why: String| TunnelEnd {
        up: 0,
        down: 0,
        closed: Closed::Failed(why),
    };
    let (client, upstream) = match tokio::join!(client, upstream) {
        (Ok(c), Ok(u)) => (c, u),
        (Err(e), _) => return failed(format!("the client's switched connection: {e}")),
        (_, Err(e)) => return failed(format!("the upstream's switched connection: {e}")),
    };
    tunnel::buffered(
        TokioIo::new(client),
        TokioIo::new(upstream),
        state,
        Activity::new(),
    )
    .await
}

#[cfg(test)]
mod tests {
    use super::*;

    fn extended_connect() -> Request<()> {
        let mut req = Request::builder()
            .method(Method::CONNECT)
            .version(http::Version::HTTP_2)
            .uri("https://ws.test/socket")
            .header(header::SEC_WEBSOCKET_VERSION, "13")
            .body(())
            .expect("request");
        req.extensions_mut()
            .insert(hyper::ext::Protocol::from_static("websocket"));
        req
    }

    #[test]
    fn the_accept_is_rfc_6455s_own_example() {
        let key = HeaderValue::from_static("dGhlIHNhbXBsZSBub25jZQ==");
        assert_eq!(websocket_accept(&key), "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=");
    }

    #[test]
    fn a_websocket_over_http2_is_read_as_its_http1_upgrade() {
        let mut req = extended_connect();
        Upgrade::read_extended_connect(&mut req);
        assert_eq!(req.method(), Method::GET);
        assert!(Upgrade::asked(&req));
        let h = req.headers();
        assert_eq!(h[header::UPGRADE], "websocket");
        assert_eq!(h[header::SEC_WEBSOCKET_VERSION], "13");
        let key = STANDARD
            .decode(h[header::SEC_WEBSOCKET_KEY].as_bytes())
            .expect("base64");
        assert_eq!(key.len(), 16);
        let mut other = extended_connect();
        Upgrade::read_extended_connect(&mut other);
        assert_ne!(
            other.headers()[header::SEC_WEBSOCKET_KEY],
            h[header::SEC_WEBSOCKET_KEY],
            "each key is fresh"
        );
    }

    #[test]
    fn another_protocol_over_connect_is_left_as_it_is() {
        let mut req = extended_connect();
        req.extensions_mut()
            .insert(hyper::ext::Protocol::from_static("connect-udp"));
        Upgrade::read_extended_connect(&mut req);
        assert_eq!(req.method(), Method::CONNECT);
        assert!(!Upgrade::asked(&req));
    }
}
