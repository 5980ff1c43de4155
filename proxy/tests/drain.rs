//! Stopping the real `af-proxy` binary: on SIGTERM (or SIGINT) it stops accepting on every
//! listener, lets open requests finish, closes tunnels at `limits.drain_timeout_ms` with their
//! records written, flushes the journal and exits 0.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::net::SocketAddr;
use std::path::Path;
use std::process::{Child, Command, ExitStatus};
use std::time::{Duration, Instant};

use common::*;
use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::oneshot;

/// Generous bound for anything the test waits on: only for a sidecar that never gets there.
const PATIENCE: Duration = Duration::from_secs(30);

/// A running binary on its own journal, with every listener on a free loopback port.
struct Binary {
    child: Child,
    listen: Listen,
    dns: Option<SocketAddr>,
    journal: std::path::PathBuf,
    _dir: TempDir,
}

impl Binary {
    /// Start with `setup`; `dns_resolver` turns the DNS listener on (on a free port).
    async fn start(mut setup: Setup, dns_resolver: Option<SocketAddr>) -> Self {
        let dir = TempDir::new("drain");
        let listen = Listen::free();
        let dns = dns_resolver.map(|inside| {
            let addr = std::net::TcpListener::bind("127.0.0.1:0")
                .unwrap()
                .local_addr()
                .unwrap();
            setup.dns = format!(
                "    listen: \"{addr}\"\n    answer_v4: \"203.0.113.53\"\n    inside_resolver: \"{inside}\"\n    udp_sockets: 1"
            );
            setup.extra.push_str("inside:\n  subnets: [\"198.51.100.0/24\"]\n");
            addr
        });
        let journal = dir.path().join("journal");
        let config = dir.path().join("sidecar.yaml");
        std::fs::write(&config, setup.yaml(&journal, &listen)).unwrap();
        let child = spawn_binary(&config);
        wait_healthy(&Admin(listen.admin)).await;
        Self {
            child,
            listen,
            dns,
            journal,
            _dir: dir,
        }
    }

    fn signal(&self, name: &str) {
        let sent = Command::new("kill")
            .args(["-s", name, &self.child.id().to_string()])
            .status()
            .unwrap();
        assert!(sent.success(), "kill -s {name} failed");
    }

    /// Wait for the process to end on its own.
    async fn exited(&mut self) -> ExitStatus {
        let deadline = Instant::now() + PATIENCE;
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status;
            }
            assert!(Instant::now() < deadline, "af-proxy did not exit");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// The data listeners' addresses (DNS over TCP included).
    fn data_listeners(&self) -> Vec<SocketAddr> {
        let l = &self.listen;
        [l.proxy, l.http, l.tls]
            .into_iter()
            .chain(self.dns)
            .collect()
    }
}

impl Drop for Binary {
    fn drop(&mut self) {
        if self.child.try_wait().ok().flatten().is_none() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// Every decision record in the journal's segment files, in order.
fn decisions_on_disk(journal: &Path) -> Vec<Value> {
    let mut segments: Vec<_> = std::fs::read_dir(journal)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "ndjson"))
        .collect();
    segments.sort();
    segments
        .iter()
        .flat_map(|p| {
            std::fs::read_to_string(p)
                .unwrap()
                .lines()
                .map(|l| serde_json::from_str::<Value>(l).unwrap())
                .collect::<Vec<_>>()
        })
        .filter(|r| r["kind"] == "decision")
        .collect()
}

