//! The harness of the Kubernetes runtime's tests: the cluster under test ([`cluster`]), the
//! test's own hosts for the probe to aim at, a manifest placed on that cluster, the `af` binary run against it, and a guard that removes every
//! namespace the test made or caused, even when it fails.

pub(crate) mod enforcer;
pub(crate) mod hosts;

use std::path::PathBuf;
use std::process::Output;
use std::sync::OnceLock;

use af_orchestrator::plan::short_digest;
use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, DeleteParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Client, Config};

use self::hosts::Hosts;

/// The cluster these tests run against: the context `AF_KUBE_CONTEXT` names (in the kubeconfig
/// KUBECONFIG names), or else the project's own local cluster (`fixtures/k8s-local`), which
/// the first test to ask starts, building it once into `K8S_LOCAL_DIR` (default
/// `~/.cache/af-k8s-local`; about 11 minutes cold, 40 s warm) as the Docker tests build their
/// static binaries. A test never passes without a cluster: one that cannot be had fails.
pub(crate) struct Cluster {
    /// The kubeconfig context.
    pub context: String,
    /// The kubeconfig file, when not the one KUBECONFIG (or `~/.kube/config`) names.
    pub kubeconfig: Option<PathBuf>,
}

/// The cluster under test, found or started once per test process.
pub(crate) fn cluster() -> &'static Cluster {
    static CLUSTER: OnceLock<Cluster> = OnceLock::new();
    CLUSTER.get_or_init(|| match std::env::var("AF_KUBE_CONTEXT") {
        Ok(context) if !context.trim().is_empty() => Cluster {
            context,
            kubeconfig: None,
        },
        _ => start_local_cluster(),
    })
}

/// The context under test.
pub(crate) fn context() -> String {
    cluster().context.clone()
}

/// The project's own cluster's directory, when it is the cluster under test.
pub(crate) fn local_cluster_dir() -> Option<PathBuf> {
    (cluster().context == LOCAL_CONTEXT).then(local_dir)
}

/// The context of the project's own cluster.
const LOCAL_CONTEXT: &str = "local-af";

fn local_dir() -> PathBuf {
    match std::env::var_os("K8S_LOCAL_DIR") {
        Some(dir) => PathBuf::from(dir),
        None => PathBuf::from(std::env::var_os("HOME").unwrap_or_else(|| "/root".into()))
            .join(".cache/af-k8s-local"),
    }
}

/// Start (or find running) the project's own cluster; its script serialises concurrent
/// callers, so the test processes nextest runs side by side start it once.
fn start_local_cluster() -> Cluster {
    let dir = local_dir();
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../fixtures/k8s-local/ci-up.sh");
    let status = std::process::Command::new(&script)
        .env("K8S_LOCAL_DIR", &dir)
        .status()
        .unwrap_or_else(|e| panic!("{}: {e}", script.display()));
    assert!(
        status.success(),
        "AF_KUBE_CONTEXT is not set and the project's own cluster did not start ({} exited {status}; \
         its output is above). Name a cluster with AF_KUBE_CONTEXT (and KUBECONFIG), or leave these \
         tests out explicitly: `fixtures/test/run -E 'not binary(/kubernetes/) and not binary(live_cluster)'`.",
        script.display()
    );
    Cluster {
        context: LOCAL_CONTEXT.to_owned(),
        kubeconfig: Some(dir.join("run/kubeconfig")),
    }
}

/// A client for the context under test.
pub(crate) async fn client() -> Client {
    let cluster = cluster();
    let options = KubeConfigOptions {
        context: Some(cluster.context.clone()),
        ..KubeConfigOptions::default()
    };
    let kubeconfig = match &cluster.kubeconfig {
        Some(path) => Kubeconfig::read_from(path),
        None => Kubeconfig::read(),
    }
    .unwrap_or_else(|e| panic!("kubeconfig: {e}"));
    let config = Config::from_custom_kubeconfig(kubeconfig, &options)
        .await
        .unwrap_or_else(|e| panic!("kubeconfig context: {e}"));
    Client::try_from(config).unwrap_or_else(|e| panic!("client: {e}"))
}

/// What `af` did.
pub(crate) struct Ran {
    /// Its exit status.
    pub code: i32,
    /// Standard output.
    pub stdout: String,
    /// Standard error.
    pub stderr: String,
}

/// One test's world: its hosts, a manifest on the cluster, an environment id of its own.
pub(crate) struct World {
    /// The test's hosts.
    pub hosts: Hosts,
    /// The environment id.
    pub env: String,
    /// The client.
    pub client: Client,
    prefix: String,
    dir: PathBuf,
}

impl World {
    /// Start `slot`'s hosts and write a manifest with one service placed on the cluster, in a
    /// namespace no enforcer governs (on the local cluster: a decorative one).
    pub(crate) async fn new(test: &str, slot: u8) -> World {
        World::make(test, slot, "af-", false).await
    }

    /// The same in a namespace the enforcer governs, with a service that runs (`af-probe
    /// serve` on 8080).
    pub(crate) async fn enforced(test: &str, slot: u8) -> World {
        enforcer::ensure();
        World::make(test, slot, enforcer::PREFIX, true).await
    }

