//! Images: the sidecar image made from the project's own static binaries `FROM scratch`, and
//! service images built from each service's context. No registry is assumed: nothing is pulled.

use std::collections::{HashMap, VecDeque};
use std::path::{Path, PathBuf};

use bollard::Docker;
use bollard::query_parameters::{
    BuildImageOptionsBuilder, ListImagesOptionsBuilder, RemoveImageOptions, TagImageOptionsBuilder,
};
use futures_util::StreamExt;
use sha2::{Digest, Sha256};

use super::client::is_not_found;
use super::labels::kind;
use crate::plan::{ServicePlan, short_digest};
use crate::runtime::labels::{CONFIG, KIND, MANAGED};
use crate::runtime::{Phase, Progress, RuntimeError};
use crate::secret::hex;

/// The static target triple the project's image binaries are built for.
pub const STATIC_TARGET: &str = "x86_64-unknown-linux-gnu";

/// The sidecar binary's file name.
pub const PROXY_BINARY: &str = "af-proxy";
/// The forwarder's file name (built with the sidecar, shipped in the same image).
pub const FORWARD_BINARY: &str = "af-forward";

/// Lines of build output kept for an error.
const TAIL_LINES: usize = 20;

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

/// Find the static `af-proxy`: `AF_PROXY_BINARY` (given as `explicit`), next to the running
/// `af`, then `$CARGO_TARGET_DIR` or the workspace's `target/`, under the static target.
pub fn find_proxy_binary(explicit: Option<&Path>) -> Result<PathBuf, RuntimeError> {
    find_static_binary(PROXY_BINARY, "af-proxy", "sidecar", explicit)
}

/// Find the static binary `file` of cargo package `package`, for the image of `what`:
/// `explicit` when given, else next to the running `af`, then `$CARGO_TARGET_DIR` or the
/// workspace's `target/`, under the static target.
pub fn find_static_binary(
    file: &str,
    package: &str,
    what: &str,
    explicit: Option<&Path>,
) -> Result<PathBuf, RuntimeError> {
    let mut tried = Vec::new();
    let mut candidates: Vec<PathBuf> = Vec::new();
    if let Some(p) = explicit {
        candidates.push(p.to_owned());
    } else {
        if let Ok(exe) = std::env::current_exe()
            && let Some(dir) = exe.parent()
        {
            candidates.push(dir.join(file));
        }
        if let Some(dir) = std::env::var_os("CARGO_TARGET_DIR") {
            candidates.push(
                Path::new(&dir)
                    .join(STATIC_TARGET)
                    .join("release")
                    .join(file),
            );
        }
        let workspace = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        candidates.push(
            workspace
                .join("target")
                .join(STATIC_TARGET)
                .join("release")
                .join(file),
        );
    }
    for c in candidates {
        match is_static_elf(&c) {
            Ok(true) => return Ok(c),
            Ok(false) => tried.push(format!("{} (not statically linked)", c.display())),
            Err(_) => tried.push(format!("{} (missing)", c.display())),
        }
    }
    Err(RuntimeError::ImageBuild {
        service: what.to_owned(),
        message: format!(
            "no static {file} binary was found; tried {}",
            tried.join(", ")
        ),
        tail: vec![format!(
            "build it with: RUSTFLAGS='-C target-feature=+crt-static' cargo build --release --target {STATIC_TARGET} -p {package}"
        )],
    })
}

/// The bytes of a file read for its ELF header and program headers, which a linker puts at
/// the start (a table further in makes the file read as not static).
const ELF_HEADERS_READ: u64 = 64 * 1024;

/// Whether `path` is an ELF executable with no program interpreter (so it runs `FROM scratch`).
pub fn is_static_elf(path: &Path) -> std::io::Result<bool> {
    let mut head = Vec::new();
    std::io::Read::read_to_end(
        &mut std::io::Read::take(std::fs::File::open(path)?, ELF_HEADERS_READ),
        &mut head,
    )?;
    Ok(elf_is_static(&head))
}

