//! `af schema`: the JSON Schema of af.yaml, generated from the manifest's own types.

use crate::output::print_json;
use crate::refusal::Refusal;

/// Print the manifest's JSON Schema on stdout.
pub(super) fn run() -> Result<(), Refusal> {
    print_json(&af_policy::manifest::json_schema());
    Ok(())
}
