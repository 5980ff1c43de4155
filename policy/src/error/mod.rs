//! The product's one error catalogue.
//!
//! Every refusal af makes carries a stable code from [`CATALOGUE`], one sentence saying what
//! happened and a `Next:` line saying what to do. Each code maps to a documented process exit
//! status. `docs/errors.md` is generated from this table and a test keeps the two in step.

mod catalogue;
mod markdown;
mod report;

pub use catalogue::{CATALOGUE, codes};
pub use markdown::render_markdown;
pub use report::Report;

use std::fmt;

/// A stable error code and what it means.
#[derive(Debug, PartialEq, Eq)]
pub struct ErrorCode {
    /// The stable code, e.g. `AF-MAN-006`.
    pub code: &'static str,
    /// What the code means, for the documentation.
    pub meaning: &'static str,
    /// The `Next:` line used when the refusal does not give a more specific one.
    pub next: &'static str,
    /// The process exit status `af` ends with.
    pub exit: ExitStatus,
}

/// The documented process exit statuses of `af`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum ExitStatus {
    /// 2: the manifest, a flag or an argument was refused.
    Usage = 2,
    /// 3: placement found no runtime for the environment.
    Placement = 3,
    /// 4: a runtime could not do what was asked.
    Runtime = 4,
    /// 5: teardown finished but left something behind.
    TeardownIncomplete = 5,
    /// 6: the sidecar or its admin API refused or failed.
    Network = 6,
    /// 7: what was asked for by name or number does not exist.
    NotFound = 7,
}

impl ExitStatus {
    /// Every status, for the documentation.
    pub const ALL: [ExitStatus; 6] = [
        ExitStatus::Usage,
        ExitStatus::Placement,
        ExitStatus::Runtime,
        ExitStatus::TeardownIncomplete,
        ExitStatus::Network,
        ExitStatus::NotFound,
    ];

    /// The numeric status.
    pub const fn code(self) -> u8 {
        self as u8
    }

    /// One line on when `af` ends with this status.
    pub const fn meaning(self) -> &'static str {
        match self {
            ExitStatus::Usage => "the manifest, a flag or an argument was refused",
            ExitStatus::Placement => "placement found no runtime for the environment",
            ExitStatus::Runtime => "a runtime could not do what was asked",
            ExitStatus::TeardownIncomplete => "teardown finished but left something behind",
            ExitStatus::Network => "the sidecar or its admin API refused or failed",
            ExitStatus::NotFound => "what was asked for by name or number does not exist",
        }
    }
}

impl fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.code)
    }
}
