//! A real af-proxy process on loopback, configured with a `sidecar-api` document this test
//! writes, and requests sent to it as a service would send them (through its explicit proxy).

use std::net::{Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use af_fixtures::cargo;
use af_orchestrator::admin;
use af_policy::egress::EgressSpec;
use af_sidecar_api::config::{Admin, SidecarConfig};
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::Request;
use hyper_util::rt::TokioIo;
use tokio::net::TcpSocket;

use super::WAIT;

/// The admin token of the test's sidecar.
pub(crate) const TOKEN: &str = "ui-test-token-0123456789abcdef";

/// The static af-proxy the images are made of (the Docker and cluster tests build it too, so
/// one build serves every test).
fn binary() -> PathBuf {
    cargo::static_binaries()
        .unwrap_or_else(|e| panic!("the static binaries: {e}"))
        .join("af-proxy")
}

/// A free loopback address (for a process that cannot report the ports it took).
fn free() -> SocketAddr {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
}

/// The running sidecar: its process (killed when dropped), its explicit proxy and admin API.
pub(crate) struct Sidecar {
    child: Child,
    /// The explicit proxy listener.
    pub proxy: SocketAddr,
    /// The admin API.
    pub admin: SocketAddr,
}

impl Sidecar {
    /// Start af-proxy with `egress`, its journal and document in `dir`; wait until healthy.
    pub(crate) async fn start(egress: &EgressSpec, dir: &Path) -> Sidecar {
        let (proxy, admin_addr) = (free(), free());
        // Nothing is dialled (every rule answers in the sidecar or refuses), so the resolver
        // is a loopback port nothing serves.
        let mut doc = SidecarConfig::new(
            "ui-test".to_owned(),
            egress.clone(),
            "127.0.0.1:9".to_owned(),
            Admin {
                listen: admin_addr,
                token: TOKEN.to_owned(),
            },
        );
        doc.listeners.proxy.listen = Some(proxy);
        doc.listeners.transparent_http.listen = None;
        doc.listeners.transparent_tls.listen = None;
        doc.listeners.dns.listen = None;
        doc.listeners.smtp.listen = Vec::new();
        doc.journal.dir = dir.join("journal");
        let path = dir.join("sidecar.json");
        std::fs::write(
            &path,
            serde_json::to_vec(&doc).expect("the document encodes"),
        )
        .expect("the document is written");
        let child = Command::new(binary())
            .arg("--config")
            .arg(&path)
            .env("AF_PROXY_LOG", "warn")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("af-proxy starts");
        let sidecar = Sidecar {
            child,
            proxy,
            admin: admin_addr,
        };
        let deadline = Instant::now() + WAIT;
        while admin::healthz(admin_addr).await.is_err() {
            assert!(Instant::now() < deadline, "af-proxy did not become healthy");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        sidecar
    }

    /// Send `method url` (absolute, plain HTTP) with `body` through the explicit proxy, as a
    /// service would; the status it got.
    pub(crate) async fn send(&self, method: &str, url: &str, body: Option<&str>) -> u16 {
        self.send_from(Ipv4Addr::LOCALHOST, method, url, body).await
    }

    /// [`Sidecar::send`] from the loopback address `from` (any of 127.0.0.0/8), as a service
    /// holding that address would.
    pub(crate) async fn send_from(
        &self,
        from: Ipv4Addr,
        method: &str,
        url: &str,
        body: Option<&str>,
    ) -> u16 {
        let uri: hyper::Uri = url.parse().expect("an absolute URL");
        let socket = TcpSocket::new_v4().expect("a socket");
        socket
            .bind(SocketAddr::from((from, 0)))
            .expect("a loopback address to send from");
        let stream = socket.connect(self.proxy).await.expect("the proxy");
        let (mut send, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
            .await
            .expect("HTTP/1.1");
        tokio::spawn(conn);
        let mut req = Request::builder()
            .method(method)
            .header(
                "host",
                uri.authority().map(|a| a.as_str()).unwrap_or_default(),
            )
            .uri(uri);
        if body.is_some() {
            req = req.header("content-type", "application/json");
        }
        let req = req
            .body(Full::new(Bytes::from(body.unwrap_or_default().to_owned())))
            .expect("a request");
        let resp = send.send_request(req).await.expect("an answer");
        let status = resp.status().as_u16();
        let _ = resp.into_body().collect().await;
        status
    }
}

impl Drop for Sidecar {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
