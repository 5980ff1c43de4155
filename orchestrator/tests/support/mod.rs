//! What the conformance suite needs from a runtime under test: the runtime, a simulated
//! internet it can be pointed at, the probe image's build context, and a few facts only the
//! runtime's own harness can find (a service's address, the host side of a network).
//!
//! [`docker`] is the harness for the local runtime.

pub(crate) mod docker;

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Mutex;
use std::time::Duration;

use af_orchestrator::env_id::EnvId;
use af_orchestrator::plan::{EnvPlan, Kind, ServicePlan};
use af_orchestrator::runtime::Runtime;
use af_policy::egress::EgressSpec;
use futures_util::future::BoxFuture;
use serde_json::Value;

/// The simulated internet: made-up names on documentation-range addresses, and the metadata
/// address, served by the test's own hosts. Nothing here is a real address.
#[derive(Debug, Clone)]
pub(crate) struct Internet {
    /// A name with an allow rule, and its address.
    pub allowed: (String, IpAddr),
    /// A name with no rule (default block), and its address.
    pub unlisted: (String, IpAddr),
    /// The simulated internet's resolver (UDP 53); the sidecar uses it.
    pub resolver: IpAddr,
    /// A link-local address standing in for the metadata endpoint, served by a test host.
    pub metadata: IpAddr,
}

/// A fresh environment id for tag `tag` of harness run `run`, its first letter saying which
/// harness made it, remembered in `made` so the harness removes it.
pub(crate) fn fresh_env(letter: char, run: &str, tag: &str, made: &Mutex<Vec<EnvId>>) -> EnvId {
    let id = EnvId::parse(&format!(
        "{letter}{}-{tag}",
        &af_orchestrator::plan::short_digest(run.as_bytes())[..6]
    ))
    .unwrap_or_else(|e| panic!("{e}"));
    if let Ok(mut envs) = made.lock() {
        envs.push(id.clone());
    }
    id
}

/// What a runtime's test harness provides.
pub(crate) trait Harness: Send + Sync {
    /// The runtime under test.
    fn runtime(&self) -> &dyn Runtime;
    /// The simulated internet the runtime's sidecars resolve and reach.
    fn internet(&self) -> &Internet;
    /// A build context whose image runs `af-probe` (default command `serve`).
    fn probe_context(&self) -> PathBuf;
    /// A fresh environment id for this test (cleaned up with the harness).
    fn env(&self, tag: &str) -> EnvId;
    /// A service's address inside its environment.
    fn service_addr<'a>(
        &'a self,
        env: &'a EnvId,
        service: &'a str,
    ) -> BoxFuture<'a, Option<IpAddr>>;
    /// The addresses the host has that a service might try to reach it by (the internal
    /// network's gateway address, the engine's default bridge, ...).
    fn host_side_addrs<'a>(&'a self, env: &'a EnvId) -> BoxFuture<'a, Vec<IpAddr>>;
    /// Make something the runtime would call its own object with this name but without the
    /// ownership label (for AF-RUN-045); returns a description of it.
    fn plant_foreign_object<'a>(&'a self, env: &'a EnvId) -> BoxFuture<'a, String>;
    /// Whether the planted foreign object still exists.
    fn foreign_object_exists<'a>(&'a self, env: &'a EnvId) -> BoxFuture<'a, bool>;
    /// A file in a service's filesystem, as its processes read it (the probe cannot read
    /// files, so the harness looks).
    fn service_file<'a>(
        &'a self,
        env: &'a EnvId,
        service: &'a str,
        path: &'a str,
    ) -> BoxFuture<'a, Option<Vec<u8>>>;
    /// The variables a service's processes start with, as `NAME=value`.
    fn service_env<'a>(&'a self, env: &'a EnvId, service: &'a str) -> BoxFuture<'a, Vec<String>>;
}

/// A probe beside the environment without its confinement: the escape cases' positive
/// control (the way out exists here, so only the confinement closes it).
pub(crate) trait Unconfined: Harness {
    /// Run the probe outside the environment's confinement (the runtime's defaults: its
    /// capabilities, IPv6 on) on the services' network; its last JSON line.
    fn unconfined_probe<'a>(&'a self, env: &'a EnvId, args: &'a [&'a str]) -> BoxFuture<'a, Value>;
}

/// What the host escape cases need besides: the host's own bridges, seen from beside the
/// environment (a runtime whose services sit on this machine's bridges).
pub(crate) trait HostEscapes: Unconfined {
    /// Every address the host has on a bridge, IPv4 and IPv6 (link-local included).
    fn host_addrs<'a>(&'a self, env: &'a EnvId) -> BoxFuture<'a, Vec<HostAddr>>;
    /// The MAC address of the host's side of the services' network (the next hop a frame
    /// built by hand is sent to).
    fn next_hop_mac<'a>(&'a self, env: &'a EnvId) -> BoxFuture<'a, String>;
    /// Make the IPv6 island: a host on an IPv6 network of the test's own, behind the host.
    fn island<'a>(&'a self, env: &'a EnvId) -> BoxFuture<'a, Island>;
    /// What the island's receiver has received.
    fn island_received<'a>(&'a self, island: &'a Island) -> BoxFuture<'a, Vec<String>>;
}

/// An address of the host on one of its bridges, as the host dials it and as a service on the
/// environment's internal network would (a link-local address scoped to the service's `eth0`).
#[derive(Debug, Clone)]
pub(crate) struct HostAddr {
    /// The bridge interface it is on.
    pub bridge: String,
    /// `ADDR` as the host dials it (IPv6 link-local scoped to the bridge).
    pub from_host: String,
    /// `ADDR` as a container on the internal network dials it.
    pub from_service: String,
    /// Whether it is on the environment's internal network's own bridge.
    pub on_internal: bool,
    /// Whether the host really has it (a network's gateway address may be nobody's).
    pub on_host: bool,
}

impl HostAddr {
    /// `ADDR:PORT` as the host dials it.
    pub(crate) fn host_target(&self, port: u16) -> String {
        target(&self.from_host, port)
    }

