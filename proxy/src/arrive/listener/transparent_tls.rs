//! The transparent TLS listener: read the ClientHello without answering it, decide on its SNI,
//! then replay the bytes upstream untouched and tunnel, open it (interception), or refuse it:
//! inside its TLS with the coded answer when the sidecar has an environment CA, else by
//! closing. No SNI: close and journal why.

use std::net::IpAddr;
use std::sync::Arc;

use af_policy::error::codes;
use http::StatusCode;
use rustls::server::{Accepted, Acceptor};
use tls_parser::{SNIType, TlsExtension, TlsMessage, TlsMessageHandshake};
use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::net::TcpStream;
use tokio_rustls::StartHandshake;

use super::Conn;
use crate::answer::refusal::Refusal;
use crate::arrive::intercept::{Protocols, session};
use crate::decide::{Ask, TunnelVerdict, decide_tunnel, refuse_undecided};
use crate::leave::forward::{dial_failed, tunnel};
use crate::metrics::Via;
use crate::state::State;

/// The most ClientHello bytes read before giving up (a hello with a large post-quantum key
/// share fits well within this).
const MAX_HELLO: usize = 64 * 1024;

/// What the ClientHello said.
pub enum Hello {
    /// A ClientHello.
    Parsed {
        /// The server name, if it carried one.
        sni: Option<String>,
        /// Every byte read so far (to replay when tunnelling).
        bytes: Vec<u8>,
        /// The accepted hello (to continue the handshake when intercepting).
        accepted: Box<Accepted>,
    },
    /// Not TLS, or a malformed hello.
    NotTls(String),
}

/// Read from `stream` until a whole ClientHello is buffered. The bytes are kept for replay;
/// nothing is written to the client.
pub async fn read_client_hello<S: AsyncRead + Unpin>(stream: &mut S) -> std::io::Result<Hello> {
    let mut acceptor = Acceptor::default();
    let mut bytes = Vec::with_capacity(2048);
    let mut chunk = vec![0u8; 16 * 1024];
    loop {
        let n = stream.read(&mut chunk).await?;
        if n == 0 {
            return Ok(Hello::NotTls(
                "the client closed before sending a ClientHello".into(),
            ));
        }
        bytes.extend_from_slice(&chunk[..n]);
        if bytes.len() > MAX_HELLO {
            return Ok(Hello::NotTls(
                "the ClientHello is larger than 64 KiB".into(),
            ));
        }
        let mut rest = &chunk[..n];
        while !rest.is_empty() {
            match acceptor.read_tls(&mut rest) {
                Ok(0) => {
                    return Ok(Hello::NotTls(
                        "the ClientHello could not be buffered".into(),
                    ));
                }
                Ok(_) => {}
                Err(e) => return Ok(Hello::NotTls(format!("not a TLS ClientHello: {e}"))),
            }
        }
        match acceptor.accept() {
            Ok(Some(accepted)) => {
                let sni = accepted
                    .client_hello()
                    .server_name()
                    .map(str::to_owned)
                    .or_else(|| ip_literal_sni(&bytes).map(|ip| ip.to_string()));
                return Ok(Hello::Parsed {
                    sni,
                    bytes,
                    accepted: Box::new(accepted),
                });
            }
            Ok(None) => continue,
            Err((e, _alert)) => return Ok(Hello::NotTls(format!("not a TLS ClientHello: {e}"))),
        }
    }
}

/// The server name of a ClientHello that names an IP address (`203.0.113.5`), which rustls
/// sets aside as no name at all (RFC 6066 allows only host names there). The connection is
/// then decided, and journaled, on that address, as a CONNECT to it would be. Read with
/// tls-parser from the hello's first record; `None` when it names no address.
fn ip_literal_sni(hello: &[u8]) -> Option<IpAddr> {
    let (_, record) = tls_parser::parse_tls_plaintext(hello).ok()?;
    record.msg.iter().find_map(|message| {
        let TlsMessage::Handshake(TlsMessageHandshake::ClientHello(hello)) = message else {
            return None;
        };
        let (_, extensions) = tls_parser::parse_tls_client_hello_extensions(hello.ext?).ok()?;
        extensions.iter().find_map(|extension| match extension {
            TlsExtension::SNI(names) => names
                .iter()
                .filter(|(kind, _)| *kind == SNIType::HostName)
                .find_map(|(_, name)| std::str::from_utf8(name).ok()?.parse().ok()),
            _ => None,
        })
    })
}

/// Serve one client connection.
pub(crate) async fn serve(state: Arc<State>, mut stream: TcpStream, conn: Conn) {
    let port = state.tuning.tls_port;
    let mut ask = Ask {
        via: Via::Tls,
        arrived: None,
        client: conn.peer,
        method: "",
        host: "",
        port,
        path: "",
        tunnel: true,
    };
    let hello = tokio::time::timeout(
        state.tuning.client_hello_timeout,
        read_client_hello(&mut stream),
    )
    .await;
    let refuse = |reason: &str, code, statement: String| {
        let refusal = Refusal::new(StatusCode::BAD_REQUEST, code, reason.to_owned(), statement);
        refuse_undecided(&state, &ask, &refusal);
    };
    let (sni, bytes, accepted) = match hello {
        Err(_) => {
            return refuse(
                "client_hello_timeout",
                &codes::NET_BAD_REQUEST,
                format!(
                    "No ClientHello arrived within {} ms",
                    state.tuning.client_hello_timeout.as_millis()
                ),
            );
        }
        Ok(Err(e)) => {
            return refuse(
                "not_tls",
                &codes::NET_BAD_REQUEST,
                format!("Reading the ClientHello failed: {e}"),
            );
        }
        Ok(Ok(Hello::NotTls(why))) => return refuse("not_tls", &codes::NET_BAD_REQUEST, why),
        Ok(Ok(Hello::Parsed { sni: None, .. })) => {
            return refuse(
                "no_sni",
                &codes::NET_NO_SNI,
                "A TLS connection named no server (no SNI), so it could not be decided".into(),
            );
        }
        Ok(Ok(Hello::Parsed {
            sni: Some(sni),
            bytes,
            accepted,
        })) => (sni, bytes, accepted),
    };
    ask.host = &sni;
    let (ticket, verdict) = decide_tunnel(&state, &ask);
    match verdict {
        TunnelVerdict::Tunnel => {}
        TunnelVerdict::Intercept(interception) => {
            let start = StartHandshake::from_parts(*accepted, stream);
            let host = ticket.host().to_owned();
            let handshake = interception.finish(start, &host, Protocols::Http);
            return session::open(state.clone(), conn, ticket, port, handshake).await;
        }
        // With the environment CA the client's TLS is opened, so it reads the coded answer a
        // CONNECT refusal gets; without one closing is the answer.
        TunnelVerdict::Refuse(refusal) => {
            let Some(interception) = state.intercept.clone() else {
                return ticket.refused(&refusal);
            };
            let start = StartHandshake::from_parts(*accepted, stream);
            let host = ticket.host().to_owned();
            let handshake = interception.finish(start, &host, Protocols::Http);
            return session::refuse(state.clone(), conn, ticket, refusal, handshake).await;
        }
    }
    let upstream = match state.guard.dial(ticket.host(), port).await {
        Ok(s) => s,
        Err(e) => {
            dial_failed(&e, ticket, false);
            return;
        }
    };
    let end = tunnel::run(
        tunnel::Client::Socket(stream),
        upstream,
        &bytes,
        &state,
        conn.activity.clone(),
    )
    .await;
    end.close(ticket, None);
}
