//! Service images: each built from its service's context and Dockerfile, cached by a digest of
//! that build input, named for an environment when a runtime needs a name, and pruned to the
//! newest few.

use std::collections::HashMap;

use bollard::Docker;
use bollard::query_parameters::{
    ListImagesOptionsBuilder, RemoveImageOptions, TagImageOptionsBuilder,
};

use super::archive::tar_dir;
use super::build::build;
use super::kind;
use crate::env_id::EnvId;
use crate::plan::{ServicePlan, short_digest};
use crate::runtime::docker_client::is_not_found;
use crate::runtime::labels::{CONFIG, KIND, MANAGED};
use crate::runtime::{Progress, RuntimeError};

/// The repository of service images: one image per build input (a context as archived and the
/// Dockerfile named in it), tagged by that input's digest and shared by every environment built
/// from the same input, so `af down` leaves it for the next `af up` (the build cache).
pub const SERVICE_REPO: &str = "af-build";
/// The most service images kept: building another removes the oldest beyond this number that
/// no container uses (docs/local-runtime.md).
pub const SERVICE_IMAGES_KEPT: usize = 32;

/// The image built from `service`'s context and Dockerfile: the cached one when that input was
/// built before, else built now. Returns the image id.
pub async fn build_service_image(
    docker: &Docker,
    service: &ServicePlan,
    progress: &dyn Progress,
) -> Result<String, RuntimeError> {
    let unreadable = |e: std::io::Error| RuntimeError::ImageBuild {
        service: service.name.clone(),
        message: format!(
            "the build context {} could not be read: {e}",
            service.context.display()
        ),
        tail: Vec::new(),
    };
    let context = tar_dir(&service.context).map_err(unreadable)?;
    let digest = context_digest(&context, service.dockerfile.as_deref()).map_err(unreadable)?;
    let tag = format!("{SERVICE_REPO}:{digest}");
    let inspect = |tag: String| async move {
        match docker.inspect_image(&tag).await {
            Ok(image) => Ok(Some(image.id.unwrap_or(tag))),
            Err(e) if is_not_found(&e) => Ok(None),
            Err(e) => Err(RuntimeError::engine(
                format!("inspect the image of {}", service.name),
                e,
            )),
        }
    };
    if let Some(id) = inspect(tag.clone()).await? {
        return Ok(id);
    }
    let labels = HashMap::from([
        (MANAGED.to_owned(), "true".to_owned()),
        (KIND.to_owned(), kind::SERVICE_IMAGE.to_owned()),
        (CONFIG.to_owned(), digest),
    ]);
    progress.begin(&format!("building {} image {tag}", service.name))?;
    build(
        docker,
        &service.name,
        &tag,
        service.dockerfile.as_deref(),
        &labels,
        context,
        progress,
    )
    .await?;
    let id = inspect(tag.clone()).await?.ok_or_else(|| {
        RuntimeError::engine(
            format!("inspect the image of {}", service.name),
            "the build finished without it",
        )
    })?;
    evict_service_images(docker, SERVICE_IMAGES_KEPT).await;
    Ok(id)
}

/// The name `service`'s image goes by in the environment `env`: `af/<env>/<service>:latest`.
pub fn service_reference(env: &EnvId, service: &str) -> String {
    format!("af/{env}/{service}:latest")
}

/// Give the image `id` the name `reference` (`repo:tag`), moving the name if another image had it.
pub async fn tag(docker: &Docker, id: &str, reference: &str) -> Result<(), RuntimeError> {
    let (repo, tag) = reference.rsplit_once(':').unwrap_or((reference, "latest"));
    let options = TagImageOptionsBuilder::default()
        .repo(repo)
        .tag(tag)
        .build();
    docker
        .tag_image(id, Some(options))
        .await
        .map_err(|e| RuntimeError::engine(format!("tag the image {reference}"), e))
}

/// Remove the oldest service images beyond the newest `kept`. One a container uses is refused
/// by the engine and stays; a failure here costs a later build, so it is not an error.
async fn evict_service_images(docker: &Docker, kept: usize) {
    let filters = HashMap::from([(
        "label".to_owned(),
        vec![format!("{KIND}={}", kind::SERVICE_IMAGE)],
    )]);
    let options = ListImagesOptionsBuilder::default()
        .filters(&filters)
        .build();
    let Ok(mut images) = docker.list_images(Some(options)).await else {
        return;
    };
    images.sort_by_key(|image| std::cmp::Reverse(image.created));
    for image in images.iter().skip(kept) {
        // Refused while a container uses it: it stays, and is tried again after the next build.
        let _ = docker
            .remove_image(&image.id, None::<RemoveImageOptions>, None)
            .await;
    }
}

/// What a service image is built from, as a digest: the Dockerfile named and each entry of the
/// archived context (path, type, mode, link target, contents). Times are left out: a file
/// copied again with the same contents is the same build.
fn context_digest(context: &[u8], dockerfile: Option<&str>) -> std::io::Result<String> {
    let mut what = dockerfile.unwrap_or("Dockerfile").as_bytes().to_vec();
    what.push(0);
    let mut archive = tar::Archive::new(context);
    for entry in archive.entries()? {
        let mut entry = entry?;
        let header = entry.header();
        let (kind, mode) = (header.entry_type().as_byte(), header.mode()?);
        let link = header.link_name_bytes().map(|l| l.into_owned());
        what.extend_from_slice(&entry.path_bytes());
        what.push(0);
        what.push(kind);
        what.extend_from_slice(&mode.to_be_bytes());
        what.extend_from_slice(link.as_deref().unwrap_or_default());
        what.push(0);
        what.extend_from_slice(&entry.size().to_be_bytes());
        std::io::Read::read_to_end(&mut entry, &mut what)?;
    }
    Ok(short_digest(&what))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_context_is_the_same_build_until_a_file_or_the_dockerfile_changes() {
        let dir = tempfile::tempdir().expect("temp dir");
        let file = dir.path().join("app");
        std::fs::write(&file, b"one").expect("write");
        let digest = |dockerfile| {
            context_digest(&tar_dir(dir.path()).expect("tar"), dockerfile).expect("digest")
        };
        let first = digest(None);
        assert_eq!(digest(None), first, "nothing changed");
        assert_eq!(digest(Some("Dockerfile")), first, "the default named");
        assert_ne!(digest(Some("other.Dockerfile")), first);
        let later = std::time::SystemTime::now() + std::time::Duration::from_secs(60);
        std::fs::File::options()
            .write(true)
            .open(&file)
            .and_then(|f| f.set_modified(later))
            .expect("touch");
        assert_eq!(digest(None), first, "only a time changed");
        std::fs::write(&file, b"two").expect("write");
        assert_ne!(digest(None), first, "a file's contents changed");
        std::fs::write(&file, b"one").expect("write");
        std::fs::set_permissions(&file, std::os::unix::fs::PermissionsExt::from_mode(0o755))
            .expect("chmod");
        assert_ne!(digest(None), first, "a file's mode changed");
        std::fs::set_permissions(&file, std::os::unix::fs::PermissionsExt::from_mode(0o644))
            .expect("chmod");
        std::fs::rename(&file, dir.path().join("renamed")).expect("rename");
        assert_ne!(digest(None), first, "a file's name changed");
    }
}
