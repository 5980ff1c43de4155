//! Finding and reading the organization policy: the file `AF_ORG_POLICY` names, else
//! `af/org-policy.yaml` in the user's configuration directory (`$XDG_CONFIG_HOME`, else
//! `~/.config`), else none. It lives outside the repository, so a fork cannot relax it.

use std::path::{Path, PathBuf};

use af_policy::error::{Report, codes};
use af_policy::manifest::Problem;
use af_policy::placement::residency::OrgPolicy;
use etcetera::BaseStrategy;

use crate::bounded;

/// The variable naming the policy file.
pub const ENV: &str = "AF_ORG_POLICY";

/// The largest policy file read, in bytes (64 KiB): it holds a list of regions.
pub const MAX_BYTES: u64 = 64 * 1024;

/// The organization policy in force, or where one was looked for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Found {
    /// No policy: `AF_ORG_POLICY` is unset and the default file does not exist.
    None {
        /// The default file that was looked for, if a configuration directory is known.
        looked_in: Option<PathBuf>,
    },
    /// The policy read from `path`.
    Policy {
        /// The file.
        path: PathBuf,
        /// What it says.
        policy: OrgPolicy,
    },
}

/// Why the policy could not be used.
#[derive(Debug)]
pub enum OrgPolicyError {
    /// The file could not be read (AF-SCH-010).
    Unreadable(Report),
    /// The file was read and refused at these positions.
    Invalid {
        /// The file.
        path: PathBuf,
        /// Every problem, sorted by position.
        problems: Vec<Problem>,
    },
}

/// The policy in force for this process.
pub fn load() -> Result<Found, OrgPolicyError> {
    if let Some(path) = std::env::var_os(ENV).filter(|p| !p.is_empty()) {
        return read(Path::new(&path));
    }
    let default = default_path();
    match default {
        Some(path) if path.is_file() => read(&path),
        looked_in => Ok(Found::None { looked_in }),
    }
}

/// `af/org-policy.yaml` in the user's configuration directory.
pub fn default_path() -> Option<PathBuf> {
    etcetera::choose_base_strategy()
        .ok()
        .map(|dirs| dirs.config_dir().join("af").join("org-policy.yaml"))
}

fn read(path: &Path) -> Result<Found, OrgPolicyError> {
    let unreadable = |e: std::io::Error| {
        OrgPolicyError::Unreadable(Report::new(
            &codes::SCH_ORG_POLICY,
            format!(
                "The organization policy {} could not be read: {e}.",
                path.display()
            ),
        ))
    };
    let text = bounded::read_to_string(path, MAX_BYTES).map_err(unreadable)?;
    OrgPolicy::from_str(&text)
        .map(|policy| Found::Policy {
            path: path.to_owned(),
            policy,
        })
        .map_err(|problems| OrgPolicyError::Invalid {
            path: path.to_owned(),
            problems,
        })
}
