//! The SMTP listener: environments send mail to the sidecar (its DNS answers every outside name,
//! mail hosts included, with the sidecar), and every mail accepted lands in the inbox as one
//! `message` record. STARTTLS is offered on the environment CA when the sidecar has one.
//!
//! [`session`] is the protocol, [`mail`] turns a received mail into a [`Message`]; this module
//! only moves bytes, upgrades to TLS and journals.

pub(crate) mod mail;
pub(crate) mod session;

use std::net::SocketAddr;
use std::sync::Arc;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::arrive::intercept::Protocols;
use crate::arrive::listener::Conn;
use crate::metrics::Via;
use crate::record::journal::{Entry, MessageRecord};
use crate::record::message::Message;
use crate::state::State;
use session::{Session, Settings, Then};

/// The name the sidecar gives itself in SMTP replies, and the certificate's name for a
/// STARTTLS client that sends no server name.
pub(crate) const SERVER_NAME: &str = "smtp.af.internal";

/// The record's host when the client named no server (no TLS, or TLS without SNI).
const UNNAMED_HOST: &str = "smtp";

/// Bytes read from the client at once.
const READ_BUFFER_BYTES: usize = 16 * 1024;

/// Serve one SMTP client connection until it quits, goes idle or fails.
pub(crate) async fn serve(state: Arc<State>, mut stream: TcpStream, conn: Conn) {
    let mut session = Session::new(Settings {
        max_message_bytes: state.tuning.smtp_max_message_bytes,
        starttls: state.intercept.is_some(),
    });
    let plain = Conversation {
        state: &state,
        client: conn.peer,
        host: UNNAMED_HOST.to_owned(),
    };
    let then = match stream.write_all(&Session::greeting()).await {
        Ok(()) => plain.run(&mut stream, &mut session).await,
        Err(e) => Err(e),
    };
    match then {
        Ok(Then::StartTls) => start_tls(&state, stream, conn.peer, session).await,
        Ok(Then::Read | Then::Close) => {
            let _ = stream.shutdown().await;
        }
        Err(e) => tracing::debug!(peer = %conn.peer, error = %e, "smtp connection ended"),
    }
}

/// Upgrade to TLS on the environment CA and go on with the conversation inside it.
async fn start_tls(
    state: &Arc<State>,
    stream: TcpStream,
    client: SocketAddr,
    mut session: Session,
) {
    // The session offers STARTTLS only when interception is configured.
    let Some(intercept) = &state.intercept else {
        return;
    };
    let handshake = tokio::time::timeout(
        state.tuning.client_hello_timeout,
        intercept.accept(stream, SERVER_NAME, Protocols::Bare),
    )
    .await;
    let mut tls = match handshake {
        Ok(Ok(tls)) => tls,
        Ok(Err(e)) => {
            tracing::info!(peer = %client, error = %e, "smtp: STARTTLS handshake failed");
            return;
        }
        Err(_) => {
            tracing::info!(peer = %client, "smtp: STARTTLS handshake timed out");
            return;
        }
    };
    let host = tls
        .get_ref()
        .1
        .server_name()
        .map_or_else(|| UNNAMED_HOST.to_owned(), str::to_ascii_lowercase);
    session.tls_started();
    let secure = Conversation {
        state,
        client,
        host,
    };
    match secure.run(&mut tls, &mut session).await {
        Ok(Then::StartTls) => {
            // A session that has TLS never asks for it again; close rather than loop.
            tracing::warn!(peer = %client, "smtp: STARTTLS requested inside TLS");
        }
        Ok(Then::Read | Then::Close) => {
            let _ = tls.shutdown().await;
        }
        Err(e) => tracing::debug!(peer = %client, error = %e, "smtp connection ended"),
    }
}

/// One stretch of the conversation on one transport (plain, or inside TLS).
struct Conversation<'a> {
    state: &'a State,
    client: SocketAddr,
    /// The server name the client asked for (its TLS SNI), or [`UNNAMED_HOST`].
    host: String,
}

impl Conversation<'_> {
    /// Read, answer and journal until the session wants TLS or the end. Each read waits at
    /// most the idle timeout; a silent client gets a 421 and is closed.
    async fn run<IO>(&self, io: &mut IO, session: &mut Session) -> std::io::Result<Then>
    where
        IO: AsyncRead + AsyncWrite + Unpin,
    {
        let mut buf = vec![0u8; READ_BUFFER_BYTES];
        loop {
            let read = tokio::time::timeout(self.state.tuning.idle_timeout, io.read(&mut buf));
            let n = match read.await {
                Ok(n) => n?,
                Err(_) => {
                    io.write_all(&Session::idle_reply()).await?;
                    return Ok(Then::Close);
                }
            };
            if n == 0 {
                return Ok(Then::Close);
            }
            let out = session.feed(&buf[..n]);
            // Handed to the journal before the 250 goes out (the journal's queue drops only when
            // full, and counts what it drops).
            for message in out.messages {
                self.journal(message);
            }
            io.write_all(&out.replies).await?;
            io.flush().await?;
            if out.then != Then::Read {
                return Ok(out.then);
            }
        }
    }

    fn journal(&self, message: Message) {
        self.state.metrics.message_captured();
        self.state.journal.record(Entry::Message(MessageRecord {
            via: Via::Smtp.as_str().to_owned(),
            client: self.client,
            host: self.host.clone(),
            rule: None,
            message,
        }));
    }
}
