//! Prebuilt service images (`image:` in af.yaml): the one this machine's Docker daemon holds,
//! or pulled with the user's own Docker credentials, progress shown. A service built from a
//! context goes to [`build_service_image`](super::build_service_image) instead;
//! [`service_image`] chooses.

use bollard::Docker;
use bollard::query_parameters::CreateImageOptionsBuilder;
use futures_util::StreamExt;
use oci_spec::distribution::Reference;

use super::registry::{Credentials, Repository, daemon_said};
use crate::plan::ServicePlan;
use crate::runtime::docker_client::is_not_found;
use crate::runtime::{Progress, RuntimeError};

/// The id of `service`'s image: its prebuilt one (held or pulled), or the one built from its
/// context.
pub async fn service_image(
    docker: &Docker,
    service: &ServicePlan,
    progress: &dyn Progress,
) -> Result<String, RuntimeError> {
    match &service.image {
        Some(reference) => prebuilt_image(docker, &service.name, reference, progress).await,
        None => super::build_service_image(docker, service, progress).await,
    }
}

/// The id of the image `reference` names on this machine's daemon, pulled first when the daemon
/// does not hold it. Refused (AF-RUN-015) naming the image when it can be neither.
pub async fn prebuilt_image(
    docker: &Docker,
    service: &str,
    reference: &str,
    progress: &dyn Progress,
) -> Result<String, RuntimeError> {
    if let Some(id) = held(docker, service, reference).await? {
        return Ok(id);
    }
    let missing = |message: String| RuntimeError::ImageMissing {
        service: service.to_owned(),
        image: reference.to_owned(),
        message,
    };
    let parsed: Reference = reference
        .parse()
        .map_err(|e| missing(format!("it is not an image reference ({e})")))?;
    let repository = Repository::parse(&format!("{}/{}", parsed.registry(), parsed.repository()))
        .map_err(|_| missing("its registry is not one Docker can name".to_owned()))?;
    let credentials = Credentials::of_docker(&repository).unwrap_or_else(|_| Credentials::none());
    progress.begin(&format!("pulling {service} image {reference}"))?;
    let options = CreateImageOptionsBuilder::default()
        .from_image(reference)
        .build();
    let mut pulling = docker.create_image(Some(options), None, credentials.docker());
    let mut layers = 0;
    while let Some(item) = pulling.next().await {
        let info = item.map_err(|e| missing(credentials.scrub(&daemon_said(&e))))?;
        if info.status.as_deref() == Some("Pull complete") {
            layers += 1;
        }
    }
    let id = held(docker, service, reference)
        .await?
        .ok_or_else(|| missing("the daemon does not hold it after its pull".to_owned()))?;
    progress.step(&format!(
        "{service}: pulled {reference} ({layers} layer(s))"
    ));
    Ok(id)
}

/// The id of the image the daemon holds under `reference`, if any.
async fn held(
    docker: &Docker,
    service: &str,
    reference: &str,
) -> Result<Option<String>, RuntimeError> {
    match docker.inspect_image(reference).await {
        Ok(image) => Ok(Some(image.id.unwrap_or_else(|| reference.to_owned()))),
        Err(e) if is_not_found(&e) => Ok(None),
        Err(e) => Err(RuntimeError::engine(
            format!("inspect the image {reference} of {service}"),
            e,
        )),
    }
}
