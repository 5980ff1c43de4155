//! `af ecs report` and `af ecs check-rule-group`: the ECS runtime's refusal on its own, and the
//! DNS Firewall predicate as a command anyone can point at a rule group.

use std::path::Path;

use af_orchestrator::bounded;
use af_orchestrator::runtime::ecs;
use af_policy::error::{Report, codes};
use af_policy::placement::ecs::rule_group::{self, RuleGroup};
use serde::Serialize;

use crate::cli::Global;
use crate::output::{Format, print_json, say};
use crate::refusal::Refusal;

/// The largest rule group file read, in bytes (4 MiB): DNS Firewall caps a domain list at
/// 100,000 domains, and a group worth judging here is far smaller.
const MAX_RULE_GROUP_BYTES: u64 = 4 << 20;

/// Make the report for the manifest, write its plan to `plan` if asked, and refuse with it.
pub(super) fn report(global: &Global, plan: Option<&Path>) -> Result<(), Refusal> {
    let (_, manifest) = super::load_manifest(global)?;
    let report = ecs::report(&manifest)?;
    if let Some(path) = plan {
        let written = serde_json::to_vec_pretty(&report.plan)
            .map_err(std::io::Error::other)
            .and_then(|json| std::fs::write(path, json));
        if let Err(e) = written {
            return Err(Report::new(
                &codes::SCH_ECS_PLAN_UNWRITABLE,
                format!("The plan could not be written to {}: {e}.", path.display()),
            )
            .into());
        }
    }
    Err(Refusal::ecs(Box::new(report)))
}

#[derive(Serialize)]
struct Accepted<'a> {
    accepted: bool,
    file: String,
    rules: usize,
    terminal: Option<&'a str>,
}

/// Read the rule group at `file` and accept it, or refuse with every reason it is open.
pub(super) fn check_rule_group(global: &Global, file: &Path) -> Result<(), Refusal> {
    let text = bounded::read_to_string(file, MAX_RULE_GROUP_BYTES).map_err(|e| {
        Report::new(
            &codes::SCH_RULE_GROUP_UNREADABLE,
            format!("The rule group {} could not be read: {e}.", file.display()),
        )
    })?;
    let group = RuleGroup::from_json(&text)?;
    let refusals = rule_group::check(&group);
    if !refusals.is_empty() {
        return Err(Refusal::reports(refusals));
    }
    let terminal = group
        .rules
        .iter()
        .max_by_key(|r| r.priority)
        .map(|r| r.name.as_str());
    let accepted = Accepted {
        accepted: true,
        file: file.display().to_string(),
        rules: group.rules.len(),
        terminal,
    };
    match global.output {
        Format::Json => print_json(&accepted),
        Format::Text => say!(
            "✓ {} blocks every domain it does not name: {} rules, the last ({}) a BLOCK on every domain, fail-open disabled",
            accepted.file,
            accepted.rules,
            terminal.unwrap_or_default()
        ),
    }
    Ok(())
}
