//! Images `FROM scratch` of the project's own static binaries, built once per content and
//! shared by environments: the sidecar's (`af-proxy` and `af-forward`), and any other a
//! runtime names (the Kubernetes runtime's probe).

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use bollard::Docker;
use sha2::{Digest, Sha256};

use super::archive::tar_of;
use super::build::build;
use super::kind;
use super::static_binaries::{FORWARD_BINARY, PROXY_BINARY, find_proxy_binary, is_static_elf};
use crate::runtime::docker_client::is_not_found;
use crate::runtime::labels::{KIND, MANAGED};
use crate::runtime::{Progress, RuntimeError};
use crate::secret::hex;

/// Where the sidecar image comes from.
#[derive(Debug, Clone)]
pub enum SidecarSource {
    /// A prebuilt image (`AF_PROXY_IMAGE`); it must hold `/af-proxy` and `/af-forward`.
    Image(String),
    /// Build from this static `af-proxy` (its `af-forward` sits next to it).
    Binary(PathBuf),
    /// Look the binary up: next to the `af` executable, then the static target directory.
    Lookup,
}

/// Make sure the sidecar image exists; returns its reference.
pub async fn ensure_sidecar_image(
    docker: &Docker,
    source: &SidecarSource,
    progress: &dyn Progress,
) -> Result<String, RuntimeError> {
    let binary = match source {
        SidecarSource::Image(image) => {
            return match docker.inspect_image(image).await {
                Ok(_) => Ok(image.clone()),
                Err(e) if is_not_found(&e) => Err(RuntimeError::ImageBuild {
                    service: "sidecar".to_owned(),
                    message: format!(
                        "AF_PROXY_IMAGE names {image}, which is not on this Docker host (nothing is pulled)"
                    ),
                    tail: Vec::new(),
                }),
                Err(e) => Err(RuntimeError::engine("inspect the sidecar image", e)),
            };
        }
        SidecarSource::Binary(p) => {
            if !is_static_elf(p).unwrap_or(false) {
                return Err(RuntimeError::ImageBuild {
                    service: "sidecar".to_owned(),
                    message: format!(
                        "AF_PROXY_BINARY {} is missing or not statically linked",
                        p.display()
                    ),
                    tail: Vec::new(),
                });
            }
            p.clone()
        }
        SidecarSource::Lookup => find_proxy_binary(None)?,
    };
    let forward = binary.with_file_name(FORWARD_BINARY);
    ensure_scratch_image(
        docker,
        "sidecar",
        PROXY_BINARY,
        &[(PROXY_BINARY, &binary), (FORWARD_BINARY, &forward)],
        kind::SIDECAR_IMAGE,
        progress,
    )
    .await
}

/// Make sure an image `FROM scratch` holding `files` (each at `/NAME`, executable, read from
/// its path) with the first as its entrypoint exists, tagged `repo:` and a digest of the files'
/// contents, so it is built once per content and shared by environments (it carries no env
/// label). The files are hashed as they are read and held in memory only to build. Returns
/// the tag.
pub async fn ensure_scratch_image(
    docker: &Docker,
    what: &str,
    repo: &str,
    files: &[(&str, &Path)],
    kind_label: &str,
    progress: &dyn Progress,
) -> Result<String, RuntimeError> {
    let unreadable = |path: &Path, e: std::io::Error| RuntimeError::ImageBuild {
        service: what.to_owned(),
        message: format!("{} could not be read: {e}", path.display()),
        tail: Vec::new(),
    };
    let mut hasher = Sha256::new();
    for (_, path) in files {
        std::fs::File::open(path)
            .and_then(|mut file| std::io::copy(&mut file, &mut hasher))
            .map_err(|e| unreadable(path, e))?;
    }
    let tag = format!("{repo}:{}", hex(&hasher.finalize()[..6]));
    match docker.inspect_image(&tag).await {
        Ok(_) => return Ok(tag),
        Err(e) if is_not_found(&e) => {}
        Err(e) => return Err(RuntimeError::engine(format!("inspect the {what} image"), e)),
    }
    progress.begin(&format!("building {what} image {tag}"))?;
    let mut dockerfile = String::from("FROM scratch\n");
    for (name, _) in files {
        dockerfile.push_str(&format!("COPY {name} /{name}\n"));
    }
    if let Some((entry, _)) = files.first() {
        dockerfile.push_str(&format!("ENTRYPOINT [\"/{entry}\"]\n"));
    }
    let contents = files
        .iter()
        .map(|(_, path)| std::fs::read(path).map_err(|e| unreadable(path, e)))
        .collect::<Result<Vec<_>, _>>()?;
    let mut entries: Vec<(&str, &[u8], u32)> = vec![("Dockerfile", dockerfile.as_bytes(), 0o644)];
    entries.extend(
        files
            .iter()
            .zip(&contents)
            .map(|((name, _), bytes)| (*name, bytes.as_slice(), 0o755)),
    );
    let context =
        tar_of(&entries).map_err(|e| RuntimeError::engine(format!("pack the {what} image"), e))?;
    let labels = HashMap::from([
        (MANAGED.to_owned(), "true".to_owned()),
        (KIND.to_owned(), kind_label.to_owned()),
    ]);
    build(docker, what, &tag, None, &labels, context, progress).await?;
    Ok(tag)
}
