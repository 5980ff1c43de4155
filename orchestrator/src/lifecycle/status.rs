//! `af status`: the environment's sidecar and services; an unknown environment is empty.

use std::io::Write;

use af_policy::error::Report;

use super::output::{Format, print_json};
use crate::containment::Containment;
use crate::env_id::EnvId;
use crate::runtime::{EnvStatus, JournalPlace, JournalStorage, Runtime};

/// Run `af status`.
pub async fn run(
    runtime: &dyn Runtime,
    env: &EnvId,
    format: Format,
    out: &mut dyn Write,
) -> Result<EnvStatus, Report> {
    let mut status = runtime.status(env).await.map_err(|e| e.report())?;
    Containment::fill(runtime, env, &mut status).await;
    match format {
        Format::Json => print_json(out, &status),
        Format::Human => {
            if !status.exists {
                let _ = writeln!(out, "env {env}: not running (run `af up`)");
                return Ok(status);
            }
            if let Some(s) = &status.sidecar {
                let _ = writeln!(out, "{} {:<16} {}", mark(s.running), "sidecar", s.state);
            }
            for s in &status.services {
                let url = s.url.as_deref().unwrap_or("");
                let _ = writeln!(
                    out,
                    "{} {:<16} {:<12} {url}",
                    mark(s.running),
                    s.name,
                    s.state
                );
            }
            if let Some(c) = &status.containment {
                let mark = match c {
                    Containment::Held { .. } => "●",
                    Containment::Lost { .. } => "✗",
                    Containment::Unverified { .. } => "?",
                };
                let _ = writeln!(out, "{mark} {}", c.line());
                if let Containment::Lost { .. } = c {
                    let fate = match status.on_loss.as_deref() {
                        Some("keep") => "the services keep running (containment.on_loss: keep)",
                        _ => {
                            "the keeper stops the services (containment.on_loss: stop); `af up` starts them once containment is proven again"
                        }
                    };
                    let _ = writeln!(out, "  {fate}");
                }
            }
            if let Some(journal) = &status.journal {
                let _ = writeln!(out, "  journal: {}", journal_line(journal));
            }
            let _ = writeln!(out, "env {env}");
        }
    }
    Ok(status)
}

/// `volume af-pr-42-journal (kept when the sidecar is replaced)`, or where it is lost.
fn journal_line(journal: &JournalPlace) -> String {
    let what = match journal.storage {
        JournalStorage::Volume => "volume",
        JournalStorage::PersistentVolumeClaim => "PersistentVolumeClaim",
        JournalStorage::Pod => "in the pod",
    };
    let fate = if journal.outlives_the_sidecar() {
        "kept when the sidecar is restarted or replaced"
    } else {
        "lost when the sidecar's pod is restarted or replaced"
    };
    let reason = journal
        .reason
        .as_deref()
        .map(|r| format!("; {r}"))
        .unwrap_or_default();
    format!("{what} {} ({fate}{reason})", journal.name)
}

fn mark(running: bool) -> &'static str {
    if running { "✓" } else { "✗" }
}
