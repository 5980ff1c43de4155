//! The systems under test: how to configure, start and stop each one.
//!
//! Every system gets its own generated configuration in a temporary
//! directory and a free high port on 127.0.0.1; nothing relies on a system
//! service or on the distribution's configuration files.

mod afdns;
mod afproxy;
mod ca;
mod direct;
mod dnsmasq;
mod haproxy;
mod mitmproxy;
mod privoxy;
mod squid;
mod tinyproxy;
mod unbound;

use std::net::{SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use af_fixtures::cargo::{self, Linkage, STATIC_RUSTFLAGS};
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use tempfile::TempDir;

pub(crate) use afdns::{ServeArgs as AfDnsArgs, serve as serve_af_dns};
pub(crate) use afproxy::{ADMIN_TOKEN, AfProxy};

use crate::error::{BenchError, Result};
use crate::scenarios::Scenario;

/// Whether a system takes part in a scenario.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Support {
    /// Measured.
    Yes,
    /// Belongs in the table but cannot be measured yet; the reason is shown.
    Pending(String),
    /// Not this kind of system (e.g. a DNS server in an HTTP scenario).
    No,
}

/// What the harness knows when it starts a system.
#[derive(Debug, Clone)]
pub(crate) struct Env {
    /// The address every DNS system answers for every name.
    pub dns_answer: std::net::Ipv4Addr,
    /// The upstream's plain HTTP address (a reverse proxy's backend).
    pub upstream_http: SocketAddr,
    /// The upstream's HTTPS address (the intercepted-HTTPS scenario's target).
    pub upstream_https: SocketAddr,
    /// The upstream's bulk source (a relay's backend).
    pub upstream_bulk: SocketAddr,
    /// The upstream's HTTPS certificate (PEM), for a system that verifies it.
    pub upstream_cert: PathBuf,
    /// The data-plane threads each system is given: HAProxy's `nbthread`, unbound's
    /// `num-threads`, af-proxy's `limits.data_threads` (0: as deployed, one per core).
    pub threads: u32,
}

impl Env {
    /// What systems are started with against the harness's own `upstream`, each given
    /// `threads`: every DNS answer is 127.0.0.2.
    pub(crate) fn for_upstream(upstream: &crate::upstream::Upstream, threads: u32) -> Env {
        Env {
            threads,
            dns_answer: std::net::Ipv4Addr::new(127, 0, 0, 2),
            upstream_http: upstream.http,
            upstream_https: upstream.https,
            upstream_bulk: upstream.bulk,
            upstream_cert: upstream.cert.clone(),
        }
    }
}

/// One benchmarked system.
pub(crate) trait System {
    /// Name shown in the table.
    fn name(&self) -> &str;
    /// Whether it takes part in `scenario`.
    fn support(&self, scenario: Scenario) -> Support;
    /// Why it cannot run on this machine (a program not installed), if so.
    fn missing(&self) -> Option<String>;
    /// Starts it and waits until it serves.
    fn start(&self, env: &Env) -> Result<Running>;
}

/// Every system the harness knows, `direct` and af-proxy (then its mock twin, then `twins`:
/// the counting build, an older revision) first, HAProxy (the anchor) among the peers; then
/// af-proxy and HAProxy again with each of `scaled` threads, in the [`SCALED`] scenarios.
pub(crate) fn all(af_proxy: AfProxy, twins: Vec<AfProxy>, scaled: &[u32]) -> Vec<Box<dyn System>> {
    let mock = af_proxy.mocking();
    let threaded: Vec<AfProxy> = scaled.iter().map(|&n| af_proxy.threaded(n)).collect();
    let mut systems: Vec<Box<dyn System>> =
        vec![Box::new(direct::Direct), Box::new(af_proxy), Box::new(mock)];
    systems.extend(twins.into_iter().map(|t| Box::new(t) as Box<dyn System>));
    systems.extend([
        Box::new(squid::Squid) as Box<dyn System>,
        Box::new(tinyproxy::Tinyproxy),
        Box::new(privoxy::Privoxy),
        Box::new(mitmproxy::Mitmproxy),
        Box::new(haproxy::Haproxy::anchor()),
        Box::new(afdns::AfDns),
        Box::new(dnsmasq::Dnsmasq),
        Box::new(unbound::Unbound),
    ]);
    for (af_proxy, &n) in threaded.into_iter().zip(scaled) {
        systems.push(Box::new(af_proxy));
        systems.push(Box::new(haproxy::Haproxy::threaded(n)));
    }
    systems
}

