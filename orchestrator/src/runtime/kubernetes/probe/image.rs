//! The probe image, as the nodes get it: a prebuilt one named (`AF_PROBE_IMAGE`), or one
//! `FROM scratch` of the static `af-probe` made by the image supply, then delivered the way the
//! cluster's [`Delivery`] says.

use std::path::PathBuf;

use super::ProbeImage;
use crate::runtime::images::{self, Delivery, to_nodes};
use crate::runtime::{Progress, RuntimeError, docker_client};

/// The probe binary's file name (from the `af-fixtures` package).
pub const PROBE_BINARY: &str = "af-probe";
/// The `dev.antifailure.kind` of the probe image (shared by environments, like the sidecar's).
const PROBE_IMAGE_KIND: &str = "probe-image";

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

/// `image`, if it is on this machine's Docker daemon (whence the nodes get it): a missing one
/// is refused now, not found as `ErrImageNeverPull` on a node later.
async fn here(image: &str) -> Result<String, RuntimeError> {
    let docker = docker_client::connect().await?;
    match docker.inspect_image(image).await {
        Ok(_) => Ok(image.to_owned()),
        Err(e) if docker_client::is_not_found(&e) => Err(RuntimeError::ImageBuild {
            service: "probe".to_owned(),
            message: format!(
                "AF_PROBE_IMAGE names {image}, which is not on this Docker host (nothing is pulled); nothing was created"
            ),
            tail: Vec::new(),
        }),
        Err(e) => Err(RuntimeError::engine("inspect the probe image", e)),
    }
}

/// The probe image `FROM scratch` of the static `af-probe` (`explicit`, else found like
/// af-proxy), built once per content.
async fn build(
    explicit: Option<&std::path::Path>,
    progress: &dyn Progress,
) -> Result<String, RuntimeError> {
    let binary = images::find_static_binary(PROBE_BINARY, "af-fixtures", "probe", explicit)?;
    let docker = docker_client::connect().await?;
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
