//! Accepting on the data listeners: admit each connection under the cap (or refuse it at the
//! cap), then hand it to its listener's own `serve`.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use af_policy::error::codes;
use http::StatusCode;
use tokio::net::{TcpListener, TcpStream};

use crate::answer::refusal::Refusal;
use crate::arrive::listener::{self, Conn};
use crate::arrive::smtp;
use crate::decide::{Ask, refuse_undecided};
use crate::limits::Activity;
use crate::metrics::Via;
use crate::state::State;

/// Accept on `listener` until the sidecar is stopping, serving each admitted connection as
/// `via` on the drain. The listener closes on return, so later connections are refused.
pub(crate) async fn accept_loop(listener: TcpListener, state: Arc<State>, via: Via) {
    let stopping = state.drain.stopping();
    tokio::pin!(stopping);
    loop {
        let accepted = tokio::select! {
            accepted = listener.accept() => accepted,
            () = &mut stopping => return,
        };
        let (stream, peer) = match accepted {
            Ok(x) => x,
            Err(e) => {
                // Out of file descriptors and the like: back off instead of spinning.
                tracing::warn!(error = %e, listener = via.as_str(), "accept failed");
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let _ = stream.set_nodelay(true);
        let drain = &state.drain;
        match state.limit.try_admit() {
            Some(admitted) => {
                let conn = Conn {
                    peer,
                    admitted: Arc::new(admitted),
                    activity: Activity::new(),
                };
                // One task per listener kind, each the size of its own future: a task that
                // matched on the kind would be as large as the largest (TLS interception,
                // about 10 KiB) for every idle plain-HTTP connection.
                match via {
                    Via::Proxy => drain.spawn(listener::proxy::serve(state.clone(), stream, conn)),
                    Via::Transparent => {
                        drain.spawn(listener::transparent_http::serve(
                            state.clone(),
                            stream,
                            conn,
                        ));
                    }
                    Via::Tls => drain.spawn(listener::transparent_tls::serve(
                        state.clone(),
                        stream,
                        conn,
                    )),
                    Via::Smtp => drain.spawn(smtp::serve(state.clone(), stream, conn)),
                    // Not a listener: requests inside an opened TLS connection.
                    Via::Intercept => {}
                }
            }
            None => match state.limit.try_refusing() {
                Some(slot) => {
                    let state = state.clone();
                    drain.spawn(async move {
                        refuse_at_limit(state, stream, peer, via, true).await;
                        drop(slot);
                    });
                }
                None => refuse_at_limit(state.clone(), stream, peer, via, false).await,
            },
        }
    }
}

/// At the connection cap: journal, answer HTTP clients 503 without parsing (when `answer`),
/// close.
async fn refuse_at_limit(
    state: Arc<State>,
    mut stream: TcpStream,
    peer: SocketAddr,
    via: Via,
    answer: bool,
) {
    let refusal = Refusal::new(
        StatusCode::SERVICE_UNAVAILABLE,
        &codes::NET_CONNECTION_LIMIT,
        "connection_limit",
        "The sidecar is at its connection limit and refused this connection",
    );
    let ask = Ask {
        via,
        arrived: None,
        client: peer,
        method: "",
        host: "",
        port: 0,
        path: "",
        tunnel: via == Via::Tls,
    };
    refuse_undecided(&state, &ask, &refusal);
    let reply = match via {
        Via::Tls | Via::Intercept => None,
        // A mail client reads an SMTP reply, not an HTTP one.
        Via::Smtp => Some(format!("421 4.3.2 {}\r\n", refusal.statement).into_bytes()),
        Via::Proxy | Via::Transparent => Some(refusal.raw_close_response()),
    };
    if let Some(reply) = reply.filter(|_| answer) {
        listener::gate::answer_and_close(&mut stream, &reply).await;
    }
}
