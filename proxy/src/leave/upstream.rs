//! The pooled HTTPS client for requests forwarded out of an intercepted connection: every
//! connection is a guard dial, and the upstream's certificate is verified against the built-in
//! web roots (plus `tls.extra_upstream_roots_pem`: the roots `af` reads from `egress.upstream_roots`,
//! or a test's own).

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

/// The pooled HTTPS client.
pub(crate) type HttpsClient = Client<HttpsConnector<GuardedConnector>, CountingBody>;

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

/// Build the HTTPS client over the guard.
pub(crate) fn client(
    guard: Arc<Guard>,
    tls: ClientConfig,
    max_idle_per_host: usize,
) -> HttpsClient {
    let connector = HttpsConnectorBuilder::new()
        .with_tls_config(tls)
        .https_only()
        .enable_http1()
        .wrap_connector(GuardedConnector::new(guard));
    Client::builder(TokioExecutor::new())
        .timer(TokioTimer::new())
        .pool_timer(TokioTimer::new())
        .pool_idle_timeout(Duration::from_secs(90))
        .pool_max_idle_per_host(max_idle_per_host)
        .set_host(false)
        .build(connector)
}
