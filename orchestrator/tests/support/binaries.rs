//! The static binaries the images are built from (af-proxy and the fixtures' programs), built
//! with the project's one static command unless `AF_TEST_BINARIES` names them.

use std::path::{Path, PathBuf};
use std::process::Command;

const TARGET: &str = "x86_64-unknown-linux-gnu";

/// The directory holding the static binaries, built with the project's one static command.
/// `AF_TEST_BINARIES` names a directory of already built ones instead (a shared target
/// directory that other worktrees also build into would otherwise be rebuilt on every run).
pub(crate) fn static_binaries() -> PathBuf {
    if let Some(dir) = std::env::var_os("AF_TEST_BINARIES") {
        return PathBuf::from(dir);
    }
    // Canonical, as `.ci/run` and `fixtures/demo/up` spell it from the root: cargo keys the
    // workspace's own crates by their path, so `orchestrator/..` would rebuild them all.
    let root = std::fs::canonicalize(Path::new(env!("CARGO_MANIFEST_DIR")).join(".."))
        .unwrap_or_else(|e| panic!("the workspace root: {e}"));
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| root.join("target"));
    let dir = target.join(TARGET).join("release");
    // Concurrent test processes may both build: cargo's own lock serialises them.
    for package in [
        &["-p", "af-proxy"][..],
        &["-p", "af-fixtures", "--bins"][..],
    ] {
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
        let status = Command::new(cargo)
            .current_dir(&root)
            .env("CARGO_TARGET_DIR", &target)
            .env("RUSTFLAGS", "-C target-feature=+crt-static")
            .env_remove("CARGO_ENCODED_RUSTFLAGS")
            .args(["build", "--release", "--target", TARGET])
            .args(package)
            .status()
            .unwrap_or_else(|e| panic!("cargo build {package:?}: {e}"));
        assert!(status.success(), "static build of {package:?} failed");
    }
    dir
}
