//! How a cluster's nodes get the images made here. A node cannot see the Docker daemon on the
//! machine that ran `af`, so an image that built here is an image a node reports as
//! `ErrImagePull` minutes later, unless it is delivered:
//!
//! - `daemon`: the nodes use this machine's Docker daemon (Docker Desktop, Rancher Desktop
//!   with moby, the project's local test cluster `local-af`): used as built, `Never` pulled;
//! - `k3d` / `kind`: copied into the nodes with `k3d image import` / `kind load docker-image`;
//! - `registry`: any other cluster; pushed to the repository the user names
//!   ([`Registry`]) and pulled by digest.
//!
//! Chosen by the context's name (`k3d-*`, `kind-*`, `docker-desktop`, `rancher-desktop`,
//! `local-af`) unless `AF_KUBE_IMAGES` names one. Everything here happens before anything is
//! created on the cluster: [`Delivery::preflight`] first, then [`Delivery::deliver`] for each
//! image.

use tokio::process::Command;

use bollard::Docker;

use super::registry::Registry;
use crate::runtime::{Progress, RuntimeError};

/// Contexts whose nodes run on this machine's Docker daemon.
const DAEMON_CONTEXTS: [&str; 3] = ["docker-desktop", "rancher-desktop", "local-af"];

/// How images reach the nodes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Delivery {
    /// The nodes use this machine's Docker daemon.
    Daemon,
    /// `k3d image import` into this k3d cluster.
    K3d(String),
    /// `kind load docker-image` into this kind cluster.
    Kind(String),
    /// The nodes pull from a registry.
    Registry,
}

impl Delivery {
    /// The delivery for `context`, or the one `explicit` (`AF_KUBE_IMAGES`) names.
    pub fn choose(context: &str, explicit: Option<&str>) -> Result<Self, RuntimeError> {
        let after = |prefix: &str| context.strip_prefix(prefix).unwrap_or(context).to_owned();
        match explicit {
            Some("daemon") => Ok(Delivery::Daemon),
            Some("k3d") => Ok(Delivery::K3d(after("k3d-"))),
            Some("kind") => Ok(Delivery::Kind(after("kind-"))),
            Some("registry") => Ok(Delivery::Registry),
            Some(other) => Err(RuntimeError::Unsupported(format!(
                "AF_KUBE_IMAGES {other:?} is not one of daemon, k3d, kind, registry."
            ))),
            None if DAEMON_CONTEXTS.contains(&context) => Ok(Delivery::Daemon),
            None if context.starts_with("k3d-") => Ok(Delivery::K3d(after("k3d-"))),
            None if context.starts_with("kind-") => Ok(Delivery::Kind(after("kind-"))),
            None => Ok(Delivery::Registry),
        }
    }

    /// The `imagePullPolicy` of images delivered this way.
    pub fn pull_policy(&self) -> &'static str {
        match self {
            Delivery::Registry => "IfNotPresent",
            _ => "Never",
        }
    }
}

impl Delivery {
    /// Refuse, before anything is built or made, a delivery that cannot work: a k3d or kind
    /// cluster whose tool is missing or does not know it.
    pub async fn preflight(&self) -> Result<(), RuntimeError> {
        let (tool, cluster, args): (_, _, &[&str]) = match self {
            Delivery::K3d(cluster) => ("k3d", cluster, &["cluster", "list", "--no-headers"]),
            Delivery::Kind(cluster) => ("kind", cluster, &["get", "clusters"]),
            Delivery::Daemon | Delivery::Registry => return Ok(()),
        };
        let listed = run(tool, cluster, args).await?;
        let known = listed
            .lines()
            .any(|line| line.split_whitespace().next() == Some(cluster.as_str()));
        if known {
            return Ok(());
        }
        Err(RuntimeError::ImageTool {
            tool,
            cluster: cluster.clone(),
            message: format!("`{tool} {}` does not list it", args.join(" ")),
        })
    }

