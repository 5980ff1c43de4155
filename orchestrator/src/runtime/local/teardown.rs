//! `down`: remove everything carrying the environment's label, containers first (networks
//! cannot go while something is attached), then networks, volumes, and the images an earlier
//! af built for the environment alone (service images are now a shared build cache, kept: see
//! `images.rs`). Every failure is collected and teardown goes on; the caller reports what is
//! left (AF-RUN-030).

use bollard::Docker;
use bollard::models::ImageSummary;
use bollard::query_parameters::{
    ListImagesOptionsBuilder, ListVolumesOptionsBuilder, RemoveImageOptionsBuilder,
    RemoveVolumeOptions,
};

use super::labels::Names;
use super::{containers, networks};
use crate::runtime::docker_client::is_not_found;
use crate::runtime::{DownReport, Phase, Progress, RuntimeError};

/// Names of the volumes carrying the environment's labels.
pub async fn owned_volumes(docker: &Docker, names: &Names) -> Result<Vec<String>, RuntimeError> {
    let options = ListVolumesOptionsBuilder::default()
        .filters(&names.filter())
        .build();
    let list = docker
        .list_volumes(Some(options))
        .await
        .map_err(|e| RuntimeError::engine("list volumes", e))?;
    Ok(list
        .volumes
        .unwrap_or_default()
        .into_iter()
        .map(|v| v.name)
        .collect())
}

/// The images carrying the environment's labels.
pub async fn owned_images(
    docker: &Docker,
    names: &Names,
) -> Result<Vec<ImageSummary>, RuntimeError> {
    let options = ListImagesOptionsBuilder::default()
        .filters(&names.filter())
        .build();
    docker
        .list_images(Some(options))
        .await
        .map_err(|e| RuntimeError::engine("list images", e))
}

/// Remove the environment's containers, networks, volumes and images.
/// Each is named to `progress` as it is removed.
pub async fn down(
    docker: &Docker,
    names: &Names,
    progress: &dyn Progress,
) -> Result<DownReport, RuntimeError> {
    let removing = |what: &str| progress.phase(what, Phase::Removing);
    let mut report = DownReport::default();
    for c in containers::owned(docker, names).await? {
        removing(&format!("container {}", c.name));
        match containers::remove(docker, &c.name).await {
            Ok(()) => report.removed.push(format!("container {}", c.name)),
            Err(e) => report
                .failed
                .push((format!("container {}", c.name), e.to_string())),
        }
    }
    for (name, _) in networks::owned(docker, names).await? {
        removing(&format!("network {name}"));
        match docker.remove_network(&name).await {
            Ok(()) => report.removed.push(format!("network {name}")),
            Err(e) if is_not_found(&e) => {}
            Err(e) => report
                .failed
                .push((format!("network {name}"), e.to_string())),
        }
    }
    for name in owned_volumes(docker, names).await? {
        removing(&format!("volume {name}"));
        match docker
            .remove_volume(&name, None::<RemoveVolumeOptions>)
            .await
        {
            Ok(()) => report.removed.push(format!("volume {name}")),
            Err(e) if is_not_found(&e) => {}
            Err(e) => report
                .failed
                .push((format!("volume {name}"), e.to_string())),
        }
    }
    let images = owned_images(docker, names).await?;
    // By tag, so an image that somehow also carries another name keeps that name.
    let prefix = format!("af/{}/", names.env());
    for image in images {
        let mut refs: Vec<String> = image
            .repo_tags
            .iter()
            .filter(|t| t.starts_with(&prefix))
            .cloned()
            .collect();
        if refs.is_empty() {
            refs.push(image.id.clone());
        }
        for name in refs {
            removing(&format!("image {name}"));
            let options = RemoveImageOptionsBuilder::default().build();
            match docker.remove_image(&name, Some(options), None).await {
                Ok(_) => report.removed.push(format!("image {name}")),
                Err(e) if is_not_found(&e) => {}
                Err(e) => report.failed.push((format!("image {name}"), e.to_string())),
            }
        }
    }
    Ok(report)
}
