//! The pooled HTTPS clients for requests forwarded out of an intercepted connection: every
//! connection is a guard dial, and the upstream's certificate is verified against the built-in
//! web roots (plus `tls.extra_upstream_roots_pem`: the roots `af` reads from `egress.upstream_roots`,
//! or a test's own).
//!
//! ALPN offers the upstream HTTP/2 and HTTP/1.1: an upstream that picks HTTP/2 carries every
//! stream on one pooled connection (its [`first_dial`] made once), gRPC with its trailers
//! among them. A request switching protocols (a WebSocket) needs HTTP/1.1's `Upgrade`, so it
//! leaves through a client that offers HTTP/1.1 alone.

mod first_dial;

use std::sync::Arc;
use std::time::Duration;

use hyper_rustls::{HttpsConnector, HttpsConnectorBuilder};
use hyper_util::client::legacy::Client;
use hyper_util::rt::{TokioExecutor, TokioTimer};
use rustls::crypto::CryptoProvider;
use rustls::{ClientConfig, RootCertStore};
use rustls_pki_types::CertificateDer;
use rustls_pki_types::pem::PemObject;

use crate::leave::forward::client::CountingBody;
use crate::leave::forward::connector::GuardedConnector;
use crate::leave::guard::Guard;
pub(crate) use first_dial::FirstDial;

/// A pooled HTTPS client.
pub(crate) type HttpsClient = Client<HttpsConnector<GuardedConnector>, CountingBody>;

/// How many upstreams the first-dial gate remembers.
const FIRST_DIAL_MEMORY: usize = 4096;
/// How long a pooled connection stays open unused.
const POOL_IDLE: Duration = Duration::from_secs(90);

/// The HTTPS clients intercepted requests leave through.
pub(crate) struct HttpsClients {
    /// HTTP/2 or HTTP/1.1, as the upstream picks.
    pub any: HttpsClient,
    /// HTTP/1.1 alone, for a request switching protocols.
    pub http1: HttpsClient,
    /// The gate before `any`'s first connection to each upstream.
    pub first_dial: Arc<FirstDial>,
}

impl HttpsClients {
    /// Both clients over `guard`; a request waits at most `dial_timeout` for another's first
    /// connection to its upstream.
    pub(crate) fn new(
        guard: Arc<Guard>,
        tls: ClientConfig,
        max_idle_per_host: usize,
        dial_timeout: Duration,
    ) -> Self {
        let builder = || {
            HttpsConnectorBuilder::new()
                .with_tls_config(tls.clone())
                .https_only()
        };
        Self {
            any: pooled(
                builder()
                    .enable_all_versions()
                    .wrap_connector(GuardedConnector::new(guard.clone())),
                max_idle_per_host,
            ),
            http1: pooled(
                builder()
                    .enable_http1()
                    .wrap_connector(GuardedConnector::new(guard)),
                max_idle_per_host,
            ),
            // Trusted for half the pool's idle time: a connection unused that long may be
            // about to close.
            first_dial: FirstDial::new(FIRST_DIAL_MEMORY, dial_timeout, POOL_IDLE / 2),
        }
    }
}

/// Why the upstream trust store could not be built.
#[derive(Debug, thiserror::Error)]
#[error("tls.extra_upstream_roots_pem is unusable: {0}")]
pub(crate) struct RootsError(String);

/// The TLS client settings for every connection the sidecar opens to a real upstream: the
/// built-in web roots (the image has no system store) plus `extra_roots_pem`.
pub(crate) fn upstream_tls(
    provider: Arc<CryptoProvider>,
    extra_roots_pem: Option<&str>,
) -> Result<ClientConfig, RootsError> {
    let mut roots = RootCertStore {
        roots: webpki_roots::TLS_SERVER_ROOTS.to_vec(),
    };
    if let Some(pem) = extra_roots_pem {
        for cert in CertificateDer::pem_slice_iter(pem.as_bytes()) {
            let cert = cert.map_err(|e| RootsError(e.to_string()))?;
            roots.add(cert).map_err(|e| RootsError(e.to_string()))?;
        }
    }
    Ok(ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| RootsError(e.to_string()))?
        .with_root_certificates(roots)
        .with_no_client_auth())
}

/// A pooled client over `connector`.
fn pooled(connector: HttpsConnector<GuardedConnector>, max_idle_per_host: usize) -> HttpsClient {
    Client::builder(TokioExecutor::new())
        .timer(TokioTimer::new())
        .pool_timer(TokioTimer::new())
        .pool_idle_timeout(POOL_IDLE)
        .pool_max_idle_per_host(max_idle_per_host)
        .set_host(false)
        .build(connector)
}
