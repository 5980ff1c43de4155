//! TLS interception: the sidecar opens a client's TLS connection with a leaf certificate from
//! the environment CA, then decides every request inside it on its own `Host`.
//!
//! A CONNECT tunnel or a transparent TLS connection whose host needs TLS opened (its mode
//! answers locally, or its rule limits paths or methods) is handed to [`session::open`].
//! The handshake offers HTTP/2 and HTTP/1.1; a client that refuses the certificate (it pins,
//! or does not trust the environment CA) is journaled with the advice to set the host to allow.

pub(crate) mod authority;
pub(crate) mod session;

use std::sync::Arc;

use rustls::crypto::CryptoProvider;
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;
use rustls::{AlertDescription, ServerConfig};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio_rustls::server::TlsStream;
use tokio_rustls::{LazyConfigAcceptor, StartHandshake};

pub(crate) use authority::{Authority, AuthorityError};

/// The ALPN protocols offered to intercepted HTTP clients, preferred first.
const HTTP_ALPN: [&[u8]; 2] = [b"h2", b"http/1.1"];

/// What a handshake is for: HTTP (ALPN h2 and http/1.1) or a bare stream (SMTP STARTTLS).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Protocols {
    /// HTTP/2 or HTTP/1.1.
    Http,
    /// No application protocol negotiation.
    Bare,
}

/// How an interception handshake failed.
#[derive(Debug, thiserror::Error)]
pub(crate) enum HandshakeError {
    /// The client refused the certificate (an alert, or a close mid-handshake).
    #[error("the client refused the environment's certificate for {name} ({why})")]
    ClientRejected { name: String, why: String },
    /// Anything else: not TLS, a protocol error, no name to mint for, a timeout.
    #[error("the TLS handshake with the client failed: {0}")]
    Failed(String),
}

/// The environment CA and the server configurations built on it.
pub(crate) struct Interception {
    authority: Arc<Authority>,
    provider: Arc<CryptoProvider>,
    http: Arc<ServerConfig>,
    bare: Arc<ServerConfig>,
}

impl Interception {
    /// Build from a loaded authority.
    pub(crate) fn new(
        authority: Authority,
        provider: Arc<CryptoProvider>,
    ) -> Result<Self, AuthorityError> {
        let authority = Arc::new(authority);
        let http = server_config(&provider, &authority, None, Protocols::Http)?;
        let bare = server_config(&provider, &authority, None, Protocols::Bare)?;
        Ok(Self {
            authority,
            provider,
            http,
            bare,
        })
    }

    /// Read the ClientHello from `io` and complete the handshake. The leaf is minted for the
    /// hello's server name, or for `fallback` when it names none (a CONNECT to an address).
    pub(crate) async fn accept<IO>(
        &self,
        io: IO,
        fallback: &str,
        protocols: Protocols,
    ) -> Result<TlsStream<IO>, HandshakeError>
    where
        IO: AsyncRead + AsyncWrite + Unpin,
    {
        let start = LazyConfigAcceptor::new(rustls::server::Acceptor::default(), io)
            .await
            .map_err(|e| HandshakeError::Failed(e.to_string()))?;
        self.finish(start, fallback, protocols).await
    }

    /// Complete a handshake whose ClientHello was already read.
    pub(crate) async fn finish<IO>(
        &self,
        start: StartHandshake<IO>,
        fallback: &str,
        protocols: Protocols,
    ) -> Result<TlsStream<IO>, HandshakeError>
    where
        IO: AsyncRead + AsyncWrite + Unpin,
    {
        let hello = start.client_hello();
        let name = hello.server_name().unwrap_or(fallback).to_owned();
        let config = match (hello.server_name(), protocols) {
            (Some(_), Protocols::Http) => self.http.clone(),
            (Some(_), Protocols::Bare) => self.bare.clone(),
            (None, _) => server_config(&self.provider, &self.authority, Some(fallback), protocols)
                .map_err(|e| HandshakeError::Failed(e.to_string()))?,
        };
        start
            .into_stream(config)
            .await
            .map_err(|e| classify(&name, &e))
    }
}

/// Tell a client's refusal of the certificate from other handshake failures.
fn classify(name: &str, e: &std::io::Error) -> HandshakeError {
    let rejected = |why: String| HandshakeError::ClientRejected {
        name: name.to_owned(),
        why,
    };
    if let Some(rustls::Error::AlertReceived(alert)) = e
        .get_ref()
        .and_then(|inner| inner.downcast_ref::<rustls::Error>())
    {
        return match alert {
            AlertDescription::BadCertificate
            | AlertDescription::UnsupportedCertificate
            | AlertDescription::CertificateRevoked
            | AlertDescription::CertificateExpired
            | AlertDescription::CertificateUnknown
            | AlertDescription::UnknownCA
            | AlertDescription::AccessDenied => rejected(format!("alert {alert:?}")),
            other => HandshakeError::Failed(format!("the client sent alert {other:?}")),
        };
    }
    if e.kind() == std::io::ErrorKind::UnexpectedEof {
        return rejected("it closed the connection after seeing the certificate".into());
    }
    HandshakeError::Failed(e.to_string())
}

fn server_config(
    provider: &Arc<CryptoProvider>,
    authority: &Arc<Authority>,
    fallback: Option<&str>,
    protocols: Protocols,
) -> Result<Arc<ServerConfig>, AuthorityError> {
    let resolver = LeafResolver {
        authority: authority.clone(),
        fallback: fallback.map(Box::from),
    };
    let mut config = ServerConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|e| AuthorityError::Ca(e.to_string()))?
        .with_no_client_auth()
        .with_cert_resolver(Arc::new(resolver));
    if protocols == Protocols::Http {
        config.alpn_protocols = HTTP_ALPN.iter().map(|p| p.to_vec()).collect();
    }
    Ok(Arc::new(config))
}

/// Picks (mints) the leaf for the name the client asked for.
#[derive(Debug)]
struct LeafResolver {
    authority: Arc<Authority>,
    fallback: Option<Box<str>>,
}

impl ResolvesServerCert for LeafResolver {
    fn resolve(&self, hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        let name = hello.server_name().or(self.fallback.as_deref())?;
        self.authority
            .leaf(name)
            .inspect_err(|e| tracing::warn!(error = %e, "interception: no leaf"))
            .ok()
    }
}
