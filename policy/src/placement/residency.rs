//! Residency: an organization's policy, kept outside the repository, that names the regions
//! environments may be placed in. A target's `region` tag is what it compares against; a target
//! without one cannot be judged, and the refusal says so rather than passing.
//!
//! The policy file is YAML read through the manifest's YAML layer and shape check, so its
//! problems are positioned the same way; finding and reading the file is the caller's.

use std::sync::LazyLock;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::Placement;
use crate::error::{Report, codes};
use crate::manifest::{Problem, read_document};

/// The tag a residency rule reads.
pub const REGION_TAG: &str = "region";

/// An organization policy.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct OrgPolicy {
    /// The regions an environment's target may carry in its `region` tag.
    pub allowed_regions: Vec<String>,
}

static SCHEMA: LazyLock<serde_json::Value> =
    LazyLock::new(|| schemars::schema_for!(OrgPolicy).to_value());

impl OrgPolicy {
    /// Read a policy from its text; every problem positioned and coded AF-SCH-010.
    #[allow(clippy::should_implement_trait)] // positioned problems, not one `FromStr` error
    pub fn from_str(text: &str) -> Result<OrgPolicy, Vec<Problem>> {
        read_document(text, &SCHEMA).map_err(|problems| {
            problems
                .into_iter()
                .map(|p| Problem {
                    location: p.location,
                    report: Report::new(&codes::SCH_ORG_POLICY, p.report.statement)
                        .with_next(p.report.next),
                })
                .collect()
        })
    }
}

/// Which policy a placement was judged by, as `af validate` shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "policy", rename_all = "snake_case")]
pub enum Residency {
    /// No organization policy was found; nothing restricts regions.
    None {
        /// Where one was looked for.
        looked_in: String,
    },
    /// The policy at `file` allows the target's region.
    Allowed {
        /// The policy file.
        file: String,
        /// The regions it allows.
        allowed_regions: Vec<String>,
        /// The target's region.
        region: String,
    },
}

/// Judge `placement` by `policy` (read from `file`): the verdict, AF-SCH-008 naming the target,
/// its region and the file when the region is not allowed, or AF-SCH-009 when the target
/// carries no region.
pub fn judge(placement: &Placement, file: &str, policy: &OrgPolicy) -> Result<Residency, Report> {
    let target = match &placement.target {
        Some(name) => format!("target {name}"),
        None => "the runtime (no targets are declared)".to_owned(),
    };
    let allowed = if policy.allowed_regions.is_empty() {
        "no region".to_owned()
    } else {
        policy.allowed_regions.join(", ")
    };
    let Some(region) = placement.tags.get(REGION_TAG) else {
        return Err(Report::new(
            &codes::SCH_REGION_UNKNOWN,
            format!(
                "The organization policy {file} allows only {allowed}, but {target} carries no region tag, so it cannot be judged."
            ),
        ));
    };
    if !policy.allowed_regions.contains(region) {
        return Err(Report::new(
            &codes::SCH_REGION_NOT_ALLOWED,
            format!(
                "The organization policy {file} does not allow region {region}, where {target} is; it allows {allowed}."
            ),
        ));
    }
    Ok(Residency::Allowed {
        file: file.to_owned(),
        allowed_regions: policy.allowed_regions.clone(),
        region: region.clone(),
    })
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::placement::Provider;

    fn placed(region: Option<&str>) -> Placement {
        Placement {
            target: Some("frankfurt".into()),
            provider: Provider::Kubernetes,
            kubeconfig_context: None,
            domain: None,
            namespace_prefix: None,
            tags: region
                .map(|r| BTreeMap::from([(REGION_TAG.to_owned(), r.to_owned())]))
                .unwrap_or_default(),
        }
    }

    #[test]
    fn a_placement_is_allowed_refused_or_unjudgeable_by_its_region() {
        let policy =
            OrgPolicy::from_str("allowed_regions: [eu-west-1, eu-central-1]\n").expect("read");
        let cases = [
            (Some("eu-central-1"), Ok("eu-central-1")),
            (Some("us-east-1"), Err("AF-SCH-008")),
            (None, Err("AF-SCH-009")),
        ];
        for (region, expected) in cases {
            let verdict = judge(&placed(region), "/etc/af/org.yaml", &policy);
            let found = verdict
                .as_ref()
                .map(|r| match r {
                    Residency::Allowed { region, .. } => region.as_str(),
                    Residency::None { .. } => "none",
                })
                .map_err(|e| e.code.code);
            assert_eq!(found, expected, "{region:?}");
            if let Err(report) = verdict {
                assert!(report.statement.contains("target frankfurt"));
                assert!(report.statement.contains("/etc/af/org.yaml"));
                assert!(report.statement.contains(region.unwrap_or("no region tag")));
            }
        }
    }

    #[test]
    fn a_policy_with_an_unknown_key_is_refused_at_its_position() {
        let problems = OrgPolicy::from_str("allowed_regions: [eu-west-1]\nregions: [us-east-1]\n")
            .expect_err("refused");
        let found: Vec<(&str, usize, usize)> = problems
            .iter()
            .map(|p| (p.code(), p.location.line, p.location.column))
            .collect();
        assert_eq!(found, [("AF-SCH-010", 2, 1)]);
        assert!(problems[0].report.statement.contains("regions"));
        let wrong_type = OrgPolicy::from_str("allowed_regions: eu-west-1\n").expect_err("refused");
        assert_eq!(wrong_type[0].code(), "AF-SCH-010");
        assert_eq!(wrong_type[0].location.line, 1);
    }
}
