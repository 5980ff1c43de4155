//! The test's own "internet" for the containment probe: addresses from documentation and
//! link-local ranges put on this machine's loopback (the kernel here has no dummy interfaces),
//! each with a listener the test runs, so a route that gets out is seen arriving. A pod of the
//! local test cluster reaches them through its bridge's gateway, which is this machine. Every
//! probe target points here; nothing is ever aimed at a real address.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::process::Command;
use std::sync::{Arc, Mutex};

use af_fixtures::test_resolver::TestResolver;
use tokio::net::TcpListener;

/// The name the probe's DNS routes ask for.
pub(crate) const PROBE_NAME: &str = "probe.test";

/// One TCP host: its address and every peer that connected.
struct Listener {
    addr: SocketAddr,
    peers: Arc<Mutex<Vec<SocketAddr>>>,
    task: tokio::task::JoinHandle<()>,
}

impl Listener {
    async fn start(ip: IpAddr) -> Listener {
        let listener = TcpListener::bind((ip, 0))
            .await
            .unwrap_or_else(|e| panic!("listen on {ip}: {e}"));
        let addr = listener.local_addr().unwrap_or_else(|e| panic!("{e}"));
        let peers = Arc::new(Mutex::new(Vec::new()));
        let seen = peers.clone();
        let task = tokio::spawn(async move {
            while let Ok((_, peer)) = listener.accept().await {
                seen.lock().unwrap_or_else(|e| e.into_inner()).push(peer);
            }
        });
        Listener { addr, peers, task }
    }

    fn seen(&self) -> usize {
        self.peers.lock().unwrap_or_else(|e| e.into_inner()).len()
    }
}

/// A public address (TCP and DNS), a metadata stand-in, and their IPv6 twins, for one test.
pub(crate) struct Hosts {
    addrs: Vec<(IpAddr, u8)>,
    tcp: Listener,
    metadata: Listener,
    tcp6: Listener,
    metadata6: Listener,
    dns: TestResolver,
    dns6: TestResolver,
}

impl Hosts {
    /// Put `slot`'s addresses on loopback and start their listeners. Each test has its own
    /// slot, so tests running at once never share (or remove) one another's addresses.
    pub(crate) async fn start(slot: u8) -> Hosts {
        let public = IpAddr::V4(Ipv4Addr::new(198, 51, 100, 20 + slot));
        let metadata = IpAddr::V4(Ipv4Addr::new(169, 254, 44, 20 + slot));
        let public6 = IpAddr::V6(Ipv6Addr::new(
            0x2001,
            0xdb8,
            0x4b,
            0,
            0,
            0,
            0,
            0x20 + u16::from(slot),
        ));
        let metadata6 = IpAddr::V6(Ipv6Addr::new(
            0x2001,
            0xdb8,
            0x4b,
            1,
            0,
            0,
            0,
            0x20 + u16::from(slot),
        ));
        let addrs = vec![
            (public, 32),
            (metadata, 32),
            (public6, 128),
            (metadata6, 128),
        ];
        for (ip, len) in &addrs {
            ip_addr("add", *ip, *len);
        }
        let table = |ip: IpAddr| vec![(PROBE_NAME, vec![ip])];
        Hosts {
            tcp: Listener::start(public).await,
            metadata: Listener::start(metadata).await,
            tcp6: Listener::start(public6).await,
            metadata6: Listener::start(metadata6).await,
            dns: TestResolver::start_on(public, table(public))
                .await
                .unwrap_or_else(|e| panic!("resolver on {public}: {e}")),
            dns6: TestResolver::start_on(public6, table(public6))
                .await
                .unwrap_or_else(|e| panic!("resolver on {public6}: {e}")),
            addrs,
        }
    }

    /// The test resolver the sidecar resolves outside names with.
    pub(crate) fn resolver(&self) -> SocketAddr {
        self.dns.addr
    }

    /// The probe's variables: every route aimed at these hosts, and public defaults forbidden.
    pub(crate) fn probe_vars(&self) -> Vec<(&'static str, String)> {
        vec![
            ("AF_PROBE_DEFAULTS", "forbid".to_owned()),
            ("AF_PROBE_TCP", self.tcp.addr.to_string()),
            ("AF_PROBE_DNS", self.dns.addr.to_string()),
            ("AF_PROBE_METADATA", self.metadata.addr.to_string()),
            ("AF_PROBE_TCP6", self.tcp6.addr.to_string()),
            ("AF_PROBE_DNS6", self.dns6.addr.to_string()),
            ("AF_PROBE_METADATA6", self.metadata6.addr.to_string()),
            ("AF_PROBE_DNS_NAME", PROBE_NAME.to_owned()),
        ]
    }

    /// Each route's description as af names it, with whether this host saw it arrive.
    pub(crate) fn arrivals(&self) -> Vec<(String, bool)> {
        let asked = |r: &TestResolver| r.queries().iter().any(|(n, _)| n == PROBE_NAME);
        vec![
            (
                format!("direct TCP to a public address ({})", self.tcp.addr),
                self.tcp.seen() > 0,
            ),
            (
                format!("UDP DNS straight to a public resolver ({})", self.dns.addr),
                asked(&self.dns),
            ),
            (
                format!("the metadata endpoint ({})", self.metadata.addr),
                self.metadata.seen() > 0,
            ),
            (
                format!(
                    "direct TCP to a public address over IPv6 ({})",
                    self.tcp6.addr
                ),
                self.tcp6.seen() > 0,
            ),
            (
                format!(
                    "UDP DNS straight to a public resolver over IPv6 ({})",
                    self.dns6.addr
                ),
                asked(&self.dns6),
            ),
            (
                format!("the metadata endpoint over IPv6 ({})", self.metadata6.addr),
                self.metadata6.seen() > 0,
            ),
        ]
    }
}

impl Drop for Hosts {
    fn drop(&mut self) {
        for l in [&self.tcp, &self.metadata, &self.tcp6, &self.metadata6] {
            l.task.abort();
        }
        for (ip, len) in &self.addrs {
            ip_addr("del", *ip, *len);
        }
    }
}

/// `ip addr add|del IP/LEN dev lo [nodad]`; an address already there (or already gone) is
/// fine.
pub(crate) fn ip_addr(verb: &str, ip: IpAddr, len: u8) {
    let family = if ip.is_ipv6() { "-6" } else { "-4" };
    let mut args = vec![family, "addr", verb];
    let addr = format!("{ip}/{len}");
    args.extend([addr.as_str(), "dev", "lo"]);
    if ip.is_ipv6() && verb == "add" {
        // Usable at once, not after duplicate address detection.
        args.push("nodad");
    }
    let out = Command::new("ip")
        .args(&args)
        .output()
        .unwrap_or_else(|e| panic!("ip addr {verb}: {e}"));
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success()
            || said.contains("File exists")
            || said.contains("already assigned")
            || verb == "del",
        "ip addr {verb} {ip}/{len} dev lo: {said} (these tests put their hosts on loopback and need root)"
    );
}
