//! Environment ids: derived from the repository and branch, stable across commands.
//!
//! An id is one DNS label (at most [`MAX_LEN`] characters, lower-case letters, digits and
//! `-`), so it can prefix every object name a runtime makes and still leave room for the
//! service name. The short hash keeps two checkouts of one project on one machine apart.

use std::fmt;
use std::path::Path;
use std::process::Command;

use sha2::{Digest, Sha256};

use crate::secret::hex;

/// The longest environment id: every object name a runtime makes is the id, a role and a
/// service name in one 63-character DNS label (Kubernetes namespaces, Services and Docker's
/// network aliases all hold names to that).
pub const MAX_LEN: usize = 30;

/// How much of the project name a long branch name can never take away.
const PROJECT_KEPT: usize = 10;

/// An environment id: one DNS label.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
#[serde(transparent)]
pub struct EnvId(String);

/// Why a given id was refused.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error(
    "{0:?} is not an environment id: use 1-{MAX_LEN} lower-case letters, digits or '-', not starting or ending with '-'"
)]
pub struct BadEnvId(pub String);

impl EnvId {
    /// An id given by the user (`--env`), checked.
    pub fn parse(text: &str) -> Result<EnvId, BadEnvId> {
        let ok = !text.is_empty()
            && text.len() <= MAX_LEN
            && text
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
            && !text.starts_with('-')
            && !text.ends_with('-');
        if ok {
            Ok(EnvId(text.to_owned()))
        } else {
            Err(BadEnvId(text.to_owned()))
        }
    }

    /// The default id of the repository containing `dir`: project name, branch, and a short
    /// hash of the repository's path and branch.
    pub fn derive(project: &str, dir: &Path) -> EnvId {
        let root = repository_root(dir);
        let branch = git(dir, &["rev-parse", "--abbrev-ref", "HEAD"])
            .filter(|b| b != "HEAD")
            .unwrap_or_else(|| "nobranch".to_owned());
        Self::from_parts(project, &root, &branch)
    }

    /// The id for a project, repository root and branch (what [`EnvId::derive`] computes).
    pub fn from_parts(project: &str, root: &str, branch: &str) -> EnvId {
        let mut hasher = Sha256::new();
        hasher.update(root.as_bytes());
        hasher.update([0]);
        hasher.update(branch.as_bytes());
        let digest = hasher.finalize();
        let hash = hex(&digest[..3]);
        // The project and the branch share what the hash leaves; both are kept whole when
        // they fit, else the project keeps at least PROJECT_KEPT and the branch the rest.
        let budget = MAX_LEN - 2 - hash.len();
        let (project, branch) = (slug(project, budget), slug(branch, budget));
        let project_len = project
            .len()
            .min(PROJECT_KEPT.max(budget.saturating_sub(branch.len())));
        let project = slug(&project, project_len);
        let branch = slug(&branch, budget - project.len().max(1));
        let mut id = String::new();
        for part in [project.as_str(), branch.as_str(), hash.as_str()] {
            if part.is_empty() {
                continue;
            }
            if !id.is_empty() {
                id.push('-');
            }
            id.push_str(part);
        }
        EnvId(id)
    }

    /// The id as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for EnvId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// The repository `dir` is in: its root, or `dir` itself outside one.
pub fn repository_root(dir: &Path) -> String {
    git(dir, &["rev-parse", "--show-toplevel"])
        .unwrap_or_else(|| dir.to_string_lossy().into_owned())
}

/// Lower-case, `[a-z0-9-]` only, no leading/trailing/double `-`, at most `max` characters.
fn slug(text: &str, max: usize) -> String {
    let mut out = String::new();
    for c in text.chars() {
        let c = c.to_ascii_lowercase();
        if c.is_ascii_lowercase() || c.is_ascii_digit() {
            out.push(c);
        } else if !out.is_empty() && !out.ends_with('-') {
            out.push('-');
        }
        if out.len() >= max {
            break;
        }
    }
    out.truncate(max);
    out.trim_matches('-').to_owned()
}

fn git(dir: &Path, args: &[&str]) -> Option<String> {
    let out = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(args)
        .output()
        .ok()?;
    if !out.status.success() {
        return None;
    }
    let text = String::from_utf8(out.stdout).ok()?.trim().to_owned();
    (!text.is_empty()).then_some(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn derived_ids_are_stable_short_dns_labels() {
        let a = EnvId::from_parts("Shop", "/src/shop", "feature/Checkout_v2");
        let b = EnvId::from_parts("Shop", "/src/shop", "feature/Checkout_v2");
        assert_eq!(a, b);
        assert!(a.as_str().starts_with("shop-feature-che"), "{a}");
        assert!(EnvId::parse(a.as_str()).is_ok(), "{a}");
        let long = EnvId::from_parts(&"p".repeat(80), "/x", &"b".repeat(80));
        assert!(long.as_str().len() <= MAX_LEN && EnvId::parse(long.as_str()).is_ok());
    }

    #[test]
    fn a_long_project_name_is_kept_whole_when_the_branch_leaves_room() {
        let id = EnvId::from_parts("payments-gateway", "/src/pay", "main");
        assert!(id.as_str().starts_with("payments-gateway-main-"), "{id}");
        let id = EnvId::from_parts("payments-gateway", "/src/pay", "feature/long-branch-name");
        assert!(id.as_str().starts_with("payments-g-feature-long-"), "{id}");
        assert_eq!(id.as_str().len(), MAX_LEN, "{id}");
        let short = EnvId::from_parts("shop", "/src/shop", "feature/long-branch-name-here");
        assert!(
            short.as_str().starts_with("shop-feature-long-branc-"),
            "{short}"
        );
    }

    #[test]
    fn other_branch_or_checkout_gets_another_id() {
        let a = EnvId::from_parts("shop", "/src/shop", "main");
        assert_ne!(a, EnvId::from_parts("shop", "/src/shop", "dev"));
        assert_ne!(a, EnvId::from_parts("shop", "/tmp/shop", "main"));
    }

    #[test]
    fn given_ids_are_checked() {
        for bad in ["", "-a", "a-", "A", "a_b", &"a".repeat(31)] {
            assert!(EnvId::parse(bad).is_err(), "{bad}");
        }
        assert!(EnvId::parse("pr-42").is_ok());
    }
}
