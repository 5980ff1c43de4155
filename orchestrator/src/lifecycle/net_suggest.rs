//! `af net suggest [--mode allow|mock|capture] [--since DURATION]`: the egress rules that would
//! decide what the catalogue's default decided, read from the journal, as YAML to paste under
//! `egress.rules` in `af.yaml`.

use std::io::Write;
use std::time::SystemTime;

use af_policy::egress::{EgressSpec, Mode};
use af_policy::error::{Report, codes};
use af_sidecar_api::admin::DecisionsQuery;
use af_sidecar_api::journal::Record;

use super::output::{Format, print_json};
use crate::admin;
use crate::env_id::EnvId;
use crate::runtime::Runtime;
use crate::suggest::{self, SuggestError};

/// Run `af net suggest`: rules for the journal's decisions from `since` on that `spec`'s
/// default decides, deciding them with `mode`.
pub async fn run(
    runtime: &dyn Runtime,
    env: &EnvId,
    spec: &EgressSpec,
    mode: Mode,
    since: Option<SystemTime>,
    format: Format,
    out: &mut dyn Write,
) -> Result<(), Report> {
    let endpoint = runtime.admin(env).await.map_err(|e| e.report())?;
    let mut records =
        admin::all_decisions(endpoint.addr, &endpoint.token, &DecisionsQuery::default())
            .await
            .map_err(|e| e.report())?;
    if let Some(since) = since {
        records.retain(|r| at_or_after(r, since));
    }
    let suggestion = suggest::suggest(spec, &records, mode).map_err(report)?;
    match format {
        Format::Json => print_json(
            out,
            &serde_json::json!({
                "env": env.as_str(),
                "mode": mode,
                "rules": suggestion.rules,
                "requests": suggestion.requests,
                "not_suggested": suggestion.not_suggested,
            }),
        ),
        Format::Human => {
            if suggestion.rules.is_empty() {
                let _ = writeln!(
                    out,
                    "# Nothing to suggest: no request in the journal went to the default ({}) that a rule should let through.",
                    spec.default_mode()
                );
            } else {
                let yaml = suggestion.to_yaml().map_err(report)?;
                let n: usize = suggestion.requests.iter().map(Vec::len).sum();
                let _ = writeln!(
                    out,
                    "# {n} request(s) went to the default; paste under egress.rules in af.yaml:"
                );
                let _ = write!(out, "{yaml}");
            }
            for left in &suggestion.not_suggested {
                let _ = writeln!(
                    out,
                    "# not suggested: {} ({} request(s)): {}",
                    left.host,
                    left.requests.len(),
                    left.why
                );
            }
        }
    }
    Ok(())
}

/// Whether `record` was journaled at `since` or later (a record whose time does not read is
/// kept: the journal writes RFC 3339, so that is a record from a newer sidecar).
fn at_or_after(record: &Record, since: SystemTime) -> bool {
    humantime::parse_rfc3339(&record.at).map_or(true, |at| at >= since)
}

fn report(e: SuggestError) -> Report {
    let code = match e {
        SuggestError::Catalogue(_) => &codes::MAN_BAD_RULE,
        SuggestError::Yaml(_) => &codes::RUN_SUGGEST,
    };
    Report::new(code, format!("No rules were suggested: {e}."))
}
