//! `af validate`: check the manifest and show where the environment would run.

use af_policy::manifest::Manifest;
use af_policy::placement::Placement;
use serde::Serialize;

use crate::cli::Global;
use crate::output::{Format, print_json};
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
}

/// Load and check the manifest, then print its summary and placement as text or JSON.
pub(super) fn run(global: &Global) -> Result<(), Refusal> {
    let (path, manifest) = super::load_manifest(global)?;
    let placement = manifest.placement()?;
    let summary = summarize(&path, &manifest, &placement);
    match global.output {
        Format::Json => print_json(&summary),
        Format::Text => {
            println!("✓ {} is valid: project {}", summary.file, summary.name);
            println!("  services: {}", summary.services.join(", "));
            println!(
                "  egress:   {} rules, default {}",
                summary.egress_rules, summary.egress_default
            );
            match placement.target.as_deref() {
                Some(target) => println!("  runtime:  {} (target {target})", placement.provider),
                None => println!("  runtime:  {} (no targets declared)", placement.provider),
            }
        }
    }
    Ok(())
}

fn summarize<'a>(
    path: &std::path::Path,
    manifest: &'a Manifest,
    placement: &'a Placement,
) -> Summary<'a> {
    Summary {
        valid: true,
        file: path.display().to_string(),
        name: &manifest.name,
        services: manifest.services.iter().map(|s| s.name.as_str()).collect(),
        egress_rules: manifest.egress.rules.len(),
        egress_default: manifest.egress.default_mode(),
        placement,
    }
}
