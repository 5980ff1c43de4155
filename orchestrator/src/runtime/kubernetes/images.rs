//! How the cluster's nodes get af's images. A node cannot see the Docker daemon on the machine
//! that ran `af`, so an image that built here is an image a node reports as `ErrImagePull`
//! minutes later, unless it is delivered:
//!
//! - `daemon`: the nodes use this machine's Docker daemon (Docker Desktop, Rancher Desktop
//!   with moby, the project's local test cluster `local-af`): used as built, `Never` pulled;
//! - `k3d` / `kind`: copied into the nodes with `k3d image import` / `kind load docker-image`;
//! - `registry`: any other cluster; the image must be named (`AF_PROBE_IMAGE`) and pullable.
//!
//! Chosen by the context's name (`k3d-*`, `kind-*`, `docker-desktop`, `rancher-desktop`,
//! `local-af`) unless `AF_KUBE_IMAGES` names one. Everything here happens before anything is
//! created on the cluster.

use std::path::PathBuf;

use tokio::process::Command;

use super::probe::ProbeImage;
use crate::runtime::local::{client, images};
use crate::runtime::{Progress, RuntimeError};

/// The probe binary's file name (from the `af-fixtures` package).
pub const PROBE_BINARY: &str = "af-probe";
/// The `dev.antifailure.kind` of the probe image (shared by environments, like the sidecar's).
const PROBE_IMAGE_KIND: &str = "probe-image";
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

/// Where the probe image comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProbeSource {
    /// A prebuilt image holding `/af-probe` (`AF_PROBE_IMAGE`).
    Image(String),
    /// The static `af-probe` to build it from (`AF_PROBE_BINARY`), or found like af-proxy.
    Binary(Option<PathBuf>),
}

/// Make the probe image available to the nodes.
pub async fn probe_image(
    delivery: &Delivery,
    source: &ProbeSource,
    progress: &dyn Progress,
) -> Result<ProbeImage, RuntimeError> {
    let reference = match (delivery, source) {
        (Delivery::Registry, ProbeSource::Image(image)) => image.clone(),
        (Delivery::Registry, ProbeSource::Binary(_)) => {
            return Err(RuntimeError::Unsupported(
                "This cluster's nodes pull their images from a registry, and no probe image is named; set AF_PROBE_IMAGE to a pullable image holding /af-probe (or AF_KUBE_IMAGES=daemon if the nodes use this machine's Docker daemon). Nothing was created.".to_owned(),
            ));
        }
        (_, ProbeSource::Image(image)) => here(image).await?,
        (_, ProbeSource::Binary(explicit)) => build(explicit.as_deref(), progress).await?,
    };
    to_nodes(delivery, "probe", &reference, progress).await?;
    Ok(ProbeImage {
        reference,
        pull_policy: delivery.pull_policy(),
    })
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

/// `image`, if it is on this machine's Docker daemon (whence the nodes get it): a missing one
/// is refused now, not found as `ErrImageNeverPull` on a node later.
async fn here(image: &str) -> Result<String, RuntimeError> {
    let docker = client::connect().await?;
    match docker.inspect_image(image).await {
        Ok(_) => Ok(image.to_owned()),
        Err(e) if client::is_not_found(&e) => Err(RuntimeError::ImageBuild {
            service: "probe".to_owned(),
            message: format!(
                "AF_PROBE_IMAGE names {image}, which is not on this Docker host (nothing is pulled); nothing was created"
            ),
            tail: Vec::new(),
        }),
        Err(e) => Err(RuntimeError::engine("inspect the probe image", e)),
    }
}

async fn build(
    explicit: Option<&std::path::Path>,
    progress: &dyn Progress,
) -> Result<String, RuntimeError> {
    let binary = images::find_static_binary(PROBE_BINARY, "af-fixtures", "probe", explicit)?;
    let docker = client::connect().await?;
    images::ensure_scratch_image(
        &docker,
        "probe",
        PROBE_BINARY,
        &[(PROBE_BINARY, &binary)],
        PROBE_IMAGE_KIND,
        progress,
    )
    .await
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
