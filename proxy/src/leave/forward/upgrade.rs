//! A request that switches protocols (HTTP/1.1 `Upgrade`, WebSocket above all): decided like
//! any request, forwarded with its `Connection: upgrade` and `Upgrade` kept, and, once the
//! upstream answers `101 Switching Protocols`, answered the same and relayed byte for byte both
//! ways until a side closes, under the idle watchdog and the drain deadline. Its one record is
//! written at the close, with the bytes that moved.

use std::sync::Arc;

use bytes::Bytes;
use http::header::{self, HeaderMap, HeaderValue};
use http::{Request, Response, StatusCode};
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

/// The switch a request asks for, taken from it before its hop-by-hop headers go.
pub(crate) struct Upgrade {
    client: OnUpgrade,
    protocol: HeaderValue,
}

impl Upgrade {
    /// Whether `req` asks to switch protocols: HTTP/1.1 whose `Connection` names `upgrade` and
    /// which says to what (`Upgrade: websocket`).
    pub(crate) fn asked<B>(req: &Request<B>) -> bool {
        req.version() == http::Version::HTTP_11
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
        Some(Upgrade {
            client: hyper::upgrade::on(req),
            protocol,
        })
    }

    /// Ask the upstream for the same switch (after the hop-by-hop headers were stripped).
    pub(crate) fn ask(&self, headers: &mut HeaderMap) {
        headers.insert(header::CONNECTION, HeaderValue::from_static("upgrade"));
        headers.insert(header::UPGRADE, self.protocol.clone());
    }

    /// Whether the upstream's answer switched (`101`); any other is answered as usual.
    pub(crate) fn switched(resp: &Response<Incoming>) -> bool {
        resp.status() == StatusCode::SWITCHING_PROTOCOLS
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
        *answer.status_mut() = StatusCode::SWITCHING_PROTOCOLS;
        let headers = answer.headers_mut();
        for (name, value) in resp.headers() {
            if !super::http::is_hop_by_hop(name) {
                headers.append(name.clone(), value.clone());
            }
        }
        let protocol = resp
            .headers()
            .get(header::UPGRADE)
            .cloned()
            .unwrap_or(self.protocol);
        headers.insert(header::CONNECTION, HeaderValue::from_static("upgrade"));
        headers.insert(header::UPGRADE, protocol);
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
            .close(ticket, Some(101));
        });
        answer
    }
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