fn elf_is_static(b: &[u8]) -> bool {
    // 64-bit little-endian ELF only (the static target is x86_64).
    if b.len() < 64 || &b[..4] != b"\x7fELF" || b[4] != 2 || b[5] != 1 {
        return false;
    }
    let u16_at = |o: usize| b.get(o..o + 2).map(|s| u16::from_le_bytes([s[0], s[1]]));
    let u64_at = |o: usize| {
        b.get(o..o + 8)
            .and_then(|s| <[u8; 8]>::try_from(s).ok())
            .map(u64::from_le_bytes)
    };
    let (Some(phoff), Some(phentsize), Some(phnum)) = (u64_at(0x20), u16_at(0x36), u16_at(0x38))
    else {
        return false;
    };
    const PT_INTERP: u32 = 3;
    for i in 0..usize::from(phnum) {
        let Some(off) = usize::try_from(phoff)
            .ok()
            .and_then(|p| p.checked_add(i * usize::from(phentsize)))
        else {
            return false;
        };
        let Some(kind) = b.get(off..off + 4) else {
            return false;
        };
        if u32::from_le_bytes([kind[0], kind[1], kind[2], kind[3]]) == PT_INTERP {
            return false;
        }
    }
    true
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

async fn build(
    docker: &Docker,
    service: &str,
    tag: &str,
    dockerfile: Option<&str>,
    labels: &HashMap<String, String>,
    context: Vec<u8>,
    progress: &dyn Progress,
) -> Result<(), RuntimeError> {
    let options = BuildImageOptionsBuilder::default()
        .dockerfile(dockerfile.unwrap_or("Dockerfile"))
        .t(tag)
        .rm(true)
        .forcerm(true)
        .labels(labels)
        .build();
    let mut stream = docker.build_image(options, None, Some(bollard::body_full(context.into())));
    let mut tail: VecDeque<String> = VecDeque::with_capacity(TAIL_LINES);
    let keep = |line: &str, tail: &mut VecDeque<String>| {
        for l in line.lines().map(str::trim_end).filter(|l| !l.is_empty()) {
            if tail.len() == TAIL_LINES {
                tail.pop_front();
            }
            tail.push_back(l.to_owned());
            progress.phase(service, Phase::Building { line: l });
        }
    };
    while let Some(item) = stream.next().await {
        let info = match item {
            Ok(info) => info,
            Err(bollard::errors::Error::DockerStreamError { error }) => {
                keep(&error, &mut tail);
                return Err(build_failed(service, error, tail));
            }
            Err(e) => {
                let message = e.to_string();
                keep(&message, &mut tail);
                return Err(build_failed(service, message, tail));
            }
        };
        if let Some(line) = info.stream.as_deref() {
            keep(line, &mut tail);
        }
        if let Some(detail) = info.error_detail {
            let message = detail
                .message
                .unwrap_or_else(|| "the build failed".to_owned());
            keep(&message, &mut tail);
            return Err(build_failed(service, message, tail));
        }
    }
    Ok(())
}

fn build_failed(service: &str, message: String, tail: VecDeque<String>) -> RuntimeError {
    RuntimeError::ImageBuild {
        service: service.to_owned(),
        message: message.trim().to_owned(),
        tail: tail.into_iter().collect(),
    }
}

/// A tar archive of in-memory files.
pub fn tar_of(files: &[(&str, &[u8], u32)]) -> std::io::Result<Vec<u8>> {
    let mut builder = tar::Builder::new(Vec::new());
    for (path, bytes, mode) in files {
        let mut header = tar::Header::new_gnu();
        header.set_size(bytes.len() as u64);
        header.set_mode(*mode);
        header.set_mtime(0);
        header.set_cksum();
        builder.append_data(&mut header, path, *bytes)?;
    }
    builder.into_inner()
}

/// A tar archive of a build context directory (symlinks kept as links, a sparse file written
/// whole: Docker 20.10 refuses GNU sparse entries, "unhandled tar header type 83").
fn tar_dir(dir: &Path) -> std::io::Result<Vec<u8>> {
    let mut builder = tar::Builder::new(Vec::new());
    builder.follow_symlinks(false);
    builder.sparse(false);
    builder.append_dir_all(".", dir)?;
    builder.into_inner()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_test_binary_is_dynamic_or_static_and_garbage_is_neither() {
        assert!(!elf_is_static(
            b"not an elf at all, long enough to look at the header fields ok"
        ));
        assert!(!elf_is_static(&[]));
        // /bin/sh on the build machine is dynamically linked.
        if let Ok(false) = is_static_elf(Path::new("/bin/sh")) {
        } else {
            panic!("/bin/sh should read as dynamic");
        }
    }

    /// A 64-bit little-endian ELF header with one program header of type `kind` after it.
    fn elf_with_program_header(kind: u32) -> Vec<u8> {
        let mut b = vec![0u8; 64 + 56];
        b[..6].copy_from_slice(b"\x7fELF\x02\x01");
        b[0x20..0x28].copy_from_slice(&64u64.to_le_bytes());
        b[0x36..0x38].copy_from_slice(&56u16.to_le_bytes());
        b[0x38..0x3a].copy_from_slice(&1u16.to_le_bytes());
        b[64..68].copy_from_slice(&kind.to_le_bytes());
        b
    }

    #[test]
    fn a_large_file_is_judged_by_its_headers_alone() {
        const PT_LOAD: u32 = 1;
        const PT_INTERP: u32 = 3;
        let dir = tempfile::tempdir().expect("temp dir");
        for (kind, is_static) in [(PT_LOAD, true), (PT_INTERP, false)] {
            let mut bytes = elf_with_program_header(kind);
            assert_eq!(elf_is_static(&bytes), is_static, "{kind}");
            // A binary's size is mostly code and debug information after the headers.
            bytes.resize(8 << 20, 0xcc);
            let path = dir.path().join(format!("binary-{kind}"));
            std::fs::write(&path, &bytes).expect("write");
            assert_eq!(is_static_elf(&path).expect("read"), is_static, "{kind}");
        }
    }

    #[test]
    fn a_sparse_file_in_a_context_is_archived_as_a_plain_file_with_its_holes_as_zeros() {
        use std::io::{Seek, SeekFrom, Write};
        use std::os::unix::fs::MetadataExt;

        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("binary");
        let mut file = std::fs::File::create(&path).expect("create");
        file.write_all(b"head").expect("write");
        file.seek(SeekFrom::Start(4 << 20)).expect("seek");
        file.write_all(b"tail").expect("write");
        drop(file);
        let meta = std::fs::metadata(&path).expect("metadata");
        // The control: the file really has a hole on this file system.
        assert!(meta.blocks() * 512 < meta.size(), "{meta:?} is not sparse");

        let bytes = tar_dir(dir.path()).expect("tar");
        let mut archive = tar::Archive::new(bytes.as_slice());
        let mut files = 0;
        for entry in archive.entries().expect("entries") {
            let mut entry = entry.expect("entry");
            let kind = entry.header().entry_type();
            assert!(!kind.is_gnu_sparse(), "{:?} archived sparse", entry.path());
            if kind.is_file() {
                let mut content = Vec::new();
                std::io::Read::read_to_end(&mut entry, &mut content).expect("read");
                assert_eq!(content.len(), (4 << 20) + 4);
                assert!(content.starts_with(b"head") && content.ends_with(b"tail"));
                assert!(content[4..4 << 20].iter().all(|&b| b == 0));
                files += 1;
            }
        }
        assert_eq!(files, 1);
    }

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

    #[test]
    fn in_memory_tar_holds_its_files() {
        let bytes = tar_of(&[("a", b"hello", 0o600)]).expect("tar");
        let mut archive = tar::Archive::new(bytes.as_slice());
        let entry = archive
            .entries()
            .expect("entries")
            .next()
            .expect("one")
            .expect("ok");
        assert_eq!(entry.header().mode().expect("mode"), 0o600);
    }
}
