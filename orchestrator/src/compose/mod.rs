//! Adoption from Compose: a project's `docker-compose.yml` (or `compose.yaml`) read with a
//! typed model of the Compose specification, and turned into the services of an `af.yaml`
//! with everything that has no meaning here listed, service by service, with why.

mod translate;

use std::path::{Path, PathBuf};

use af_policy::error::{Report, codes};
use docker_compose_types::Compose;

pub use translate::{Adoption, Left, adopt};

/// The file names Compose looks for, in its order of preference.
pub const FILE_NAMES: [&str; 4] = [
    "compose.yaml",
    "compose.yml",
    "docker-compose.yml",
    "docker-compose.yaml",
];

/// The largest Compose file af reads, in bytes (1 MiB), as for the manifest.
const MAX_BYTES: u64 = 1 << 20;

/// The Compose file in `dir`, by Compose's own names.
pub fn find(dir: &Path) -> Result<PathBuf, Report> {
    FILE_NAMES
        .iter()
        .map(|name| dir.join(name))
        .find(|path| path.is_file())
        .ok_or_else(|| {
            Report::new(
                &codes::INIT_NO_COMPOSE,
                format!(
                    "No Compose file ({}) is in {}.",
                    FILE_NAMES.join(", "),
                    dir.display()
                ),
            )
        })
}

/// Read and parse the Compose file at `path`.
pub fn read(path: &Path) -> Result<Compose, Report> {
    let refuse = |why: String| {
        Report::new(
            &codes::INIT_BAD_COMPOSE,
            format!("{} {why}.", path.display()),
        )
    };
    let size = std::fs::metadata(path)
        .map_err(|e| refuse(format!("cannot be read: {e}")))?
        .len();
    if size > MAX_BYTES {
        return Err(refuse(format!(
            "is {size} bytes, more than the 1 MiB af reads"
        )));
    }
    let text = std::fs::read_to_string(path).map_err(|e| refuse(format!("cannot be read: {e}")))?;
    let compose: Compose = serde_saphyr::from_str(&text)
        .map_err(|e| refuse(format!("is not a Compose file af can read: {e}")))?;
    if compose.services.is_empty() {
        return Err(refuse("declares no services".to_owned()));
    }
    Ok(compose)
}
