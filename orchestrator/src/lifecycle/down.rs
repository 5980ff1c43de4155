//! `af down`: remove everything the environment's runtime made, by label, going on past
//! failures; anything left is named and the exit status is 5 (AF-RUN-030).

use std::io::Write;

use af_policy::error::Report;
use serde::Serialize;

use super::output::{Display, Format, announce, print_json};
use crate::env_id::EnvId;
use crate::runtime::{PhasesOnly, Runtime, RuntimeError};

#[derive(Serialize)]
struct Doc<'a> {
    env: &'a str,
    removed: &'a [String],
    failed: Vec<serde_json::Value>,
}

/// Run `af down`, shown as fits `format` and this process's stderr.
pub async fn run(
    runtime: &dyn Runtime,
    env: &EnvId,
    format: Format,
    out: &mut dyn Write,
) -> Result<(), Report> {
    let display = Display::for_this_process(format, false);
    run_shown(runtime, env, format, display, out).await
}

/// [`run`] with what is being removed shown on `display` when it is live; as plain lines (or
/// silent) `af down` prints only its result, as it always has.
pub async fn run_shown(
    runtime: &dyn Runtime,
    env: &EnvId,
    format: Format,
    display: Display,
    out: &mut dyn Write,
) -> Result<(), Report> {
    announce(runtime);
    let progress = display.progress();
    let report = runtime.down(env, &PhasesOnly(progress.as_ref())).await;
    // The live display's status line goes before the result is printed.
    drop(progress);
    let report = report.map_err(|e| e.report())?;
    match format {
        Format::Human => {
            if report.removed.is_empty() && report.failed.is_empty() {
                let _ = writeln!(out, "env {env}: nothing to remove");
            }
            for r in &report.removed {
                let _ = writeln!(out, "removed {r}");
            }
            for (name, why) in &report.failed {
                let _ = writeln!(out, "✗ could not remove {name}: {why}");
            }
        }
        Format::Json => print_json(
            out,
            &Doc {
                env: env.as_str(),
                removed: &report.removed,
                failed: report
                    .failed
                    .iter()
                    .map(|(n, w)| serde_json::json!({ "object": n, "error": w }))
                    .collect(),
            },
        ),
    }
    if report.failed.is_empty() {
        Ok(())
    } else {
        Err(RuntimeError::TeardownIncomplete(report.failed).report())
    }
}
