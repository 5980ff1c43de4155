//! Why a manifest was refused: every problem, each with its code, position and `Next:` line.

use std::fmt;
use std::path::PathBuf;

use crate::error::{ExitStatus, Report, codes};

/// A position in the manifest file, both counted from 1 (columns in characters).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Location {
    /// The line, from 1.
    pub line: usize,
    /// The column, from 1, in characters.
    pub column: usize,
}

impl Location {
    /// The first character of the file.
    pub const START: Location = Location { line: 1, column: 1 };
}

impl fmt::Display for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.line, self.column)
    }
}

/// One thing wrong with a manifest, where it is written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    /// Where the problem is written.
    pub location: Location,
    /// The refusal: code, one sentence, `Next:`.
    pub report: Report,
}

impl Problem {
    /// The problem's stable code, e.g. `AF-MAN-006`.
    pub fn code(&self) -> &'static str {
        self.report.code.code
    }
}

/// Why a manifest could not be used.
#[derive(Debug, thiserror::Error)]
pub enum ManifestError {
    /// No `af.yaml` in the start directory or any parent (AF-MAN-001).
    NotFound {
        /// The directory the search started from.
        start: PathBuf,
    },
    /// The file exists but could not be read (AF-MAN-002).
    Unreadable {
        /// The manifest's path.
        path: PathBuf,
        /// What reading it said.
        #[source]
        source: std::io::Error,
    },
    /// The file is over the size bound; it was not parsed (AF-MAN-003).
    TooLarge {
        /// The manifest's path.
        path: PathBuf,
        /// Its size in bytes.
        bytes: u64,
    },
    /// The manifest was read and refused: every problem found, sorted by position.
    Invalid {
        /// The manifest's path.
        path: PathBuf,
        /// Every problem, sorted by line and column.
        problems: Vec<Problem>,
    },
}

impl ManifestError {
    /// Every refusal this error carries, as the user reads them. Only [`ManifestError::Invalid`]
    /// has positions; the others are about the file as a whole.
    pub fn reports(&self) -> Vec<Report> {
        match self {
            ManifestError::NotFound { start } => vec![Report::new(
                &codes::MAN_NOT_FOUND,
                format!(
                    "No af.yaml was found in {} or any directory above it.",
                    start.display()
                ),
            )],
            ManifestError::Unreadable { path, source } => vec![Report::new(
                &codes::MAN_UNREADABLE,
                format!("{} could not be read: {source}.", path.display()),
            )],
            ManifestError::TooLarge { path, bytes } => vec![Report::new(
                &codes::MAN_TOO_LARGE,
                format!(
                    "{} is {bytes} bytes; af reads manifests of at most {} bytes.",
                    path.display(),
                    super::MAX_MANIFEST_BYTES
                ),
            )],
            ManifestError::Invalid { problems, .. } => {
                problems.iter().map(|p| p.report.clone()).collect()
            }
        }
    }

    /// The problems with positions; empty unless the manifest was read and refused.
    pub fn problems(&self) -> &[Problem] {
        match self {
            ManifestError::Invalid { problems, .. } => problems,
            _ => &[],
        }
    }

    /// The exit status `af` ends with: the lowest of its refusals' statuses, so a manifest that
    /// is wrong as written (2) is reported as such even when placement also failed (3).
    pub fn exit_status(&self) -> ExitStatus {
        self.reports()
            .iter()
            .map(Report::exit_status)
            .min()
            .unwrap_or(ExitStatus::Usage)
    }
}

/// Every refusal, one per paragraph, each prefixed with `file:line:column:` where known.
impl fmt::Display for ManifestError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let ManifestError::Invalid { path, problems } = self {
            for (i, p) in problems.iter().enumerate() {
                let sep = if i == 0 { "" } else { "\n" };
                write!(f, "{sep}{}:{}: {}", path.display(), p.location, p.report)?;
            }
            return Ok(());
        }
        for (i, report) in self.reports().iter().enumerate() {
            let sep = if i == 0 { "" } else { "\n" };
            write!(f, "{sep}{report}")?;
        }
        Ok(())
    }
}
