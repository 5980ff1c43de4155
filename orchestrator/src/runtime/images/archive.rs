//! Build contexts as tar archives: files held in memory, or a directory as it is on disk.

use std::path::Path;

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
pub(super) fn tar_dir(dir: &Path) -> std::io::Result<Vec<u8>> {
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
