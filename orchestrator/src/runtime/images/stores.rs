//! The system stores an image has: the text of each of [`SYSTEM_STORES`] read from a
//! container that is created and never started, so both runtimes can write the environment CA
//! into the stores the image really has (the local runtime over its container's own files, the
//! Kubernetes runtime as files mounted over them).

use bollard::Docker;
use bollard::models::ContainerCreateBody;
use bollard::query_parameters::{
    CreateContainerOptionsBuilder, DownloadFromContainerOptionsBuilder,
    RemoveContainerOptionsBuilder,
};
use futures_util::StreamExt;

use crate::runtime::RuntimeError;
use crate::runtime::docker_client::is_not_found;
use crate::runtime::labels::{KIND, MANAGED};
use crate::trust::store::{ImageFile, MAX_STORE_BYTES, SYSTEM_STORES};

/// The `dev.antifailure.kind` of the throwaway container a store is read from.
const STORE_READER: &str = "store-reader";

/// Each of [`SYSTEM_STORES`] as `image` has it, read from a container made from it, never
/// started, and removed again.
pub async fn system_stores(
    docker: &Docker,
    image: &str,
    reader: &str,
) -> Result<Vec<(&'static str, ImageFile)>, RuntimeError> {
    let options = CreateContainerOptionsBuilder::default()
        .name(reader)
        .build();
    let body = ContainerCreateBody {
        image: Some(image.to_owned()),
        // Never run: a command is needed to create a container of an image without one.
        cmd: Some(vec!["/af-never-run".to_owned()]),
        labels: Some(
            [(MANAGED, "true"), (KIND, STORE_READER)]
                .into_iter()
                .map(|(k, v)| (k.to_owned(), v.to_owned()))
                .collect(),
        ),
        ..ContainerCreateBody::default()
    };
    docker
        .create_container(Some(options), body)
        .await
        .map_err(|e| RuntimeError::engine(format!("create container {reader} of {image}"), e))?;
    let found = stores_in(docker, reader).await;
    let removed = remove(docker, reader).await;
    let found = found?;
    removed.map(|()| found)
}

/// Each of [`SYSTEM_STORES`] as the created (not yet started) container `name` has it.
pub async fn stores_in(
    docker: &Docker,
    name: &str,
) -> Result<Vec<(&'static str, ImageFile)>, RuntimeError> {
    let mut found = Vec::with_capacity(SYSTEM_STORES.len());
    for path in SYSTEM_STORES {
        found.push((path, read_file(docker, name, path).await?));
    }
    Ok(found)
}

/// Remove the reader container `name`, if it is there.
async fn remove(docker: &Docker, name: &str) -> Result<(), RuntimeError> {
    let options = RemoveContainerOptionsBuilder::default().force(true).build();
    match docker.remove_container(name, Some(options)).await {
        Err(e) if !is_not_found(&e) => {
            Err(RuntimeError::engine(format!("remove container {name}"), e))
        }
        _ => Ok(()),
    }
}

/// The text of the regular file at `path` in a (created, not yet started) container, read
/// through the Docker API; [`ImageFile::Leave`] when it is absent, a link, not UTF-8, or
/// larger than [`MAX_STORE_BYTES`] (the download stops there).
async fn read_file(docker: &Docker, name: &str, path: &str) -> Result<ImageFile, RuntimeError> {
    let options = DownloadFromContainerOptionsBuilder::default()
        .path(path)
        .build();
    let mut archive = Vec::new();
    let mut stream = docker.download_from_container(name, Some(options));
    while let Some(chunk) = stream.next().await {
        match chunk {
            Ok(bytes) => archive.extend_from_slice(&bytes),
            Err(e) if is_not_found(&e) => return Ok(ImageFile::Leave),
            Err(e) => return Err(RuntimeError::engine(format!("read {path} in {name}"), e)),
        }
        // The tar headers and padding are a few KiB above the file itself.
        if archive.len() > MAX_STORE_BYTES + 64 * 1024 {
            return Ok(ImageFile::Leave);
        }
    }
    Ok(regular_file(&archive))
}

/// The first entry of a tar archive when it is a regular file of UTF-8 text.
fn regular_file(archive: &[u8]) -> ImageFile {
    let mut archive = tar::Archive::new(archive);
    let Some(Ok(mut entry)) = archive.entries().ok().and_then(|mut e| e.next()) else {
        return ImageFile::Leave;
    };
    if !entry.header().entry_type().is_file() {
        return ImageFile::Leave;
    }
    let mut text = String::new();
    match std::io::Read::read_to_string(&mut entry, &mut text) {
        Ok(_) if text.len() <= MAX_STORE_BYTES => ImageFile::File(text),
        _ => ImageFile::Leave,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn archive(entry_type: tar::EntryType, bytes: &[u8]) -> Vec<u8> {
        let mut builder = tar::Builder::new(Vec::new());
        let mut header = tar::Header::new_gnu();
        header.set_entry_type(entry_type);
        header.set_size(bytes.len() as u64);
        header.set_mode(0o644);
        if entry_type == tar::EntryType::Symlink {
            header
                .set_link_name("../../pki/ca-trust/extracted/pem/tls-ca-bundle.pem")
                .expect("link");
        }
        header.set_cksum();
        builder
            .append_data(&mut header, "ca-bundle.crt", bytes)
            .expect("append");
        builder.into_inner().expect("tar")
    }

    #[test]
    fn a_regular_store_is_read_and_a_link_or_binary_is_left_alone() {
        let pem = "-----BEGIN CERTIFICATE-----\nUk9PVA==\n-----END CERTIFICATE-----\n";
        assert_eq!(
            regular_file(&archive(tar::EntryType::Regular, pem.as_bytes())),
            ImageFile::File(pem.to_owned())
        );
        assert_eq!(
            regular_file(&archive(tar::EntryType::Symlink, b"")),
            ImageFile::Leave
        );
        assert_eq!(
            regular_file(&archive(tar::EntryType::Regular, &[0xff, 0xfe, 0x00])),
            ImageFile::Leave
        );
        assert_eq!(regular_file(b"not a tar archive"), ImageFile::Leave);
    }
}
