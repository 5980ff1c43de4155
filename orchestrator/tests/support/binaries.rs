//! The static binaries the images are built from (af-proxy and the fixtures' programs), built
//! with the project's one static command unless `AF_TEST_BINARIES` names them.

use std::path::PathBuf;

use af_fixtures::cargo::{self, Linkage, STATIC_TARGET};

/// The directory holding the static binaries, built with the project's one static command.
/// `AF_TEST_BINARIES` names a directory of already built ones instead (a shared target
/// directory that other worktrees also build into would otherwise be rebuilt on every run).
pub(crate) fn static_binaries() -> PathBuf {
    if let Some(dir) = std::env::var_os("AF_TEST_BINARIES") {
        return PathBuf::from(dir);
    }
    let root = cargo::workspace_root();
    // Concurrent test processes may both build: cargo's own lock serialises them.
    for package in [
        &["-p", "af-proxy"][..],
        &["-p", "af-fixtures", "--bins"][..],
    ] {
        let status = cargo::command(&root, Linkage::Static)
            .args(["build", "--release", "--target", STATIC_TARGET])
            .args(package)
            .status()
            .unwrap_or_else(|e| panic!("cargo build {package:?}: {e}"));
        assert!(status.success(), "static build of {package:?} failed");
    }
    cargo::static_release_dir(&root)
}
