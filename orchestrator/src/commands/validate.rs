//! `af validate`: check the manifest and show where the environment would run, judged by
//! which organization policy.

use af_orchestrator::runtime::factory::{self, Decision};
use af_policy::egress::Catalogue;
use af_policy::manifest::{Manifest, UnnamedPort, unnamed_ports};
use af_policy::placement::Placement;
use af_policy::placement::residency::Residency;
use serde::Serialize;

use crate::cli::Global;
use crate::output::{Format, print_json, say};
use crate::refusal::Refusal;

#[derive(Serialize)]
struct Summary<'a> {
    valid: bool,
    file: String,
    name: &'a str,
    services: Vec<&'a str>,
    egress_rules: usize,
    egress_default: af_policy::egress::Mode,
    placement: &'a Placement,
    residency: &'a Residency,
    /// Variables naming a port that their host's portless rule does not cover.
    unnamed_ports: Vec<UnnamedPort>,
}

/// Load and check the manifest, then print its summary and placement as text or JSON.
pub(super) fn run(global: &Global) -> Result<(), Refusal> {
    let (path, manifest) = super::load_manifest(global)?;
    let decision = factory::decide(Some(&manifest))?;
    let summary = summarize(&path, &manifest, &decision);
    let placement = &decision.placement;
    match global.output {
        Format::Json => print_json(&summary),
        Format::Text => {
            say!("✓ {} is valid: project {}", summary.file, summary.name);
            say!("  services: {}", summary.services.join(", "));
            say!(
                "  egress:   {} rules, default {}",
                summary.egress_rules,
                summary.egress_default
            );
            match placement.target.as_deref() {
                Some(target) => say!("  runtime:  {} (target {target})", placement.provider),
                None => say!("  runtime:  {} (no targets declared)", placement.provider),
            }
            match &decision.residency {
                Residency::None { looked_in } => {
                    say!("  residency: no organization policy (looked in {looked_in})")
                }
                Residency::Allowed {
                    file,
                    allowed_regions,
                    region,
                } => say!(
                    "  residency: {file} allows region {region} (allowed: {})",
                    allowed_regions.join(", ")
                ),
            }
            for unnamed in &summary.unnamed_ports {
                say!("  note:     {}", unnamed.sentence());
            }
        }
    }
    Ok(())
}

fn summarize<'a>(
    path: &std::path::Path,
    manifest: &'a Manifest,
    decision: &'a Decision,
) -> Summary<'a> {
    Summary {
        valid: true,
        file: path.display().to_string(),
        name: &manifest.name,
        services: manifest.services.iter().map(|s| s.name.as_str()).collect(),
        egress_rules: manifest.egress.rules.len(),
        egress_default: manifest.egress.default_mode(),
        placement: &decision.placement,
        residency: &decision.residency,
        unnamed_ports: Catalogue::compile(&manifest.egress)
            .map(|catalogue| unnamed_ports(manifest, &catalogue))
            .unwrap_or_default(),
    }
}
