//! `af up`: make the environment (or bring it up to date) and say where each service is.

use std::io::Write;

use super::interrupt::{Interrupt, Stoppable};
use super::output::{Display, Format, announce, print_json, service_line};
use crate::plan::EnvPlan;
use crate::runtime::{Runtime, RuntimeError, UpReport};
use af_policy::error::Report;

/// Run `af up`, shown as fits `format` and this process's stderr: the report on success, the
/// coded refusal otherwise (AF-RUN-032 when `interrupt` stopped it between two steps).
/// Warnings go to stderr.
pub async fn run(
    runtime: &dyn Runtime,
    plan: &EnvPlan,
    format: Format,
    interrupt: &Interrupt,
    out: &mut dyn Write,
) -> Result<UpReport, Report> {
    let display = Display::for_this_process(format, false);
    run_shown(runtime, plan, format, display, interrupt, out).await
}

/// [`run`] with its steps shown on `display`; a silent human display (`--quiet`) prints only
/// the result: each service's ✓/✗ line and the environment's id, or the refusal.
pub async fn run_shown(
    runtime: &dyn Runtime,
    plan: &EnvPlan,
    format: Format,
    display: Display,
    interrupt: &Interrupt,
    out: &mut dyn Write,
) -> Result<UpReport, Report> {
    announce(runtime);
    for warning in warnings(plan)
        .into_iter()
        .chain(runtime.containment_notes(plan))
    {
        eprintln!("warning: {warning}");
    }
    let progress = display.progress();
    let result = runtime
        .up(plan, &Stoppable::new(progress.as_ref(), interrupt))
        .await;
    // The live display's status line goes before the result is printed.
    drop(progress);
    match result {
        Ok(report) => {
            match format {
                Format::Human => {
                    if display == Display::Silent {
                        for service in &report.services {
                            let _ = writeln!(out, "{}", service_line(service));
                        }
                    }
                    let _ = writeln!(out, "env {}", report.env);
                }
                Format::Json => print_json(out, &report),
            }
            Ok(report)
        }
        Err(e) => {
            // The refusal itself is printed by the caller (text on stderr, or JSON).
            if format == Format::Human
                && let Some(s) = failed_service(&e)
            {
                let _ = writeln!(out, "✗ {s}");
            }
            Err(e.report())
        }
    }
}

/// What `af up` goes ahead despite: test credentials a rule names that are not set.
pub fn warnings(plan: &EnvPlan) -> Vec<String> {
    plan.modes
        .missing_credentials
        .iter()
        .map(|name| {
            format!(
                "{name} is not set, so the sandbox rules naming it are refused (AF-NET-044); export it and run af up again."
            )
        })
        .collect()
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