    /// `ADDR:PORT` as a service dials it.
    pub(crate) fn service_target(&self, port: u16) -> String {
        target(&self.from_service, port)
    }
}

fn target(addr: &str, port: u16) -> String {
    if addr.contains(':') {
        format!("[{addr}]:{port}")
    } else {
        format!("{addr}:{port}")
    }
}

/// The IPv6 island: a network of the test's own with IPv6 (a unique-local /64 it picks) and a
/// host on it that prints every datagram it receives.
pub(crate) struct Island {
    /// `[ADDR]:PORT` of the receiver.
    pub receiver: String,
    /// The container that receives.
    pub container: String,
}

/// Sets the host's IPv6 forwarding for as long as it lives, then puts back what it found.
pub(crate) struct HostForwarding {
    before: String,
}

const FORWARDING: &str = "/proc/sys/net/ipv6/conf/all/forwarding";

impl HostForwarding {
    /// Turn the host's IPv6 forwarding on or off.
    pub(crate) fn set(on: bool) -> HostForwarding {
        let before = std::fs::read_to_string(FORWARDING).unwrap_or_else(|e| panic!("{e}"));
        std::fs::write(FORWARDING, if on { "1" } else { "0" })
            .unwrap_or_else(|e| panic!("set {FORWARDING} (the tests run as root): {e}"));
        HostForwarding { before }
    }

    /// Change it while keeping the first value to put back.
    pub(crate) fn turn(&self, on: bool) {
        std::fs::write(FORWARDING, if on { "1" } else { "0" })
            .unwrap_or_else(|e| panic!("set {FORWARDING}: {e}"));
        let now = std::fs::read_to_string(FORWARDING).unwrap_or_default();
        assert_eq!(now.trim(), if on { "1" } else { "0" }, "{FORWARDING} took");
    }
}

impl Drop for HostForwarding {
    fn drop(&mut self) {
        let _ = std::fs::write(FORWARDING, self.before.trim());
    }
}

/// The egress catalogue every conformance environment runs with: the allowed name may go
/// out, everything else is refused.
pub(crate) fn egress(internet: &Internet) -> EgressSpec {
    let yaml = format!(
        "default: block\nrules:\n  - host: {}\n    mode: allow\n",
        internet.allowed.0
    );
    serde_json::from_value(serde_json::json!({
        "default": "block",
        "rules": [{ "host": internet.allowed.0, "mode": "allow" }],
    }))
    .unwrap_or_else(|e| panic!("test egress {yaml} does not parse: {e}"))
}

/// A probe service: the probe image serving HTTP on 8080.
pub(crate) fn probe_service(h: &dyn Harness, name: &str) -> ServicePlan {
    let mut s = ServicePlan::new(name, Kind::Web, h.probe_context());
    s.port = Some(8080);
    s.health_path = Some("/".to_owned());
    s.health_timeout = Duration::from_secs(30);
    s.env = BTreeMap::from([("PROBE_NAME".to_owned(), name.to_owned())]);
    s
}

/// A plan of probe services named `names`.
pub(crate) fn probe_plan(h: &dyn Harness, env: &EnvId, names: &[&str]) -> EnvPlan {
    let services = names.iter().map(|n| probe_service(h, n)).collect();
    EnvPlan::new(env.clone(), "conformance", services, egress(h.internet()))
        .unwrap_or_else(|r| panic!("plan: {r}"))
}

/// Run the probe in `service` with `args`; its one JSON line.
pub(crate) async fn probe(h: &dyn Harness, env: &EnvId, service: &str, args: &[&str]) -> Value {
    let mut argv = vec!["/af-probe".to_owned()];
    argv.extend(args.iter().map(|a| (*a).to_owned()));
    let out = h
        .runtime()
        .exec(env, service, &argv)
        .await
        .unwrap_or_else(|e| panic!("exec {argv:?} in {service}: {e}"));
    let line = out.stdout.lines().last().unwrap_or("").to_owned();
    serde_json::from_str(&line).unwrap_or_else(|e| {
        panic!(
            "probe {args:?} printed {:?} / {:?}: {e}",
            out.stdout, out.stderr
        )
    })
}

/// A field of a probe answer as text.
pub(crate) fn field<'a>(v: &'a Value, k: &str) -> &'a str {
    v[k].as_str().unwrap_or("")
}

/// The Debian clients' image (`fixtures/images/debian-clients`).
pub(crate) fn debian_clients_image() -> String {
    debian_image("debian-clients")
}

/// A test image made from Debian's packages by `fixtures/images/NAME/build.sh` (at once when
/// it exists), by its tag.
pub(crate) fn debian_image(name: &str) -> String {
    let script = repo_root().join(format!("fixtures/images/{name}/build.sh"));
    let out = Command::new(&script)
        .output()
        .unwrap_or_else(|e| panic!("{}: {e}", script.display()));
    assert!(
        out.status.success(),
        "{} failed (fixtures/test/run installs debootstrap, which it needs): {}",
        script.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .last()
        .unwrap_or_else(|| panic!("{} printed no tag", script.display()))
        .to_owned()
}

/// The repository's root (for the fixtures' files).
pub(crate) fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}
