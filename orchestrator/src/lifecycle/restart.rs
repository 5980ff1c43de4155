//! `af restart [SERVICE]`: restart the sidecar (the default) or one service in place, with its
//! configuration unchanged, and wait until it answers again. The sidecar keeps its journal
//! where the runtime keeps it (`af status` says where).

use std::io::Write;

use af_policy::error::Report;
use serde::Serialize;

use super::output::{Format, announce, print_json};
use crate::env_id::EnvId;
use crate::runtime::Runtime;

/// What `af restart` names when it is given no service.
pub const SIDECAR: &str = "sidecar";

#[derive(Serialize)]
struct Doc<'a> {
    env: &'a str,
    restarted: &'a str,
}

/// Run `af restart`; `quiet` leaves out where the runtime works.
pub async fn run(
    runtime: &dyn Runtime,
    env: &EnvId,
    service: Option<&str>,
    quiet: bool,
    format: Format,
    out: &mut dyn Write,
) -> Result<(), Report> {
    if !quiet {
        announce(runtime);
    }
    let target = service.unwrap_or(SIDECAR);
    let done = if target == SIDECAR {
        runtime.restart_sidecar(env).await
    } else {
        runtime.restart_service(env, target).await
    };
    done.map_err(|e| e.report())?;
    match format {
        Format::Human => {
            let _ = writeln!(out, "restarted {target}");
            let _ = writeln!(out, "env {env}");
        }
        Format::Json => print_json(
            out,
            &Doc {
                env: env.as_str(),
                restarted: target,
            },
        ),
    }
    Ok(())
}