/// The scenarios af-proxy and HAProxy are also measured in with more threads.
pub(crate) const SCALED: [Scenario; 2] = [Scenario::HttpKeepAlive, Scenario::HttpNewConn];

/// The name of `system` measured with `threads` threads beside its usual self.
pub(crate) fn threaded_name(system: &str, threads: u32) -> String {
    format!("{system} ({threads} threads)")
}

/// How a running system is reached.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Endpoint {
    /// No intermediary: clients talk to the upstream itself.
    Direct,
    /// An HTTP forward proxy (absolute-form and CONNECT) at this address.
    Proxy(SocketAddr),
    /// A DNS server (UDP) at this address.
    Dns(SocketAddr),
    /// A reverse proxy and relay in front of the upstream (HAProxy): clients talk to these
    /// addresses as to the upstream itself.
    Reverse(Fronts),
}

/// The front ends of a reverse proxy, one per kind of upstream.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Fronts {
    /// Plain HTTP, in front of the upstream's HTTP.
    pub http: SocketAddr,
    /// A TCP relay, in front of the bulk source.
    pub tcp: SocketAddr,
    /// TLS terminated and re-encrypted, in front of the upstream's HTTPS.
    pub https: SocketAddr,
}

/// A started system; stopped when dropped.
#[derive(Debug)]
pub(crate) struct Running {
    /// Where to send load.
    pub endpoint: Endpoint,
    /// A DNS listener of a system that is also a proxy (af-proxy with af-dns).
    pub dns: Option<SocketAddr>,
    /// The CA certificate (PEM) an intercepting system signs with.
    pub ca_cert: Option<PathBuf>,
    /// The admin API of a system that has one (af-proxy).
    pub admin: Option<SocketAddr>,
    child: Option<Child>,
    /// How the process was started, to start it again (program, arguments, environment).
    launched: Option<Launch>,
    // Held so the generated configuration outlives the process.
    _dir: Option<TempDir>,
}

/// What [`launch`] started and waits for, kept to start it again.
#[derive(Debug)]
struct Launch {
    name: String,
    program: std::ffi::OsString,
    args: Vec<std::ffi::OsString>,
    envs: Vec<(std::ffi::OsString, std::ffi::OsString)>,
    port: u16,
    ready: Ready,
}

impl Running {
    /// A system with no process of its own (`direct`).
    pub(crate) fn direct() -> Self {
        Self {
            endpoint: Endpoint::Direct,
            dns: None,
            ca_cert: None,
            admin: None,
            child: None,
            launched: None,
            _dir: None,
        }
    }

    /// The process whose tree is sampled for CPU and memory, if any.
    pub(crate) fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// SIGKILL: no chance to flush or close anything. The directory (and a journal in it)
    /// stays, for [`Running::restart`].
    pub(crate) fn kill(&mut self) -> Result<()> {
        let child = self
            .child
            .as_mut()
            .ok_or_else(|| BenchError::Protocol("nothing to kill".into()))?;
        child.kill().map_err(|e| BenchError::io("SIGKILL", e))?;
        child.wait().map_err(|e| BenchError::io("reap", e))?;
        Ok(())
    }

