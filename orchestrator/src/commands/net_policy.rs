//! `af net policy` and `af net explain`: the catalogue as it decides, without any runtime.

use af_orchestrator::listing::Listing;
use af_policy::egress::Explanation;
use af_policy::error::{Report, codes};

use crate::cli::Global;
use crate::output::{Format, print_json, say};
use crate::refusal::Refusal;

/// `af net policy`: every rule, most specific first, then the default.
pub(super) fn policy(global: &Global) -> Result<(), Refusal> {
    let catalogue = super::load_catalogue(global)?;
    let listing = Listing::of(&catalogue);
    match global.output {
        Format::Json => print_json(&listing),
        Format::Text => print_policy(&listing),
    }
    Ok(())
}

fn print_policy(policy: &Listing<'_>) {
    let width = policy
        .rules
        .iter()
        .map(|r| r.host.len())
        .max()
        .unwrap_or(4)
        .max(4);
    say!(
        "{:>3}  {:<9} {:<width$}  {:<8} LIMITS",
        "#",
        "RULE",
        "HOST",
        "MODE"
    );
    for row in &policy.rules {
        let mut limits = Vec::new();
        if !row.paths.is_empty() {
            limits.push(format!("paths {}", row.paths.join(",")));
        }
        if !row.methods.is_empty() {
            limits.push(format!("methods {}", row.methods.join(",")));
        }
        if let Some(note) = row.note {
            limits.push(format!("# {note}"));
        }
        say!(
            "{:>3}  {:<9} {:<width$}  {:<8} {}",
            row.order,
            row.rule,
            row.host,
            row.mode.as_str(),
            limits.join("  ")
        );
    }
    say!(
        "     default   {:<width$}  {}",
        "(no rule matches)",
        policy.default
    );
    if policy.allow_ipv6 {
        say!("IPv6 destinations are allowed.");
    }
}

/// `af net explain METHOD URL` (or `CONNECT host:port`): every matching rule, every rule that
/// named the host but lost, and why the winner wins.
pub(super) fn explain(global: &Global, method: &str, url: &str) -> Result<(), Refusal> {
    let catalogue = super::load_catalogue(global)?;
    let explanation = catalogue
        .explain(method, url)
        .map_err(|e| Report::new(&codes::NET_BAD_URL, format!("{e}.")))?;
    match global.output {
        Format::Json => print_json(&explanation),
        Format::Text => print_explanation(&explanation),
    }
    Ok(())
}

fn print_explanation(e: &Explanation) {
    say!(
        "{} {}:{}{}  →  {}  ({})",
        e.method,
        e.host,
        e.port,
        e.path,
        e.mode,
        e.rule
    );
    if e.matched.is_empty() {
        say!("  no rule matches");
    }
    for m in &e.missed {
        say!(
            "  ✗ rules[{}] {:<30} {:<8} lost: {}",
            m.index,
            m.host,
            m.mode.as_str(),
            m.why
        );
    }
    for m in &e.matched {
        let mark = if m.winner { "✓" } else { " " };
        say!(
            "  {mark} rules[{}] {:<30} {:<8} {}",
            m.index,
            m.host,
            m.mode.as_str(),
            m.specificity
        );
    }
    say!("  {}", e.why);
    if e.open_tls {
        say!("  The sidecar opens TLS to this host to decide or answer its requests.");
    }
}
