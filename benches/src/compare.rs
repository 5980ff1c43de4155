//! `--compare REV`: af-proxy built from an older revision, measured beside this tree's in the
//! same interleaved run, so a change's effect is a ratio in one table rather than two runs on
//! a noisy machine.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::error::{BenchError, Result};
use crate::systems::AfProxy;

/// The older af-proxy: its short commit and the pinned copy of its static release build.
pub(crate) struct Older {
    /// `git rev-parse --short REV`.
    pub rev: String,
    /// The binary, copied into the run's pinned directory.
    pub binary: PathBuf,
}

/// Checks `rev` out into a temporary git work tree of the repository at `root`, builds its
/// af-proxy there (into this tree's target directory, so unchanged dependencies are reused),
/// copies the binary into `pinned` and removes the work tree.
pub(crate) fn build_older(root: &Path, rev: &str, pinned: &Path) -> Result<Older> {
    let short = git(
        root,
        &["rev-parse", "--short", &format!("{rev}^{{commit}}")],
    )?;
    let parent = tempfile::Builder::new()
        .prefix("af-bench-rev-")
        .tempdir()
        .map_err(|e| BenchError::io("create the older revision's directory", e))?;
    let tree = parent.path().join(&short);
    let tree_arg = tree.to_string_lossy().into_owned();
    git(root, &["worktree", "add", "--detach", &tree_arg, &short])?;
    let built = AfProxy::build(&tree, &[])
        .and_then(|binary| AfProxy::pin(&binary, pinned, &format!("af-proxy@{short}")));
    // The work tree goes whether or not the build succeeded; git's record of it too.
    let removed = git(root, &["worktree", "remove", "--force", &tree_arg]);
    let binary = built?;
    removed?;
    Ok(Older { rev: short, binary })
}

/// `git ARGS` in `root`; its trimmed stdout.
fn git(root: &Path, args: &[&str]) -> Result<String> {
    let out = Command::new("git")
        .current_dir(root)
        .args(args)
        .output()
        .map_err(|source| BenchError::Spawn {
            program: "git".into(),
            source,
        })?;
    if !out.status.success() {
        return Err(BenchError::Git {
            command: args.join(" "),
            status: out.status.to_string(),
            stderr: String::from_utf8_lossy(&out.stderr).trim().to_owned(),
        });
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_owned())
}