    /// Starts the same command again in the same directory (after [`Running::kill`]), so a
    /// journal there is read back; returns once it serves again.
    pub(crate) fn restart(&mut self) -> Result<()> {
        let launched = self
            .launched
            .as_ref()
            .ok_or_else(|| BenchError::Protocol("nothing to restart".into()))?;
        let mut cmd = Command::new(&launched.program);
        cmd.args(&launched.args).envs(launched.envs.iter().cloned());
        let (name, port, ready) = (launched.name.clone(), launched.port, launched.ready);
        self.child = Some(spawn_logged(cmd, self._dir.as_ref().map(TempDir::path))?);
        self.wait_ready(&name, port, ready)
    }

    /// Waits until the process serves on `port`, or says why not.
    fn wait_ready(&mut self, name: &str, port: u16, ready: Ready) -> Result<()> {
        let timeout = ready_timeout();
        let deadline = Instant::now() + timeout;
        let addr = SocketAddr::from(([127, 0, 0, 1], port));
        loop {
            if let Some(child) = self.child.as_mut()
                && let Ok(Some(status)) = child.try_wait()
            {
                return Err(BenchError::Exited {
                    system: name.into(),
                    status: status.to_string(),
                    detail: stderr_tail(self._dir.as_ref()),
                });
            }
            let up = match ready {
                Ready::Tcp => TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_ok(),
                Ready::Dns => crate::load::dnsperf::probe(addr),
            };
            if up {
                return Ok(());
            }
            if Instant::now() > deadline {
                return Err(BenchError::NotReady {
                    system: name.into(),
                    port,
                    secs: timeout.as_secs(),
                    detail: stderr_tail(self._dir.as_ref()),
                });
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        if let Some(child) = self.child.as_mut() {
            stop(child);
        }
    }
}

/// How long a started system has to serve: 20 s, or `AF_BENCH_READY_SECS` (a system started
/// under valgrind for a profile takes longer).
pub(crate) fn ready_timeout() -> Duration {
    let secs = std::env::var("AF_BENCH_READY_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(20);
    Duration::from_secs(secs)
}

/// SIGTERM, a grace period, then SIGKILL.
pub(crate) fn stop(child: &mut Child) {
    if let Ok(pid) = i32::try_from(child.id()) {
        let _ = kill(Pid::from_raw(pid), Signal::SIGTERM);
    }
    let deadline = Instant::now() + Duration::from_secs(3);
    while Instant::now() < deadline {
        if let Ok(Some(_)) = child.try_wait() {
            return;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = child.kill();
    let _ = child.wait();
}

/// `cargo build ARGS` in the workspace at `root` (`af_fixtures::cargo::build`: static, as the
/// Docker images are built, or not); the command is printed first.
pub(crate) fn cargo_build(root: &Path, linkage: Linkage, args: &[&str]) -> Result<()> {
    let mut cmd = cargo::build(root, linkage);
    cmd.args(args);
    let flags = match linkage {
        Linkage::Static => format!("RUSTFLAGS='{STATIC_RUSTFLAGS}' "),
        Linkage::Host => String::new(),
    };
    let words: Vec<String> = cmd
        .get_args()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    eprintln!("building: {flags}cargo {}", words.join(" "));
    let status = cmd.status().map_err(|source| BenchError::Spawn {
        program: "cargo".into(),
        source,
    })?;
    if status.success() {
        Ok(())
    } else {
        Err(BenchError::Build {
            command: words.join(" "),
            status: status.to_string(),
        })
    }
}

/// How to tell that a freshly started system serves.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Ready {
    /// Its TCP port accepts.
    Tcp,
    /// It answers a DNS query on UDP.
    Dns,
}

/// A private directory for a system's configuration; world-readable so that
/// peers which drop privileges (squid, tinyproxy) can still read it.
pub(crate) fn config_dir() -> Result<TempDir> {
    let dir = tempfile::Builder::new()
        .prefix("af-bench-")
        .tempdir()
        .map_err(|e| BenchError::io("create config dir", e))?;
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755))
        .map_err(|e| BenchError::io("chmod config dir", e))?;
    Ok(dir)
}

/// Writes `text` to `dir/name` and returns the path.
pub(crate) fn write_config(dir: &Path, name: &str, text: &str) -> Result<PathBuf> {
    let path = dir.join(name);
    std::fs::write(&path, text)
        .map_err(|e| BenchError::io(format!("write {}", path.display()), e))?;
    Ok(path)
}

/// A free port on 127.0.0.1, free for both TCP and UDP.
pub(crate) fn free_port() -> Result<u16> {
    for _ in 0..100 {
        let tcp = TcpListener::bind("127.0.0.1:0").map_err(|e| BenchError::io("pick port", e))?;
        let port = tcp
            .local_addr()
            .map_err(|e| BenchError::io("pick port", e))?
            .port();
        if UdpSocket::bind(("127.0.0.1", port)).is_ok() {
            return Ok(port);
        }
    }
    Err(BenchError::Protocol("no free port on 127.0.0.1".into()))
}

/// Whether `program` is on PATH (or is an existing path).
pub(crate) fn find_program(program: &str) -> Option<PathBuf> {
    let p = Path::new(program);
    if p.components().count() > 1 {
        return p.is_file().then(|| p.to_path_buf());
    }
    std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .chain([PathBuf::from("/usr/sbin"), PathBuf::from("/sbin")])
            .map(|d| d.join(program))
            .find(|c| c.is_file())
    })
}

