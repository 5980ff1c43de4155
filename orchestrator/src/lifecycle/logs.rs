//! `af logs [service] [--follow]`: what the services wrote, prefixed by service name.

use std::io::Write;

use af_policy::error::Report;
use futures_util::StreamExt;

use crate::env_id::EnvId;
use crate::runtime::Runtime;

/// Run `af logs`.
pub async fn run(
    runtime: &dyn Runtime,
    env: &EnvId,
    service: Option<&str>,
    follow: bool,
    tail: Option<usize>,
    out: &mut dyn Write,
) -> Result<(), Report> {
    let mut lines = runtime
        .logs(env, service, follow, tail)
        .await
        .map_err(|e| e.report())?;
    let prefix = service.is_none();
    while let Some(line) = lines.next().await {
        let line = line.map_err(|e| e.report())?;
        let written = if prefix {
            writeln!(out, "{:<12} | {}", line.service, line.line)
        } else {
            writeln!(out, "{}", line.line)
        };
        if written.is_err() {
            break;
        }
        let _ = out.flush();
    }
    Ok(())
}
