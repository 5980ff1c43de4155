//! A refusal as the user reads it: code, one sentence, `Next:`.

use std::fmt;

use serde::Serialize;

use super::{ErrorCode, ExitStatus};

/// One refusal: a code, one sentence of what happened, and what to do next.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Report {
    /// The catalogue entry.
    #[serde(serialize_with = "serialize_code")]
    pub code: &'static ErrorCode,
    /// One sentence saying what happened, naming the thing concerned.
    pub statement: String,
    /// What to do next.
    pub next: String,
}

impl Report {
    /// A report with the code's own `Next:` line.
    pub fn new(code: &'static ErrorCode, statement: impl Into<String>) -> Self {
        Self {
            code,
            statement: statement.into(),
            next: code.next.to_owned(),
        }
    }

    /// Replace the `Next:` line with a more specific one.
    pub fn with_next(mut self, next: impl Into<String>) -> Self {
        self.next = next.into();
        self
    }

    /// The process exit status this refusal ends `af` with.
    pub fn exit_status(&self) -> ExitStatus {
        self.code.exit
    }
}

fn serialize_code<S: serde::Serializer>(
    code: &&'static ErrorCode,
    s: S,
) -> Result<S::Ok, S::Error> {
    s.serialize_str(code.code)
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} {}\n  Next: {}",
            self.code.code, self.statement, self.next
        )
    }
}

impl std::error::Error for Report {}