/// Wait until connecting to `addr` is refused: nothing listens there any more.
async fn refused(addr: SocketAddr) {
    let deadline = Instant::now() + PATIENCE;
    while TcpStream::connect(addr).await.is_ok() {
        assert!(
            Instant::now() < deadline,
            "{addr} still accepts connections"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Read from `s` until `want` bytes have arrived or it closes.
async fn read_n(s: &mut TcpStream, want: usize) -> Vec<u8> {
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    while got.len() < want {
        let n = tokio::time::timeout(PATIENCE, s.read(&mut buf))
            .await
            .expect("the data arrives")
            .unwrap();
        if n == 0 {
            break;
        }
        got.extend_from_slice(&buf[..n]);
    }
    got
}

/// An upstream that answers one request with its head and the first part of the body, and
/// the rest only once `release` is sent.
async fn slow_upstream(first: &'static [u8], rest: &'static [u8]) -> (u16, oneshot::Sender<()>) {
    let listener = TcpListener::bind((upstream_ip(), 0)).await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let (release, released) = oneshot::channel::<()>();
    tokio::spawn(async move {
        let (mut s, _) = listener.accept().await.unwrap();
        let mut head = Vec::new();
        let mut buf = [0u8; 1024];
        while !head.windows(4).any(|w| w == b"\r\n\r\n") {
            let n = s.read(&mut buf).await.unwrap();
            assert!(n > 0, "the request head arrives whole");
            head.extend_from_slice(&buf[..n]);
        }
        let len = first.len() + rest.len();
        s.write_all(format!("HTTP/1.1 200 OK\r\ncontent-length: {len}\r\n\r\n").as_bytes())
            .await
            .unwrap();
        s.write_all(first).await.unwrap();
        let _ = released.await;
        s.write_all(rest).await.unwrap();
        let _ = s.read(&mut buf).await;
    });
    (port, release)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_lets_a_slow_response_finish_refuses_new_connections_and_journals_it() {
    const FIRST: &[u8] = b"first half of the body, ";
    const REST: &[u8] = b"and the rest after SIGTERM";
    let (port, release) = slow_upstream(FIRST, REST).await;
    let dns = resolver(vec![("slow.test", vec![upstream_ip()])]).await;
    let mut setup = Setup::new(&egress_on(port, &[("slow.test:{port}", "allow")]), dns.addr);
    // Far longer than the test: the response must finish because it is let, not cut.
    setup.extra = "limits:\n  drain_timeout_ms: 600000\n".into();
    let mut sidecar = Binary::start(setup, Some(dns.addr)).await;

    // Positive control: every data listener accepts before the signal.
    for addr in sidecar.data_listeners() {
        TcpStream::connect(addr).await.unwrap();
    }
    let mut client = TcpStream::connect(sidecar.listen.proxy).await.unwrap();
    client
        .write_all(
            format!("GET http://slow.test:{port}/slow HTTP/1.1\r\nHost: slow.test:{port}\r\n\r\n")
                .as_bytes(),
        )
        .await
        .unwrap();
    let mut got = Vec::new();
    while !got.ends_with(FIRST) {
        got.extend(read_n(&mut client, 1).await);
    }

    sidecar.signal("TERM");
    for addr in sidecar.data_listeners() {
        refused(addr).await;
    }
    // Still draining, not gone: the admin API answers while the response is open.
    let admin = Admin(sidecar.listen.admin);
    assert_eq!(admin.get_with("/healthz", None).await.status, 200);

    release.send(()).unwrap();
    let rest = read_n(&mut client, REST.len()).await;
    assert_eq!(rest, REST, "the client gets the whole body");
    let text = String::from_utf8_lossy(&got);
    assert!(text.starts_with("HTTP/1.1 200"), "{text}");
    let mut after = [0u8; 1];
    assert_eq!(
        tokio::time::timeout(PATIENCE, client.read(&mut after))
            .await
            .unwrap()
            .unwrap(),
        0,
        "the connection closes after the response instead of staying alive"
    );

    let status = sidecar.exited().await;
    assert_eq!(status.code(), Some(0), "{status}");
    let records = decisions_on_disk(&sidecar.journal);
    let slow: Vec<&Value> = records.iter().filter(|r| r["path"] == "/slow").collect();
    assert_eq!(slow.len(), 1, "{records:#?}");
    assert_eq!(slow[0]["status"], 200);
    assert_eq!(slow[0]["allowed"], true);
    assert_eq!(slow[0]["reason"], "rule");
    assert_eq!(slow[0]["bytes_down"], (FIRST.len() + REST.len()) as u64);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tunnel_open_at_sigterm_is_closed_at_the_deadline_and_journaled() {
    let port = echo_upstream(Vec::new()).await;
    let dns = resolver(vec![("tunnel.test", vec![upstream_ip()])]).await;
    let mut setup = Setup::new(
        &egress_on(port, &[("tunnel.test:{port}", "allow")]),
        dns.addr,
    );
    setup.extra = "limits:\n  drain_timeout_ms: 300\n".into();
    let mut sidecar = Binary::start(setup, None).await;

    let (head, mut tunnel) =
        connect_tunnel(sidecar.listen.proxy, &format!("tunnel.test:{port}")).await;
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    tunnel.write_all(b"ping").await.unwrap();
    assert_eq!(read_n(&mut tunnel, 4).await, b"ping", "the tunnel is open");
    #[cfg(target_os = "linux")]
    assert_eq!(
        Admin(sidecar.listen.admin).metric(SPLICED).await,
        1,
        "the kernel carries the tunnel being cut"
    );

    sidecar.signal("TERM");
    let mut rest = Vec::new();
    let closed = tokio::time::timeout(PATIENCE, tunnel.read_to_end(&mut rest)).await;
    assert!(closed.is_ok(), "the sidecar closed the tunnel");
    assert!(rest.is_empty());

    let status = sidecar.exited().await;
    assert_eq!(status.code(), Some(0), "{status}");
    let records = decisions_on_disk(&sidecar.journal);
    let tunnels: Vec<&Value> = records
        .iter()
        .filter(|r| r["method"] == "CONNECT" && r["host"] == "tunnel.test")
        .collect();
    assert_eq!(tunnels.len(), 1, "{records:#?}");
    let record = tunnels[0];
    assert_eq!(record["reason"], "shutdown", "{record}");
    assert_eq!(record["status"], 200);
    assert_eq!(record["allowed"], true);
    assert_eq!(record["bytes_up"], 4);
    assert_eq!(record["bytes_down"], 4);
    assert!(
        record["error"].as_str().unwrap().contains("drain deadline"),
        "{record}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigint_closes_idle_keep_alive_connections_at_once_and_exits_0() {
    let dns = resolver(vec![("api.blocked.test", vec![upstream_ip()])]).await;
    let mut setup = Setup::new(&egress(&[("api.blocked.test", "block")]), dns.addr);
    // Far longer than the test: an idle connection must not hold the drain until then.
    setup.extra = "limits:\n  drain_timeout_ms: 600000\n".into();
    let mut sidecar = Binary::start(setup, None).await;

    let mut client = TcpStream::connect(sidecar.listen.proxy).await.unwrap();
    let request = "GET http://api.blocked.test/idle HTTP/1.1\r\nHost: api.blocked.test\r\n\r\n";
    client.write_all(request.as_bytes()).await.unwrap();
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    // The refusal arrives and the connection stays open for the next request.
    while !String::from_utf8_lossy(&got).contains("AF-NET-010") {
        let n = client.read(&mut buf).await.unwrap();
        assert!(n > 0, "closed before the answer");
        got.extend_from_slice(&buf[..n]);
    }

    sidecar.signal("INT");
    let mut rest = Vec::new();
    let closed = tokio::time::timeout(PATIENCE, client.read_to_end(&mut rest)).await;
    assert!(closed.is_ok(), "the idle connection was closed");
    let status = sidecar.exited().await;
    assert_eq!(status.code(), Some(0), "{status}");
    let records = decisions_on_disk(&sidecar.journal);
    assert!(
        records
            .iter()
            .any(|r| r["path"] == "/idle" && r["code"] == "AF-NET-010"),
        "{records:#?}"
    );
}
