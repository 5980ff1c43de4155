//! A command that refuses: every report it carries, printed for people or as JSON.

use std::path::PathBuf;

use af_orchestrator::runtime::factory::Refused;
use af_policy::error::{ExitStatus, Report};
use af_policy::manifest::{Location, ManifestError, Problem};
use af_policy::placement::ecs::EcsReport;
use serde::Serialize;

use crate::output::{Format, print_json, say};

/// Why a command stopped: one or more coded reports, some at a place in a file, and for the
/// ECS runtime the report its refusal carries.
#[derive(Debug)]
pub(crate) struct Refusal {
    entries: Vec<Entry>,
    ecs: Option<Box<EcsReport>>,
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

    /// Print every report: on stderr as text (an ECS report before them, on stdout), or on
    /// stdout as `{"errors": [...]}` (with `"ecs": {...}`).
    pub(crate) fn print(&self, format: Format) {
        match format {
            Format::Text => {
                if let Some(report) = &self.ecs {
                    say!("{report}");
                }
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
                match &self.ecs {
                    Some(report) => {
                        print_json(&serde_json::json!({ "errors": errors, "ecs": report }))
                    }
                    None => print_json(&serde_json::json!({ "errors": errors })),
                }
            }
        }
    }
}

impl Refusal {
    /// Every report, none at a position.
    pub(crate) fn reports(reports: Vec<Report>) -> Self {
        Refusal {
            entries: reports
                .into_iter()
                .map(|report| Entry { at: None, report })
                .collect(),
            ecs: None,
        }
    }

    /// The problems of the file at `path`, each at its position.
    fn positioned(path: &std::path::Path, problems: &[Problem]) -> Self {
        Refusal {
            entries: problems
                .iter()
                .map(|p| Entry {
                    at: Some((path.to_owned(), p.location)),
                    report: p.report.clone(),
                })
                .collect(),
            ecs: None,
        }
    }

    /// The ECS runtime's refusal: its coded reports, carrying the report itself.
    pub(crate) fn ecs(report: Box<EcsReport>) -> Self {
        let refusals = report.refusals();
        Refusal {
            ecs: Some(report),
            ..Refusal::reports(refusals)
        }
    }
}

impl From<Report> for Refusal {
    fn from(report: Report) -> Self {
        Refusal::reports(vec![report])
    }
}

impl From<Refused> for Refusal {
    fn from(refused: Refused) -> Self {
        match refused {
            Refused::Report(report) => report.into(),
            Refused::OrgPolicy { path, problems } => Refusal::positioned(&path, &problems),
            Refused::Ecs(report) => Refusal::ecs(report),
        }
    }
}

impl From<ManifestError> for Refusal {
    fn from(error: ManifestError) -> Self {
        match &error {
            ManifestError::Invalid { path, problems } => Refusal::positioned(path, problems),
            _ => Refusal::reports(error.reports()),
        }
    }
}
