//! The probe image on this machine's Docker daemon: a prebuilt one named (`AF_PROBE_IMAGE`), or
//! one `FROM scratch` of the static `af-probe` made by the image supply. The environment's
//! image supply ([`super::super::supply`]) delivers it to the nodes.

use std::path::PathBuf;

use bollard::Docker;

use crate::runtime::images;
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

/// The probe image of `source` on this machine's Docker daemon: a named one must be there
/// (refused now, not found as `ErrImageNeverPull` on a node later); one of the binary is built
/// once per content.
pub async fn local_probe_image(
    docker: &Docker,
    source: &ProbeSource,
    progress: &dyn Progress,
) -> Result<String, RuntimeError> {
    match source {
        ProbeSource::Image(image) => match docker.inspect_image(image).await {
            Ok(_) => Ok(image.clone()),
            Err(e) if docker_client::is_not_found(&e) => Err(RuntimeError::ImageBuild {
                service: "probe".to_owned(),
                message: format!(
                    "AF_PROBE_IMAGE names {image}, which is not on this Docker host (nothing is pulled); nothing was created"
                ),
                tail: Vec::new(),
            }),
            Err(e) => Err(RuntimeError::engine("inspect the probe image", e)),
        },
        ProbeSource::Binary(explicit) => {
            let binary = images::find_static_binary(
                PROBE_BINARY,
                "af-fixtures",
                "probe",
                explicit.as_deref(),
            )?;
            images::ensure_scratch_image(
                docker,
                "probe",
                PROBE_BINARY,
                &[(PROBE_BINARY, &binary)],
                PROBE_IMAGE_KIND,
                progress,
            )
            .await
        }
    }
}
