//! `af up`: make the environment (or bring it up to date) and say where each service is.

use std::io::Write;

use af_policy::error::Report;
use serde::Serialize;

use super::output::{ErrorDoc, Format, HumanProgress, print_json};
use crate::plan::EnvPlan;
use crate::runtime::{Quiet, Runtime, RuntimeError, UpReport};

#[derive(Serialize)]
struct Failed<'a> {
    env: &'a str,
    failed: Option<&'a str>,
    error: ErrorDoc<'a>,
}

/// Run `af up`; `Ok` is the exit status.
pub async fn run(runtime: &dyn Runtime, plan: &EnvPlan, format: Format, out: &mut dyn Write) -> Result<UpReport, Report> {
    let result = match format {
        Format::Human => runtime.up(plan, &HumanProgress::new()).await,
        Format::Json => runtime.up(plan, &Quiet).await,
    };
    match result {
        Ok(report) => {
            match format {
                Format::Human => {
                    let _ = writeln!(out, "env {}", report.env);
                }
                Format::Json => print_json(out, &report),
            }
            Ok(report)
        }
        Err(e) => {
            let report = e.report();
            let failed = failed_service(&e);
            match format {
                Format::Human => {
                    if let Some(s) = failed {
                        let _ = writeln!(out, "✗ {s}");
                    }
                    let _ = writeln!(out, "env {}", plan.env);
                }
                Format::Json => print_json(
                    out,
                    &Failed { env: plan.env.as_str(), failed, error: ErrorDoc::from(&report) },
                ),
            }
            Err(report)
        }
    }
}

fn failed_service(e: &RuntimeError) -> Option<&str> {
    match e {
        RuntimeError::ImageBuild { service, .. }
        | RuntimeError::NotReady { service, .. }
        | RuntimeError::Exited { service, .. }
        | RuntimeError::Migration { service, .. } => Some(service),
        _ => None,
    }
}
