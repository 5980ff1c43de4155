//! The harness of the Kubernetes runtime's tests: the cluster `AF_KUBE_CONTEXT` names (in the
//! kubeconfig KUBECONFIG names), the test's own hosts for the probe to aim at, a manifest
//! placed on that cluster, the `af` binary run against it, and a guard that removes every
//! namespace the test made or caused, even when it fails.

pub mod hosts;

use std::path::PathBuf;
use std::process::Output;

use af_orchestrator::plan::short_digest;
use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, DeleteParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Client, Config};

use self::hosts::Hosts;

/// The context these tests run against. Unset, they fail and say how to give them one: a
/// test that cannot reach a cluster has proved nothing, and must not pass.
pub fn context() -> String {
    match std::env::var("AF_KUBE_CONTEXT") {
        Ok(context) if !context.trim().is_empty() => context,
        _ => panic!(
            "AF_KUBE_CONTEXT is not set, and these tests need a Kubernetes cluster. Start the project's own with \
             `K8S_LOCAL_DIR=DIR fixtures/k8s-local/up.sh` and `export KUBECONFIG=DIR/run/kubeconfig AF_KUBE_CONTEXT=local-af`, \
             or leave these tests out explicitly: `cargo nextest run --workspace -E 'not binary(kubernetes_runtime)'`."
        ),
    }
}

/// A client for the context under test.
pub async fn client() -> Client {
    let options = KubeConfigOptions {
        context: Some(context()),
        ..KubeConfigOptions::default()
    };
    let kubeconfig = Kubeconfig::read().unwrap_or_else(|e| panic!("kubeconfig: {e}"));
    let config = Config::from_custom_kubeconfig(kubeconfig, &options)
        .await
        .unwrap_or_else(|e| panic!("kubeconfig context: {e}"));
    Client::try_from(config).unwrap_or_else(|e| panic!("client: {e}"))
}

/// What `af` did.
pub struct Ran {
    /// Its exit status.
    pub code: i32,
    /// Standard output.
    pub stdout: String,
    /// Standard error.
    pub stderr: String,
}

/// One test's world: its hosts, a manifest on the cluster, an environment id of its own.
pub struct World {
    /// The test's hosts.
    pub hosts: Hosts,
    /// The environment id.
    pub env: String,
    /// The client.
    pub client: Client,
    dir: PathBuf,
}

impl World {
    /// Start `slot`'s hosts and write a manifest with one service placed on the cluster.
    pub async fn new(test: &str, slot: u8) -> World {
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
        std::fs::write(dir.join("web/Dockerfile"), "FROM scratch\n")
            .unwrap_or_else(|e| panic!("{e}"));
        std::fs::write(
            dir.join("af.yaml"),
            format!(
                "version: 1\nname: kube-test\nservices:\n  - name: web\n    path: web\n    port: 8080\nruntime:\n  provider: kubernetes\n  kubeconfig_context: {context}\n"
            ),
        )
        .unwrap_or_else(|e| panic!("{e}"));
        World {
            hosts: Hosts::start(slot).await,
            env,
            client: client().await,
            dir,
        }
    }

    /// The environment's namespace name.
    pub fn namespace(&self) -> String {
        format!("af-{}", self.env)
    }

    /// Run `af ARGS --env ENV` in the manifest's directory, with `extra` variables, while the
    /// test's hosts go on answering.
    pub async fn af(&self, args: &[&str], extra: &[(&str, &str)]) -> Ran {
        let probe = af_probe_binary();
        let mut command = tokio::process::Command::new(env!("CARGO_BIN_EXE_af"));
        command
            .current_dir(&self.dir)
            .args(args)
            .args(["--env", &self.env])
            .env("AF_PROBE_BINARY", &probe)
            .envs(self.hosts.probe_vars())
            .envs(extra.iter().copied());
        let Output {
            status,
            stdout,
            stderr,
        } = command
            .output()
            .await
            .unwrap_or_else(|e| panic!("af {args:?}: {e}"));
        Ran {
            code: status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&stdout).into_owned(),
            stderr: String::from_utf8_lossy(&stderr).into_owned(),
        }
    }

    /// The environment's namespace, if it exists.
    pub async fn read_namespace(&self) -> Option<Namespace> {
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

/// The static `af-probe` the probe image is built from.
fn af_probe_binary() -> PathBuf {
    crate::binaries::static_binaries().join("af-probe")
}