    async fn make(test: &str, slot: u8, prefix: &str, runnable: bool) -> World {
        let context = context();
        let nonce = short_digest(
            format!(
                "{test}{}{:?}",
                std::process::id(),
                std::time::SystemTime::now()
            )
            .as_bytes(),
        );
        let env = format!("kt{slot}-{}", &nonce[..8]);
        let dir = std::env::temp_dir().join(format!("af-kube-{env}"));
        std::fs::create_dir_all(dir.join("web")).unwrap_or_else(|e| panic!("{e}"));
        let dockerfile = if runnable {
            std::fs::copy(af_probe_binary(), dir.join("web/af-probe"))
                .unwrap_or_else(|e| panic!("copy af-probe: {e}"));
            "FROM scratch\nCOPY af-probe /af-probe\nENTRYPOINT [\"/af-probe\", \"serve\"]\n"
        } else {
            "FROM scratch\n"
        };
        std::fs::write(dir.join("web/Dockerfile"), dockerfile).unwrap_or_else(|e| panic!("{e}"));
        std::fs::write(
            dir.join("af.yaml"),
            format!(
                "version: 1\nname: kube-test\nservices:\n  - name: web\n    path: web\n    port: 8080\nruntime:\n  provider: kubernetes\n  kubeconfig_context: {context}\n  namespace_prefix: {prefix}\n"
            ),
        )
        .unwrap_or_else(|e| panic!("{e}"));
        World {
            hosts: Hosts::start(slot).await,
            env,
            prefix: prefix.to_owned(),
            client: client().await,
            dir,
        }
    }

    /// The namespace prefix of the world's environment.
    pub(crate) fn prefix(&self) -> &str {
        &self.prefix
    }

    /// The environment's namespace name.
    pub(crate) fn namespace(&self) -> String {
        format!("{}{}", self.prefix, self.env)
    }

    /// `af ARGS --env ENV` in the manifest's directory, with `extra` variables (`--env` before
    /// any `--`, so a command's own arguments stay last).
    pub(crate) fn command(&self, args: &[&str], extra: &[(&str, &str)]) -> std::process::Command {
        let at = args.iter().position(|a| *a == "--").unwrap_or(args.len());
        let env = ["--env", self.env.as_str()];
        self.command_of_any(&[&args[..at], &env, &args[at..]].concat(), extra)
    }

    /// `af ARGS` in the manifest's directory, for a command of no one environment (`af ls`).
    pub(crate) fn command_of_any(
        &self,
        args: &[&str],
        extra: &[(&str, &str)],
    ) -> std::process::Command {
        let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_af"));
        command
            .current_dir(&self.dir)
            .args(args)
            .env("AF_PROBE_BINARY", af_probe_binary())
            .env("AF_PROXY_BINARY", static_binaries().join("af-proxy"))
            .env("AF_UPSTREAM_RESOLVER", self.hosts.resolver().to_string())
            .envs(cluster().kubeconfig.iter().map(|path| ("KUBECONFIG", path)))
            .envs(self.hosts.probe_vars())
            .envs(extra.iter().copied());
        command
    }

    /// Run `af ARGS` (see [`World::command`]) while the test's hosts go on answering.
    pub(crate) async fn af(&self, args: &[&str], extra: &[(&str, &str)]) -> Ran {
        self.af_fed(args, extra, b"").await
    }

    /// The same with `input` on its stdin.
    pub(crate) async fn af_fed(&self, args: &[&str], extra: &[(&str, &str)], input: &[u8]) -> Ran {
        ran(self.command(args, extra), input).await
    }

    /// `af ls ARGS` here: every environment on the daemon and the manifest's cluster.
    pub(crate) async fn af_ls(&self, args: &[&str]) -> Ran {
        ran(self.command_of_any(&[&["ls"], args].concat(), &[]), b"").await
    }

    /// The manifest's directory (the repository `af up` records).
    pub(crate) fn dir(&self) -> &std::path::Path {
        &self.dir
    }

    /// The environment's namespace, if it exists.
    pub(crate) async fn read_namespace(&self) -> Option<Namespace> {
        Api::<Namespace>::all(self.client.clone())
            .get_opt(&self.namespace())
            .await
            .unwrap_or_else(|e| panic!("read namespace: {e}"))
    }
}

impl Drop for World {
    fn drop(&mut self) {
        // Whatever the test left, ours or the foreign one it made: removed by name, through a
        // client of the guard's own (the test's runtime is blocked in this drop).
        let namespace = self.namespace();
        let _ = std::thread::spawn(move || {
            let Ok(rt) = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            else {
                return;
            };
            rt.block_on(async {
                let _ = Api::<Namespace>::all(client().await)
                    .delete(&namespace, &DeleteParams::background())
                    .await;
            });
        })
        .join();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// `command` run with `input` on its stdin, on a blocking thread (the test's hosts go on
/// answering meanwhile).
async fn ran(command: std::process::Command, input: &[u8]) -> Ran {
    let input = input.to_vec();
    let Output {
        status,
        stdout,
        stderr,
    } = tokio::task::spawn_blocking(move || crate::process::fed(command, &input))
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    Ran {
        code: status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&stdout).into_owned(),
        stderr: String::from_utf8_lossy(&stderr).into_owned(),
    }
}

/// The static `af-probe` the probe image is built from.
fn af_probe_binary() -> PathBuf {
    static_binaries().join("af-probe")
}

/// The directory of the static binaries (`af_fixtures::cargo::static_binaries`).
fn static_binaries() -> PathBuf {
    af_fixtures::cargo::static_binaries().unwrap_or_else(|e| panic!("the static binaries: {e}"))
}
