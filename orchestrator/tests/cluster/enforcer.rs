//! The enforcing half of the local test cluster: the project's NetworkPolicy enforcer
//! (`fixtures/netpol-enforcer`, a test fixture) governs every namespace whose name starts with
//! [`PREFIX`], and no other, so one cluster is an enforcing one for these tests and a
//! decorative one for the rest, side by side. On a cluster `AF_KUBE_CONTEXT` names (other than
//! the project's own), the cluster's CNI is the enforcer and nothing is started here.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use af_fixtures::cargo::{self, Linkage};

/// The namespace prefix of the environments the enforcer governs, each new pod about a second
/// after it starts (what a real enforcer showed on this machine).
pub(crate) const PREFIX: &str = "afe-";
/// The prefix of environments it governs only 5 s after a new pod starts: the startup window,
/// made long on purpose.
pub(crate) const SLOW_PREFIX: &str = "afs-";
/// That delay, in milliseconds.
pub(crate) const SLOW_DELAY_MS: u64 = 5000;
/// The prefix of environments where what no policy allows is dropped, not refused (a client
/// waits for its timeout): the probe and the gate must judge both.
pub(crate) const DROP_PREFIX: &str = "afd-";

/// The node's ports every pod reaches whatever the policies say, as kube-router's built-in
/// INPUT rule lets them: its NodePort range. The suite must hold with it.
pub(crate) const NODE_PORTS: &str = "30000-32767";

/// Make sure the enforcer governs [`PREFIX`] (once per test process; its script serialises
/// the processes nextest runs side by side).
pub(crate) fn ensure() {
    static STARTED: OnceLock<()> = OnceLock::new();
    STARTED.get_or_init(|| {
        let Some(dir) = super::local_cluster_dir() else {
            return;
        };
        let root = cargo::workspace_root();
        let binary = match std::env::var_os("AF_ENFORCER_BIN") {
            Some(path) => PathBuf::from(path),
            None => build(&root),
        };
        let status = Command::new(root.join("fixtures/k8s-local/enforcer.sh"))
            .arg("start")
            .env("K8S_LOCAL_DIR", &dir)
            .env("AF_ENFORCER_BIN", &binary)
            .env(
                "AF_ENFORCER_ARGS",
                format!(
                    "--namespace-prefix {PREFIX} --namespace-prefix {SLOW_PREFIX}={SLOW_DELAY_MS} --namespace-prefix {DROP_PREFIX}@drop --action reject --node-ports-open {NODE_PORTS}"
                ),
            )
            .status()
            .unwrap_or_else(|e| panic!("enforcer.sh start: {e}"));
        assert!(
            status.success(),
            "the NetworkPolicy enforcer did not start (its log: {}/run/logs/enforcer.log)",
            dir.display()
        );
    });
}

/// An enforcer of a test's own, beside the shared one: it governs only the namespaces under
/// its prefix, under chains of its own instance, and a test stops it (its chains go with it,
/// as a real enforcer's do when it stops) and starts it again at will.
#[allow(
    dead_code,
    reason = "one of the two test binaries sharing this module uses it"
)]
pub(crate) struct OwnEnforcer {
    prefix: &'static str,
    instance: &'static str,
    ready: PathBuf,
    child: Option<std::process::Child>,
}

#[allow(
    dead_code,
    reason = "one of the two test binaries sharing this module uses it"
)]
impl OwnEnforcer {
    /// One governing `prefix` (refusing what no policy allows, the node ports open as the
    /// shared one has them), started and ready.
    pub(crate) fn start(prefix: &'static str, instance: &'static str) -> OwnEnforcer {
        let mut own = OwnEnforcer {
            prefix,
            instance,
            ready: std::env::temp_dir().join(format!(
                "af-enforcer-{instance}-{}.ready",
                std::process::id()
            )),
            child: None,
        };
        own.resume();
        own
    }

    /// Start it (again) and wait until its first sync is programmed.
    pub(crate) fn resume(&mut self) {
        let dir = super::local_cluster_dir().unwrap_or_else(|| {
            panic!("an enforcer of the test's own needs the project's local cluster")
        });
        let root = cargo::workspace_root();
        let binary = match std::env::var_os("AF_ENFORCER_BIN") {
            Some(path) => PathBuf::from(path),
            None => build(&root),
        };
        let _ = std::fs::remove_file(&self.ready);
        let run = dir.join("run");
        let child = Command::new(binary)
            .args(["--kubeconfig"])
            .arg(run.join("kubeconfig"))
            .args(["--context", "local-af", "--namespace-prefix", self.prefix])
            .args(["--action", "reject", "--node-ports-open", NODE_PORTS])
            .args(["--instance", self.instance, "--ready-file"])
            .arg(&self.ready)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("af-netpol-enforcer: {e}"));
        self.child = Some(child);
        let until = std::time::Instant::now() + std::time::Duration::from_secs(30);
        while !self.ready.exists() {
            assert!(
                std::time::Instant::now() < until,
                "the test's own enforcer ({}) was not ready within 30 s",
                self.instance
            );
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
    }

    /// Stop it as an operator would (SIGTERM): its chains are removed, and nothing of the
    /// NetworkPolicy layer is in force for its namespaces until it runs again.
    pub(crate) fn stop(&mut self) {
        let Some(mut child) = self.child.take() else {
            return;
        };
        let pid = child.id().to_string();
        let _ = Command::new("kill").args(["-TERM", &pid]).status();
        let until = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while std::time::Instant::now() < until {
            if child.try_wait().ok().flatten().is_some() {
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
        let _ = child.kill();
        let _ = child.wait();
    }
}

impl Drop for OwnEnforcer {
    fn drop(&mut self) {
        self.stop();
        let _ = std::fs::remove_file(&self.ready);
    }
}

/// Build the enforcer with cargo (its own lock serialises concurrent test processes).
fn build(root: &Path) -> PathBuf {
    let status = cargo::build(root, Linkage::Host)
        .args(["-p", "af-netpol-enforcer"])
        .status()
        .unwrap_or_else(|e| panic!("cargo build -p af-netpol-enforcer: {e}"));
    assert!(status.success(), "the enforcer did not build");
    cargo::target_dir(root).join("debug/af-netpol-enforcer")
}