    /// Deliver the image `local` (on this machine's Docker daemon, of `what`, a `kind` of
    /// image): returns the reference the nodes run. The daemon's nodes run it as it is; k3d's
    /// and kind's once copied in; a registry's pull it by digest once `registry` holds it.
    pub async fn deliver(
        &self,
        registry: Option<&Registry>,
        docker: &Docker,
        image: Image<'_>,
        progress: &dyn Progress,
    ) -> Result<String, RuntimeError> {
        let Image { what, kind, local } = image;
        let (tool, cluster, args): (_, _, &[&str]) = match self {
            Delivery::Daemon => return Ok(local.to_owned()),
            Delivery::Registry => {
                let registry = registry.ok_or(RuntimeError::NoRegistry)?;
                return registry.publish(docker, what, kind, local, progress).await;
            }
            Delivery::K3d(cluster) => ("k3d", cluster, &["image", "import", local, "-c", cluster]),
            Delivery::Kind(cluster) => (
                "kind",
                cluster,
                &["load", "docker-image", local, "--name", cluster],
            ),
        };
        progress.step(&format!("{what}: {tool} {}", args.join(" ")));
        run(tool, cluster, args).await?;
        Ok(local.to_owned())
    }
}

/// An image to deliver.
#[derive(Debug, Clone, Copy)]
pub struct Image<'a> {
    /// Whose (`sidecar`, `probe`, a service's name).
    pub what: &'a str,
    /// What kind of image, the start of its tag in a registry (`sidecar`, `probe`, `service`).
    pub kind: &'a str,
    /// Its reference on this machine's Docker daemon.
    pub local: &'a str,
}

/// Run the cluster tool that copies images into `cluster`'s nodes; its standard output.
async fn run(tool: &'static str, cluster: &str, args: &[&str]) -> Result<String, RuntimeError> {
    let failed = |message: String| RuntimeError::ImageTool {
        tool,
        cluster: cluster.to_owned(),
        message,
    };
    let out = Command::new(tool)
        .args(args)
        .output()
        .await
        .map_err(|e| failed(format!("{tool} could not be run ({e})")))?;
    if out.status.success() {
        return Ok(String::from_utf8_lossy(&out.stdout).into_owned());
    }
    let text = String::from_utf8_lossy(&out.stderr);
    let last = text
        .lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("");
    Err(failed(format!(
        "`{tool} {}` failed ({}): {last}",
        args.join(" "),
        out.status
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn delivery_follows_the_context_name_unless_named() {
        let cases = [
            (
                "k3d-af-conformance",
                None,
                Delivery::K3d("af-conformance".to_owned()),
            ),
            ("kind-dev", None, Delivery::Kind("dev".to_owned())),
            ("docker-desktop", None, Delivery::Daemon),
            ("local-af", None, Delivery::Daemon),
            ("eks-prod", None, Delivery::Registry),
            ("eks-prod", Some("daemon"), Delivery::Daemon),
            ("local-af", Some("registry"), Delivery::Registry),
            ("k3d-x", Some("kind"), Delivery::Kind("k3d-x".to_owned())),
        ];
        for (context, explicit, want) in cases {
            assert_eq!(
                Delivery::choose(context, explicit).expect("chosen"),
                want,
                "{context}"
            );
        }
        assert!(Delivery::choose("x", Some("ftp")).is_err());
        assert_eq!(Delivery::Daemon.pull_policy(), "Never");
        assert_eq!(Delivery::Registry.pull_policy(), "IfNotPresent");
    }

    #[tokio::test]
    async fn a_cluster_tool_that_is_missing_or_does_not_know_the_cluster_is_refused() {
        for delivery in [
            Delivery::K3d("af-test-no-such-cluster".to_owned()),
            Delivery::Kind("af-test-no-such-cluster".to_owned()),
        ] {
            let refused = delivery.preflight().await.expect_err("refused");
            let report = refused.report();
            assert_eq!(report.code.code, "AF-RUN-014", "{report:?}");
            assert!(
                report.statement.contains("af-test-no-such-cluster"),
                "{report:?}"
            );
        }
        Delivery::Daemon
            .preflight()
            .await
            .expect("nothing to check");
        Delivery::Registry
            .preflight()
            .await
            .expect("nothing to check");
    }
}
