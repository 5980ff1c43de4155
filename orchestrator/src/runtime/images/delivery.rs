//! How a cluster's nodes get the images made here. A node cannot see the Docker daemon on the
//! machine that ran `af`, so an image that built here is an image a node reports as
//! `ErrImagePull` minutes later, unless it is delivered:
//!
//! - `daemon`: the nodes use this machine's Docker daemon (Docker Desktop, Rancher Desktop
//!   with moby, the project's local test cluster `local-af`): used as built, `Never` pulled;
//! - `k3d` / `kind`: copied into the nodes with `k3d image import` / `kind load docker-image`;
//! - `registry`: any other cluster; the image must be named (`AF_PROBE_IMAGE`) and pullable.
//!
//! Chosen by the context's name (`k3d-*`, `kind-*`, `docker-desktop`, `rancher-desktop`,
//! `local-af`) unless `AF_KUBE_IMAGES` names one. Everything here happens before anything is
//! created on the cluster.

use tokio::process::Command;

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

/// Copy `reference` (an image on this machine's Docker daemon, of `what`) into the nodes the
/// way `delivery` says; nothing to do when the nodes use this daemon or pull.
pub async fn to_nodes(
    delivery: &Delivery,
    what: &str,
    reference: &str,
    progress: &dyn Progress,
) -> Result<(), RuntimeError> {
    match delivery {
        Delivery::K3d(cluster) => {
            load(
                progress,
                what,
                "k3d",
                &["image", "import", reference, "-c", cluster],
            )
            .await
        }
        Delivery::Kind(cluster) => {
            load(
                progress,
                what,
                "kind",
                &["load", "docker-image", reference, "--name", cluster],
            )
            .await
        }
        Delivery::Daemon | Delivery::Registry => Ok(()),
    }
}

/// Run the cluster tool that copies an image into its nodes.
async fn load(
    progress: &dyn Progress,
    what: &str,
    tool: &str,
    args: &[&str],
) -> Result<(), RuntimeError> {
    progress.step(&format!("{tool} {}", args.join(" ")));
    let failed = |message: String, tail: Vec<String>| RuntimeError::ImageBuild {
        service: what.to_owned(),
        message,
        tail,
    };
    let out = Command::new(tool)
        .args(args)
        .output()
        .await
        .map_err(|e| failed(format!("{tool} could not be run: {e}"), Vec::new()))?;
    if out.status.success() {
        return Ok(());
    }
    let text = String::from_utf8_lossy(&out.stderr);
    let lines: Vec<&str> = text.lines().collect();
    let tail = lines[lines.len().saturating_sub(10)..]
        .iter()
        .map(|l| (*l).to_owned())
        .collect();
    Err(failed(
        format!("{tool} {} failed ({})", args.join(" "), out.status),
        tail,
    ))
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
}
