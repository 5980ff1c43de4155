//! A command that refuses: every report it carries, printed for people or as JSON.

use std::path::PathBuf;

use af_policy::error::{ExitStatus, Report};
use af_policy::manifest::{Location, ManifestError};
use serde::Serialize;

use crate::output::{Format, print_json};

/// Why a command stopped: one or more coded reports, some at a place in the manifest.
#[derive(Debug)]
pub(crate) struct Refusal {
    entries: Vec<Entry>,
}

#[derive(Debug)]
struct Entry {
    at: Option<(PathBuf, Location)>,
    report: Report,
}

#[derive(Serialize)]
struct JsonEntry<'a> {
    code: &'static str,
    statement: &'a str,
    next: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    file: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    line: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    column: Option<usize>,
}

impl Refusal {
    /// The exit status: the lowest of the reports' statuses (a manifest wrong as written is
    /// reported as such even when placement also failed).
    pub(crate) fn exit_status(&self) -> ExitStatus {
        self.entries
            .iter()
            .map(|e| e.report.exit_status())
            .min()
            .unwrap_or(ExitStatus::Usage)
    }

    /// Print every report: on stderr as text, or on stdout as `{"errors": [...]}`.
    pub(crate) fn print(&self, format: Format) {
        match format {
            Format::Text => {
                for entry in &self.entries {
                    match &entry.at {
                        Some((path, at)) => eprintln!("{}:{at}: {}", path.display(), entry.report),
                        None => eprintln!("{}", entry.report),
                    }
                }
            }
            Format::Json => {
                let errors: Vec<_> = self
                    .entries
                    .iter()
                    .map(|e| JsonEntry {
                        code: e.report.code.code,
                        statement: &e.report.statement,
                        next: &e.report.next,
                        file: e.at.as_ref().map(|(p, _)| p.display().to_string()),
                        line: e.at.as_ref().map(|(_, at)| at.line),
                        column: e.at.as_ref().map(|(_, at)| at.column),
                    })
                    .collect();
                print_json(&serde_json::json!({ "errors": errors }));
            }
        }
    }
}

impl From<Report> for Refusal {
    fn from(report: Report) -> Self {
        Refusal {
            entries: vec![Entry { at: None, report }],
        }
    }
}

impl From<ManifestError> for Refusal {
    fn from(error: ManifestError) -> Self {
        let entries = match &error {
            ManifestError::Invalid { path, problems } => problems
                .iter()
                .map(|p| Entry {
                    at: Some((path.clone(), p.location)),
                    report: p.report.clone(),
                })
                .collect(),
            _ => error
                .reports()
                .into_iter()
                .map(|report| Entry { at: None, report })
                .collect(),
        };
        Refusal { entries }
    }
}
