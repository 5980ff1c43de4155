//! The manifest, `af.yaml`: finding it, reading it and refusing it with every problem at its
//! line and column.
//!
//! Reading goes in three passes over one parse: the YAML is read into a positioned tree
//! (`yaml`, refusing anchors, aliases and duplicate keys), the tree is checked against the
//! JSON Schema derived from the typed model (`structure`: unknown keys with did-you-mean,
//! types, required keys), and each section whose shape is sound is deserialized and checked for
//! what a schema cannot say (names, dependencies, egress rules, placement). All problems are
//! collected and sorted by position.

mod capability;
mod model;
mod names;
mod path;
mod problem;
mod quantity;
mod schema;
mod services;
mod structure;
mod unnamed_ports;
mod validate;
mod yaml;

use std::fs::File;
use std::io::Read;
use std::path::{Path, PathBuf};

pub use capability::Capability;
pub use model::{
    ContainmentSpec, MANIFEST_VERSION, Manifest, OnLoss, Resources, Service, ServiceKind,
};
pub use names::dns_label_problem;
pub use path::{FieldPath, Segment};
pub use problem::{Location, ManifestError, Problem};
pub use quantity::Limits;
pub use schema::json_schema;
pub use unnamed_ports::{UnnamedPort, unnamed_ports};
pub(crate) use validate::read_document;

use crate::error::{Report, codes};
use crate::placement::{self, Placement};

/// The manifest's file name.
pub const FILE_NAME: &str = "af.yaml";

/// The largest manifest af reads, in bytes (1 MiB). Checked before parsing.
pub const MAX_MANIFEST_BYTES: u64 = 1 << 20;

impl Manifest {
    /// Find `af.yaml` in `start` or the nearest directory above it, and read it.
    pub fn discover(start: &Path) -> Result<(PathBuf, Manifest), ManifestError> {
        let start = std::path::absolute(start).map_err(|source| ManifestError::Unreadable {
            path: start.to_owned(),
            source,
        })?;
        let path = start
            .ancestors()
            .map(|dir| dir.join(FILE_NAME))
            .find(|candidate| candidate.is_file())
            .ok_or_else(|| ManifestError::NotFound {
                start: start.clone(),
            })?;
        let manifest = Manifest::from_path(&path)?;
        Ok((path, manifest))
    }

    /// Read the manifest at `path`. Its size is checked before it is read.
    pub fn from_path(path: &Path) -> Result<Manifest, ManifestError> {
        let unreadable = |source| ManifestError::Unreadable {
            path: path.to_owned(),
            source,
        };
        let file = File::open(path).map_err(unreadable)?;
        let bytes = file.metadata().map_err(unreadable)?.len();
        if bytes > MAX_MANIFEST_BYTES {
            return Err(too_large(path, bytes));
        }
        // The file may grow between the check and the read: never read past the bound.
        let mut content = Vec::new();
        file.take(MAX_MANIFEST_BYTES + 1)
            .read_to_end(&mut content)
            .map_err(unreadable)?;
        Manifest::from_bytes(&content, path)
    }

    /// Read a manifest from its bytes; `path` is where it came from, for messages.
    pub fn from_bytes(bytes: &[u8], path: &Path) -> Result<Manifest, ManifestError> {
        check_size(bytes.len(), path)?;
        match std::str::from_utf8(bytes) {
            Ok(text) => Manifest::from_str(text, path),
            Err(e) => {
                let valid = String::from_utf8_lossy(&bytes[..e.valid_up_to()]);
                let line = valid.matches('\n').count() + 1;
                let column = valid.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
                Err(ManifestError::Invalid {
                    path: path.to_owned(),
                    problems: vec![Problem {
                        location: Location { line, column },
                        report: Report::new(
                            &codes::MAN_UNREADABLE,
                            "The manifest is not UTF-8 text from here on.",
                        )
                        .with_next("Save af.yaml as UTF-8."),
                    }],
                })
            }
        }
    }

    /// Read a manifest from its text; `path` is where it came from, for messages.
    #[allow(clippy::should_implement_trait)] // needs the path, so it cannot be `FromStr`
    pub fn from_str(text: &str, path: &Path) -> Result<Manifest, ManifestError> {
        check_size(text.len(), path)?;
        validate::validate(text).map_err(|problems| ManifestError::Invalid {
            path: path.to_owned(),
            problems,
        })
    }

    /// Where this manifest's environments run. A manifest that was read successfully always
    /// places; the `Err` is for manifests built by hand.
    pub fn placement(&self) -> Result<Placement, Report> {
        placement::place(&self.runtime)
    }
}

fn check_size(len: usize, path: &Path) -> Result<(), ManifestError> {
    let bytes = u64::try_from(len).unwrap_or(u64::MAX);
    if bytes > MAX_MANIFEST_BYTES {
        return Err(too_large(path, bytes));
    }
    Ok(())
}

fn too_large(path: &Path, bytes: u64) -> ManifestError {
    ManifestError::TooLarge {
        path: path.to_owned(),
        bytes,
    }
}