/// The "not installed" reason for a missing program.
pub(crate) fn missing_program(program: &str) -> Option<String> {
    find_program(program)
        .is_none()
        .then(|| format!("{program} not installed"))
}

/// Spawns `cmd` with its output in `dir`, waits until it serves on `port`.
pub(crate) fn launch(
    name: &str,
    cmd: Command,
    dir: TempDir,
    port: u16,
    ready: Ready,
    endpoint: Endpoint,
) -> Result<Running> {
    let launched = Launch {
        name: name.to_owned(),
        program: cmd.get_program().to_owned(),
        args: cmd.get_args().map(ToOwned::to_owned).collect(),
        envs: cmd
            .get_envs()
            .filter_map(|(k, v)| Some((k.to_owned(), v?.to_owned())))
            .collect(),
        port,
        ready,
    };
    let child = spawn_logged(cmd, Some(dir.path()))?;
    let mut running = Running {
        endpoint,
        dns: None,
        ca_cert: None,
        admin: None,
        child: Some(child),
        launched: Some(launched),
        _dir: Some(dir),
    };
    running.wait_ready(name, port, ready)?;
    Ok(running)
}

/// Spawns `cmd` with stdout and stderr appended to `dir`'s logs.
fn spawn_logged(mut cmd: Command, dir: Option<&Path>) -> Result<Child> {
    if let Some(dir) = dir {
        let log = |name: &str| {
            std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(dir.join(name))
                .map_err(|e| BenchError::io("log", e))
        };
        cmd.stdout(log("stdout.log")?).stderr(log("stderr.log")?);
    }
    cmd.stdin(Stdio::null());
    let program = cmd.get_program().to_string_lossy().into_owned();
    cmd.spawn()
        .map_err(|source| BenchError::Spawn { program, source })
}

fn stderr_tail(dir: Option<&TempDir>) -> String {
    let Some(dir) = dir else { return String::new() };
    let mut text = String::new();
    for f in ["stderr.log", "stdout.log"] {
        text.push_str(&std::fs::read_to_string(dir.path().join(f)).unwrap_or_default());
    }
    let lines: Vec<&str> = text.lines().rev().take(6).collect();
    if lines.is_empty() {
        String::new()
    } else {
        let tail: Vec<&str> = lines.into_iter().rev().collect();
        format!(": {}", tail.join(" | "))
    }
}
