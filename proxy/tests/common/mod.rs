//! Shared test harness: a sidecar in-process (or a config file for the binary), the test
//! resolver mapping made-up names, fake upstreams on loopback, and small clients.
#![allow(dead_code, clippy::unwrap_used)]

use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

pub(crate) mod intercept;

use af_fixtures::test_resolver::TestResolver;
use af_fixtures::upstream::{Replies, Reply, Upstream};
use af_proxy::config;
use af_proxy::sidecar::{self, Running};
use bytes::Bytes;
use http_body_util::{BodyExt, Empty};
use hyper::client::conn::http1::SendRequest;
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// The admin token every test uses.
pub(crate) const TOKEN: &str = "test-token-0123456789abcdef";
/// Where fake upstreams listen: a loopback address other than 127.0.0.1, so that the guard
/// table can refuse 127.0.0.1 while the trusted network lets exactly this one through.
pub(crate) const UPSTREAM_IP: [u8; 4] = [127, 0, 0, 2];
/// The trusted upstream network matching [`UPSTREAM_IP`] and nothing else.
pub(crate) const TRUSTED: &str = "127.0.0.2/32";

/// A unique, self-removing temporary directory.
pub(crate) struct TempDir(pub PathBuf);

impl TempDir {
    pub(crate) fn new(tag: &str) -> Self {
        static N: AtomicU64 = AtomicU64::new(0);
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos();
        let dir = std::env::temp_dir().join(format!(
            "af-proxy-{tag}-{}-{nanos}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::create_dir_all(&dir).unwrap();
        Self(dir)
    }
    pub(crate) fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Start the test resolver with `names` all answering `ips`.
pub(crate) async fn resolver(table: Vec<(&str, Vec<IpAddr>)>) -> TestResolver {
    TestResolver::start(table).await.unwrap()
}

/// The loopback upstream address as an `IpAddr`.
pub(crate) fn upstream_ip() -> IpAddr {
    IpAddr::from(UPSTREAM_IP)
}

/// A port of [`UPSTREAM_IP`] nothing listens on: the system picked it free, and it is let go.
pub(crate) fn closed_upstream_port() -> u16 {
    let probe = std::net::TcpListener::bind((upstream_ip(), 0)).expect("a free port");
    probe.local_addr().expect("its address").port()
}

/// A plain-HTTP fake upstream on [`UPSTREAM_IP`].
pub(crate) async fn http_upstream(replies: Replies) -> Upstream {
    Upstream::http(SocketAddr::from((UPSTREAM_IP, 0)), replies)
        .await
        .unwrap()
}

/// A plain-HTTP fake upstream answering `200 hello`.
pub(crate) async fn hello_upstream() -> Upstream {
    http_upstream(Replies::new(Reply::ok("hello"))).await
}

/// A raw TCP upstream on [`UPSTREAM_IP`] that echoes every byte as it arrives and, once the
/// client has closed its side, sends `trailer` and closes. Returns its port.
pub(crate) async fn echo_upstream(trailer: Vec<u8>) -> u16 {
    let listener = TcpListener::bind((upstream_ip(), 0)).await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let trailer = std::sync::Arc::new(trailer);
    tokio::spawn(async move {
        while let Ok((mut s, _)) = listener.accept().await {
            let trailer = trailer.clone();
            tokio::spawn(async move {
                let (mut r, mut w) = s.split();
                if tokio::io::copy(&mut r, &mut w).await.is_ok() {
                    let _ = w.write_all(&trailer).await;
                }
            });
        }
    });
    port
}

/// The metric counting tunnels the kernel carried (splice(2)), for [`Admin::metric`].
pub(crate) const SPLICED: &str = "af_proxy_tunnels_total{copy=\"splice\"}";

/// How to build a sidecar for a test.
pub(crate) struct Setup {
    /// The `egress:` section, YAML, indented by two spaces.
    pub egress: String,
    /// Extra top-level YAML (e.g. `limits:`).
    pub extra: String,
    /// The resolver.
    pub resolver: SocketAddr,
    /// Transparent HTTP advertised port.
    pub http_port: u16,
    /// Transparent TLS upstream port.
    pub tls_port: u16,
    /// Trusted networks.
    pub trusted: Vec<String>,
    /// The body of `listeners.dns` (YAML indented by four spaces); DNS is off by default.
    pub dns: String,
    /// The body of `listeners.smtp` (YAML indented by four spaces); SMTP is off by default.
    pub smtp: String,
}

impl Setup {
    pub(crate) fn new(egress: &str, resolver: SocketAddr) -> Self {
        Self {
            egress: egress.to_owned(),
            extra: String::new(),
            resolver,
            http_port: 80,
            tls_port: 443,
            trusted: vec![TRUSTED.to_owned()],
            dns: "    listen: null".to_owned(),
            smtp: "    listen: []".to_owned(),
        }
    }

    /// The YAML config with every listener on the given addresses.
    pub(crate) fn yaml(&self, journal: &Path, listen: &Listen) -> String {
        let trusted: Vec<String> = self.trusted.iter().map(|t| format!("\"{t}\"")).collect();
        format!(
            "version: 1\nenv: test-env\nresolver: \"{resolver}\"\negress:\n{egress}\nadmin:\n  listen: \"{admin}\"\n  token: {TOKEN}\nlisteners:\n  proxy:\n    listen: \"{proxy}\"\n  transparent_http:\n    listen: \"{http}\"\n    advertised_port: {http_port}\n  transparent_tls:\n    listen: \"{tls}\"\n    upstream_port: {tls_port}\n  dns:\n{dns}\n  smtp:\n{smtp}\nguard:\n  trusted_networks: [{trusted}]\njournal:\n  dir: \"{journal}\"\n{extra}\n",
            resolver = self.resolver,
            egress = self.egress,
            admin = listen.admin,
            proxy = listen.proxy,
            http = listen.http,
            tls = listen.tls,
            http_port = self.http_port,
            tls_port = self.tls_port,
            trusted = trusted.join(", "),
            journal = journal.display(),
            extra = self.extra,
            dns = self.dns,
            smtp = self.smtp,
        )
    }
}

/// Listener addresses.
pub(crate) struct Listen {
    pub admin: SocketAddr,
    pub proxy: SocketAddr,
    pub http: SocketAddr,
    pub tls: SocketAddr,
}

impl Listen {
    /// Every listener on an ephemeral loopback port.
    pub(crate) fn ephemeral() -> Self {
        let any = SocketAddr::from(([127, 0, 0, 1], 0));
        Self {
            admin: any,
            proxy: any,
            http: any,
            tls: any,
        }
    }

    /// Four currently free loopback ports (for the binary, which cannot report its ports).
    pub(crate) fn free() -> Self {
        let pick = || {
            let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            l.local_addr().unwrap()
        };
        Self {
            admin: pick(),
            proxy: pick(),
            http: pick(),
            tls: pick(),
        }
    }
}

/// The real `af-proxy` binary on `config`, logging warnings to nowhere.
pub(crate) fn spawn_binary(config: &Path) -> Child {
    Command::new(env!("CARGO_BIN_EXE_af-proxy"))
        .arg("--config")
        .arg(config)
        .env("AF_PROXY_LOG", "warn")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap()
}

/// Wait until the binary's admin API answers `/healthz`.
pub(crate) async fn wait_healthy(admin: &Admin) {
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        if TcpStream::connect(admin.0).await.is_ok()
            && admin.get_with("/healthz", None).await.status == 200
        {
            return;
        }
        assert!(Instant::now() < deadline, "af-proxy did not become healthy");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// A sidecar running in this process.
pub(crate) struct Sidecar {
    pub running: Running,
    pub journal_dir: TempDir,
}

impl Sidecar {
    pub(crate) async fn start(setup: &Setup) -> Self {
        Self::start_in(setup, TempDir::new("journal"), &Listen::ephemeral()).await
    }

    /// Start with the listeners on `listen` (e.g. [`Listen::free`]), for a test whose rules
    /// name a listener's port before the sidecar starts.
    pub(crate) async fn start_at(setup: &Setup, listen: &Listen) -> Self {
        Self::start_in(setup, TempDir::new("journal"), listen).await
    }

    /// Stop this sidecar and start another on the same journal (a restart).
    pub(crate) async fn restart(self, setup: &Setup) -> Self {
        let Sidecar {
            running,
            journal_dir,
        } = self;
        running.shutdown().await;
        Self::start_in(setup, journal_dir, &Listen::ephemeral()).await
    }

    async fn start_in(setup: &Setup, journal_dir: TempDir, listen: &Listen) -> Self {
        let yaml = setup.yaml(journal_dir.path(), listen);
        let doc = config::parse(&yaml, false)
            .unwrap_or_else(|e| panic!("test config does not parse: {e}\n{yaml}"));
        let settings = config::check(doc).unwrap_or_else(|e| panic!("test config is refused: {e}"));
        let running = sidecar::start(settings).await.unwrap();
        Self {
            running,
            journal_dir,
        }
    }

    pub(crate) fn proxy(&self) -> SocketAddr {
        self.running.proxy.unwrap()
    }
    pub(crate) fn http(&self) -> SocketAddr {
        self.running.transparent_http.unwrap()
    }
    pub(crate) fn tls(&self) -> SocketAddr {
        self.running.transparent_tls.unwrap()
    }
    pub(crate) fn admin(&self) -> Admin {
        Admin(self.running.admin)
    }
    pub(crate) fn dns(&self) -> SocketAddr {
        self.running.dns.unwrap()
    }
}

/// An HTTP/1.1 client connection (keep-alive) to `addr`.
pub(crate) async fn connect(addr: SocketAddr) -> SendRequest<Empty<Bytes>> {
    let stream = TcpStream::connect(addr).await.unwrap();
    let (send, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .unwrap();
    tokio::spawn(conn);
    send
}

/// A response with its body read.
pub(crate) struct Got {
    pub status: u16,
    pub headers: http::HeaderMap,
    pub body: String,
}

impl Got {
    pub(crate) fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }

    /// Read a whole response.
    pub(crate) async fn read(resp: Response<hyper::body::Incoming>) -> Self {
        let status = resp.status().as_u16();
        let headers = resp.headers().clone();
        let body = resp.into_body().collect().await.unwrap().to_bytes();
        Got {
            status,
            headers,
            body: String::from_utf8_lossy(&body).into_owned(),
        }
    }
}

/// Send a request on `send` and read the whole answer.
pub(crate) async fn send(send: &mut SendRequest<Empty<Bytes>>, req: Request<Empty<Bytes>>) -> Got {
    send.ready().await.unwrap();
    Got::read(send.send_request(req).await.unwrap()).await
}

/// GET an absolute URL through the explicit proxy on a new connection.
pub(crate) async fn proxy_get(proxy: SocketAddr, url: &str) -> Got {
    let mut c = connect(proxy).await;
    let uri: http::Uri = url.parse().unwrap();
    let host = uri.authority().unwrap().as_str().to_owned();
    let req = Request::get(url)
        .header("host", host)
        .body(Empty::new())
        .unwrap();
    send(&mut c, req).await
}

/// Send raw bytes and read until the server closes or `timeout`; returns what was read.
pub(crate) async fn raw(addr: SocketAddr, bytes: &[u8], timeout: Duration) -> String {
    let mut s = TcpStream::connect(addr).await.unwrap();
    s.write_all(bytes).await.unwrap();
    let mut out = Vec::new();
    let _ = tokio::time::timeout(timeout, s.read_to_end(&mut out)).await;
    String::from_utf8_lossy(&out).into_owned()
}

/// Open a CONNECT tunnel; returns the response head and the stream.
pub(crate) async fn connect_tunnel(proxy: SocketAddr, authority: &str) -> (String, TcpStream) {
    connect_tunnel_with(proxy, authority, b"").await
}

/// Open a CONNECT tunnel with `early` sent in the same write as the head, before any answer.
pub(crate) async fn connect_tunnel_with(
    proxy: SocketAddr,
    authority: &str,
    early: &[u8],
) -> (String, TcpStream) {
    let mut s = TcpStream::connect(proxy).await.unwrap();
    let mut req = format!("CONNECT {authority} HTTP/1.1\r\nHost: {authority}\r\n\r\n").into_bytes();
    req.extend_from_slice(early);
    s.write_all(&req).await.unwrap();
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        if s.read(&mut byte).await.unwrap() == 0 {
            break;
        }
        head.push(byte[0]);
    }
    (String::from_utf8_lossy(&head).into_owned(), s)
}

/// The admin API.
pub(crate) struct Admin(pub SocketAddr);

impl Admin {
    /// GET `path` with `token` (None: no Authorization header).
    pub(crate) async fn get_with(&self, path: &str, token: Option<&str>) -> Got {
        let mut c = connect(self.0).await;
        let mut req = Request::get(path).header("host", "admin");
        if let Some(t) = token {
            req = req.header("authorization", format!("Bearer {t}"));
        }
        send(&mut c, req.body(Empty::new()).unwrap()).await
    }

    /// POST a JSON document to `path` with the right token.
    pub(crate) async fn post_json(&self, path: &str, body: &Value) -> Got {
        self.post_with(path, body, Some(TOKEN)).await
    }

    /// POST a JSON document to `path` with `token` (None: no Authorization header).
    pub(crate) async fn post_with(&self, path: &str, body: &Value, token: Option<&str>) -> Got {
        let stream = TcpStream::connect(self.0).await.unwrap();
        let (mut send, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
            .await
            .unwrap();
        tokio::spawn(conn);
        let mut req = Request::post(path)
            .header("host", "admin")
            .header("content-type", "application/json");
        if let Some(t) = token {
            req = req.header("authorization", format!("Bearer {t}"));
        }
        let req = req
            .body(http_body_util::Full::new(Bytes::from(body.to_string())))
            .unwrap();
        Got::read(send.send_request(req).await.unwrap()).await
    }

    /// GET `path` with the right token, as JSON.
    pub(crate) async fn json(&self, path: &str) -> Value {
        let got = self.get_with(path, Some(TOKEN)).await;
        assert_eq!(got.status, 200, "{path}: {}", got.body);
        serde_json::from_str(&got.body).unwrap()
    }

    /// Records matching `query` (e.g. `blocked=true`).
    pub(crate) async fn records(&self, query: &str) -> Vec<Value> {
        let v = self
            .json(&format!("/v1/decisions?limit=1000&{query}"))
            .await;
        v["records"].as_array().unwrap().clone()
    }

    /// Wait until at least `n` records match `query`.
    pub(crate) async fn wait_records(&self, query: &str, n: usize) -> Vec<Value> {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let recs = self.records(query).await;
            if recs.len() >= n || Instant::now() > deadline {
                assert!(
                    recs.len() >= n,
                    "wanted {n} records for {query:?}, got {recs:#?}"
                );
                return recs;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Wait for the record of `host` that `wanted` picks (e.g. a path's, where a connection's
    /// own record may come first), `what` naming it in the failure.
    pub(crate) async fn wait_record(
        &self,
        host: &str,
        what: &str,
        wanted: impl Fn(&Value) -> bool,
    ) -> Value {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let records = self.records(&format!("host={host}")).await;
            if let Some(record) = records.iter().find(|r| wanted(r)) {
                return record.clone();
            }
            assert!(
                Instant::now() < deadline,
                "no record of {host} {what} within 10 s: {records:#?}"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Wait for the record of the request to `host` at `path`.
    pub(crate) async fn wait_path_record(&self, host: &str, path: &str) -> Value {
        self.wait_record(host, path, |r| r["path"] == path).await
    }

    /// Wait until at least `n` inbox messages match `query` (e.g. `to=ada%40example.test`).
    pub(crate) async fn wait_inbox(&self, query: &str, n: usize) -> Vec<Value> {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let v = self.json(&format!("/v1/inbox?{query}")).await;
            let msgs = v["records"].as_array().unwrap().clone();
            if msgs.len() >= n || Instant::now() > deadline {
                assert!(msgs.len() >= n, "wanted {n} messages for {query:?}: {v:#}");
                return msgs;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// A counter from `/metrics`.
    pub(crate) async fn metric(&self, name: &str) -> u64 {
        let got = self.get_with("/metrics", Some(TOKEN)).await;
        got.body
            .lines()
            .find_map(|l| l.strip_prefix(name).and_then(|r| r.strip_prefix(' ')))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(0)
    }
}

/// `fixtures/openapi/shop.yaml` as JSON, for `modes.openapi`.
pub(crate) fn shop_openapi() -> Value {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../fixtures/openapi/shop.yaml");
    serde_saphyr::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// `yaml` (rules) with every `{port}` replaced by `port`, where the test's upstream listens:
/// a rule naming no port covers 80 and 443 only (a block covers every port), so a rule for an
/// upstream on another port names it, as a user would write `host: api.example.com:8443`.
pub(crate) fn on_port(yaml: &str, port: u16) -> String {
    yaml.replace("{port}", &port.to_string())
}

/// [`egress`] for an upstream on `port`: each `{port}` in a rule's host names it
/// (`("api.allowed.test:{port}", "allow")`), see [`on_port`].
pub(crate) fn egress_on(port: u16, rules: &[(&str, &str)]) -> String {
    on_port(&egress(rules), port)
}

/// Egress YAML with `rules` (each `(host, mode)`) and default block.
pub(crate) fn egress(rules: &[(&str, &str)]) -> String {
    if rules.is_empty() {
        return "  default: block\n  rules: []\n".into();
    }
    let mut s = String::from("  default: block\n  allow_ipv6: true\n  rules:\n");
    for (host, mode) in rules {
        s.push_str(&format!("    - host: \"{host}\"\n      mode: {mode}\n"));
    }
    s
}
