//! The local upstream every system is measured in front of.
//!
//! It runs as its own process (`af-benches upstream …`) so that its CPU time
//! is never charged to a system under test, and it is the same for every
//! system: plain HTTP with fixed small and 1 MiB bodies, the same over TLS
//! for the intercepted-HTTPS scenario, and a raw TCP bulk source for the
//! CONNECT scenario.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use tokio::io::AsyncWriteExt;
use tokio::net::TcpListener;
use tokio_rustls::TlsAcceptor;

use crate::error::{BenchError, Result};

/// Size of the small body.
pub(crate) const SMALL_BODY: usize = 128;
/// Size of the large body.
pub(crate) const LARGE_BODY: usize = 1 << 20;
/// The small body: `SMALL_BODY` letters `a`.
pub(crate) fn small_body() -> String {
    "a".repeat(SMALL_BODY)
}

/// Path that answers the small body.
pub(crate) const SMALL_PATH: &str = "/small";
/// Path that answers the 1 MiB body.
pub(crate) const LARGE_PATH: &str = "/1m";

/// Where the upstream listens.
#[derive(Debug, Clone, clap::Args)]
pub(crate) struct Ports {
    /// Plain HTTP port.
    #[arg(long)]
    pub http: u16,
    /// HTTPS port (self-signed certificate for 127.0.0.1).
    #[arg(long)]
    pub https: u16,
    /// TCP bulk source port: writes zeros until the peer goes away.
    #[arg(long)]
    pub bulk: u16,
    /// Where to write the HTTPS certificate (PEM) for clients to trust.
    #[arg(long)]
    pub cert_out: PathBuf,
}

/// Serves until killed.
pub(crate) async fn serve(ports: Ports) -> Result<()> {
    let small = Bytes::from(small_body());
    let large = Bytes::from(vec![b'b'; LARGE_BODY]);
    let http = bind(ports.http).await?;
    let https = bind(ports.https).await?;
    let bulk = bind(ports.bulk).await?;
    let acceptor = tls_acceptor(&ports.cert_out)?;

    let (s, l) = (small.clone(), large.clone());
    tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = http.accept().await else {
                continue;
            };
            let _ = stream.set_nodelay(true);
            let (s, l) = (s.clone(), l.clone());
            tokio::spawn(serve_http(TokioIo::new(stream), s, l));
        }
    });
    tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = https.accept().await else {
                continue;
            };
            let _ = stream.set_nodelay(true);
            let (acceptor, s, l) = (acceptor.clone(), small.clone(), large.clone());
            tokio::spawn(async move {
                if let Ok(tls) = acceptor.accept(stream).await {
                    serve_http(TokioIo::new(tls), s, l).await;
                }
            });
        }
    });
    let chunk = Bytes::from(vec![0u8; 256 * 1024]);
    loop {
        let Ok((mut stream, _)) = bulk.accept().await else {
            continue;
        };
        let chunk = chunk.clone();
        tokio::spawn(async move { while stream.write_all(&chunk).await.is_ok() {} });
    }
}

async fn bind(port: u16) -> Result<TcpListener> {
    let addr = SocketAddr::from(([127, 0, 0, 1], port));
    TcpListener::bind(addr)
        .await
        .map_err(|e| BenchError::io(format!("upstream bind {addr}"), e))
}

async fn serve_http<IO>(io: TokioIo<IO>, small: Bytes, large: Bytes)
where
    IO: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let service = service_fn(move |req: Request<Incoming>| {
        let body = match req.uri().path() {
            SMALL_PATH => Some(small.clone()),
            LARGE_PATH => Some(large.clone()),
            _ => None,
        };
        async move {
            let resp = match body {
                Some(b) => Response::new(Full::new(b)),
                None => {
                    let mut r = Response::new(Full::new(Bytes::from_static(b"not found\n")));
                    *r.status_mut() = StatusCode::NOT_FOUND;
                    r
                }
            };
            Ok::<_, Infallible>(resp)
        }
    });
    let _ = http1::Builder::new().serve_connection(io, service).await;
}

/// A TLS acceptor with a fresh self-signed certificate for 127.0.0.1,
/// written to `cert_out` for the clients.
fn tls_acceptor(cert_out: &std::path::Path) -> Result<TlsAcceptor> {
    let cert = rcgen::generate_simple_self_signed(vec!["127.0.0.1".into(), "localhost".into()])
        .map_err(|e| BenchError::Tls(e.to_string()))?;
    std::fs::write(cert_out, cert.cert.pem())
        .map_err(|e| BenchError::io(format!("write {}", cert_out.display()), e))?;
    let key = rustls::pki_types::PrivateKeyDer::Pkcs8(cert.signing_key.serialize_der().into());
    let config = rustls::ServerConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .map_err(|e| BenchError::Tls(e.to_string()))?
    .with_no_client_auth()
    .with_single_cert(vec![cert.cert.der().clone()], key)
    .map_err(|e| BenchError::Tls(e.to_string()))?;
    Ok(TlsAcceptor::from(Arc::new(config)))
}

/// The upstream process, started by the harness; killed when dropped.
#[derive(Debug)]
pub(crate) struct Upstream {
    /// Plain HTTP address.
    pub http: SocketAddr,
    /// HTTPS address.
    pub https: SocketAddr,
    /// TCP bulk source address.
    pub bulk: SocketAddr,
    /// The HTTPS certificate (PEM).
    pub cert: PathBuf,
    child: std::process::Child,
}

impl Upstream {
    /// Starts `af-benches upstream` (this same executable) and waits for it.
    pub(crate) fn spawn(dir: &std::path::Path) -> Result<Self> {
        let exe = std::env::current_exe().map_err(|e| BenchError::io("find own executable", e))?;
        let (http, https, bulk) = (
            crate::systems::free_port()?,
            crate::systems::free_port()?,
            crate::systems::free_port()?,
        );
        let cert = dir.join("upstream-cert.pem");
        let child = std::process::Command::new(&exe)
            .arg("upstream")
            .args(["--http", &http.to_string(), "--https", &https.to_string()])
            .args(["--bulk", &bulk.to_string()])
            .arg("--cert-out")
            .arg(&cert)
            .stdin(std::process::Stdio::null())
            .spawn()
            .map_err(|source| BenchError::Spawn {
                program: exe.display().to_string(),
                source,
            })?;
        let up = Self {
            http: ([127, 0, 0, 1], http).into(),
            https: ([127, 0, 0, 1], https).into(),
            bulk: ([127, 0, 0, 1], bulk).into(),
            cert,
            child,
        };
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while std::time::Instant::now() < deadline {
            let ready = up.cert.is_file()
                && std::net::TcpStream::connect(up.http).is_ok()
                && std::net::TcpStream::connect(up.bulk).is_ok();
            if ready {
                return Ok(up);
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        Err(BenchError::NotReady {
            system: "upstream".into(),
            port: http,
            secs: 10,
            detail: String::new(),
        })
    }
}

impl Drop for Upstream {
    fn drop(&mut self) {
        crate::systems::stop(&mut self.child);
    }
}
