//! Interception test helpers: an environment CA made like the orchestrator makes it, its
//! `tls:` configuration section, and real rustls clients that trust only what they are given.

use std::net::SocketAddr;
use std::sync::Arc;

use base64::Engine;
use bytes::Bytes;
use http_body_util::Full;
use hyper::Request;
use hyper_util::rt::TokioIo;
use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, KeyPair, KeyUsagePurpose};
use rustls::pki_types::{CertificateDer, ServerName};
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;
use tokio_rustls::client::TlsStream;

use super::{Got, connect_tunnel};

/// An environment CA (ECDSA P-256), as the orchestrator generates one.
pub(crate) struct TestCa {
    pub cert_pem: String,
    pub key_pem: String,
    pub cert_der: CertificateDer<'static>,
}

impl TestCa {
    pub(crate) fn new() -> Self {
        let key = KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).unwrap();
        let mut params = CertificateParams::default();
        params
            .distinguished_name
            .push(DnType::CommonName, "af test-env environment CA");
        params.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
        params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
        let cert = params.self_signed(&key).unwrap();
        Self {
            cert_pem: cert.pem(),
            key_pem: key.serialize_pem(),
            cert_der: cert.der().clone(),
        }
    }

    /// The `tls:` section trusting `upstream_roots` for upstream certificates.
    pub(crate) fn tls_yaml(
        &self,
        leaf_cache: usize,
        upstream_roots: &[CertificateDer<'static>],
    ) -> String {
        let roots: String = upstream_roots.iter().map(|c| pem(c)).collect();
        format!(
            "tls:\n  ca_cert_pem: {}\n  ca_key_pem: {}\n  leaf_cache: {leaf_cache}\n  extra_upstream_roots_pem: {}\n",
            serde_json::to_string(&self.cert_pem).unwrap(),
            serde_json::to_string(&self.key_pem).unwrap(),
            serde_json::to_string(&roots).unwrap(),
        )
    }
}

/// A certificate as PEM.
pub(crate) fn pem(der: &CertificateDer<'_>) -> String {
    let b64 = base64::engine::general_purpose::STANDARD.encode(der.as_ref());
    let lines: Vec<&str> = b64
        .as_bytes()
        .chunks(64)
        .map(|c| std::str::from_utf8(c).unwrap())
        .collect();
    format!(
        "-----BEGIN CERTIFICATE-----\n{}\n-----END CERTIFICATE-----\n",
        lines.join("\n")
    )
}

/// A rustls client trusting exactly `roots`, offering `alpn`.
pub(crate) fn client(roots: &[&CertificateDer<'static>], alpn: &[&[u8]]) -> TlsConnector {
    let mut store = rustls::RootCertStore::empty();
    for root in roots {
        store.add((*root).clone()).unwrap();
    }
    let mut config = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_root_certificates(store)
    .with_no_client_auth();
    config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
    TlsConnector::from(Arc::new(config))
}

/// CONNECT through the proxy, then a TLS handshake for `name`.
pub(crate) async fn tls_via_connect(
    proxy: SocketAddr,
    authority: &str,
    name: &str,
    connector: &TlsConnector,
) -> std::io::Result<TlsStream<TcpStream>> {
    let (head, stream) = connect_tunnel(proxy, authority).await;
    assert!(
        head.starts_with("HTTP/1.1 200"),
        "CONNECT {authority}: {head}"
    );
    let name = ServerName::try_from(name.to_owned()).unwrap();
    connector.connect(name, stream).await
}

/// A TLS handshake straight to the transparent TLS listener for `name`.
pub(crate) async fn tls_direct(
    addr: SocketAddr,
    name: &str,
    connector: &TlsConnector,
) -> std::io::Result<TlsStream<TcpStream>> {
    let stream = TcpStream::connect(addr).await.unwrap();
    let name = ServerName::try_from(name.to_owned()).unwrap();
    connector.connect(name, stream).await
}

/// An HTTP/1.1 client over an opened TLS stream.
pub(crate) async fn h1(
    tls: TlsStream<TcpStream>,
) -> hyper::client::conn::http1::SendRequest<Full<Bytes>> {
    let (send, conn) = hyper::client::conn::http1::handshake(TokioIo::new(tls))
        .await
        .unwrap();
    tokio::spawn(conn);
    send
}

/// An HTTP/2 client over an opened TLS stream.
pub(crate) async fn h2(
    tls: TlsStream<TcpStream>,
) -> hyper::client::conn::http2::SendRequest<Full<Bytes>> {
    let (send, conn) = hyper::client::conn::http2::handshake(
        hyper_util::rt::TokioExecutor::new(),
        TokioIo::new(tls),
    )
    .await
    .unwrap();
    tokio::spawn(conn);
    send
}

/// Send `req` on an HTTP/1.1 connection and read the whole answer.
pub(crate) async fn send1(
    send: &mut hyper::client::conn::http1::SendRequest<Full<Bytes>>,
    req: Request<Full<Bytes>>,
) -> Got {
    send.ready().await.unwrap();
    let resp = send.send_request(req).await.unwrap();
    Got::read(resp).await
}

/// Send `req` on an HTTP/2 connection and read the whole answer.
pub(crate) async fn send2(
    send: &mut hyper::client::conn::http2::SendRequest<Full<Bytes>>,
    req: Request<Full<Bytes>>,
) -> Got {
    send.ready().await.unwrap();
    let resp = send.send_request(req).await.unwrap();
    Got::read(resp).await
}

/// A request with a body.
pub(crate) fn request(method: &str, host: &str, path: &str, body: &str) -> Request<Full<Bytes>> {
    Request::builder()
        .method(method)
        .uri(path)
        .header("host", host)
        .body(Full::new(Bytes::from(body.to_owned())))
        .unwrap()
}
