//! HTTPS through an intercepting proxy: CONNECT, TLS to the proxy's minted
//! certificate, keep-alive GETs. Closed loop over a fixed set of
//! connections, latencies in an HDR histogram.

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use hdrhistogram::Histogram;
use http_body_util::{BodyExt, Empty};
use hyper_util::rt::TokioIo;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName};
use tokio_rustls::TlsConnector;

use super::LoadResult;
use crate::error::{BenchError, Result};

/// A TLS client that trusts only the PEM certificate(s) in `ca`.
pub(crate) fn connector(ca: &Path) -> Result<TlsConnector> {
    let pem = std::fs::read(ca).map_err(|e| BenchError::io(format!("read {}", ca.display()), e))?;
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(&pem) {
        let cert = cert.map_err(|e| BenchError::Tls(format!("{}: {e}", ca.display())))?;
        roots
            .add(cert)
            .map_err(|e| BenchError::Tls(e.to_string()))?;
    }
    let config = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .map_err(|e| BenchError::Tls(e.to_string()))?
    .with_root_certificates(roots)
    .with_no_client_auth();
    Ok(TlsConnector::from(Arc::new(config)))
}

/// Runs `connections` keep-alive HTTPS clients for `duration`.
pub(crate) async fn run(
    proxy: Option<SocketAddr>,
    upstream: SocketAddr,
    tls: TlsConnector,
    connections: usize,
    duration: Duration,
) -> Result<LoadResult> {
    let deadline = Instant::now() + duration;
    let start = Instant::now();
    let mut tasks = Vec::with_capacity(connections);
    for _ in 0..connections {
        let tls = tls.clone();
        tasks.push(tokio::spawn(async move {
            client(proxy, upstream, tls, deadline).await
        }));
    }
    let mut hist = super::oneshot::histogram()?;
    let mut result = LoadResult::default();
    let mut first_error = None;
    for t in tasks {
        match t
            .await
            .map_err(|e| BenchError::Protocol(format!("https task: {e}")))?
        {
            Ok((h, bytes)) => {
                hist.add(&h)
                    .map_err(|e| BenchError::Protocol(e.to_string()))?;
                result.bytes += bytes;
            }
            Err(e) => {
                result.errors += 1;
                first_error.get_or_insert(e);
            }
        }
    }
    if hist.is_empty() {
        let why = first_error.map_or_else(String::new, |e| format!(": {e}"));
        return Err(BenchError::Protocol(format!(
            "no HTTPS request completed{why}"
        )));
    }
    result.secs = start.elapsed().as_secs_f64();
    result.ops = hist.len();
    result.p50_us = Some(hist.value_at_quantile(0.5) as f64);
    result.p99_us = Some(hist.value_at_quantile(0.99) as f64);
    result.p999_us = Some(hist.value_at_quantile(0.999) as f64);
    result.mean_us = Some(hist.mean());
    Ok(result)
}

async fn client(
    proxy: Option<SocketAddr>,
    upstream: SocketAddr,
    tls: TlsConnector,
    deadline: Instant,
) -> Result<(Histogram<u64>, u64)> {
    let (tcp, early) = super::tunnel::open(proxy, upstream).await?;
    if !early.is_empty() {
        return Err(BenchError::Protocol(
            "bytes before the TLS handshake".into(),
        ));
    }
    let name = ServerName::IpAddress(upstream.ip().into());
    let stream = tls
        .connect(name, tcp)
        .await
        .map_err(|e| BenchError::Tls(format!("handshake: {e}")))?;
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .map_err(|e| BenchError::Protocol(format!("http handshake: {e}")))?;
    tokio::spawn(conn);
    let uri = format!("https://{upstream}{}", crate::upstream::SMALL_PATH);
    let mut hist = super::oneshot::histogram()?;
    let mut bytes = 0u64;
    while Instant::now() < deadline {
        let req = hyper::Request::get(uri.as_str())
            .header(hyper::header::HOST, upstream.to_string())
            .body(Empty::<Bytes>::new())
            .map_err(|e| BenchError::Protocol(e.to_string()))?;
        let t0 = Instant::now();
        let resp = sender
            .send_request(req)
            .await
            .map_err(|e| BenchError::Protocol(format!("https request: {e}")))?;
        if !resp.status().is_success() {
            return Err(BenchError::Protocol(format!(
                "https status {}",
                resp.status()
            )));
        }
        let body = resp
            .into_body()
            .collect()
            .await
            .map_err(|e| BenchError::Protocol(format!("https body: {e}")))?;
        bytes += body.to_bytes().len() as u64;
        hist.saturating_record(t0.elapsed().as_micros() as u64);
    }
    Ok((hist, bytes))
}
