//! Why there is no ECS runtime: `provider: ecs` is placed like any other and then refused,
//! every time, with a report rather than an error.
//!
//! The report is a pure computation over the manifest's egress catalogue, the network the
//! caller describes ([`network`]) and AWS's documented behaviour: the configuration the runtime
//! would generate ([`plan`]), its DNS Firewall names ([`allow_list`]) and rule group
//! ([`rule_group`], whose check anyone can run), and the thirteen egress paths judged against
//! it ([`paths`]).

pub mod allow_list;
pub mod network;
pub mod paths;
pub mod plan;
pub mod rule_group;

use std::fmt;

use serde::Serialize;

use crate::egress::EgressSpec;
use crate::error::{Report, codes};
use allow_list::AllowList;
use network::Network;
use paths::{EgressPath, Grade, Verdict};
use plan::Plan;

/// What a reader of a report made for placeholders is told before anything else.
pub const PLACEHOLDER_NOTICE: &str = "No AF_ECS_* variable is set, so this report is for a placeholder network. Setting AF_ECS_REGION, AF_ECS_CLUSTER, AF_ECS_VPC_ID, AF_ECS_VPC_CIDR, AF_ECS_SUBNET_IDS and AF_ECS_SUBNET_CIDRS changes the report, not the answer.";

/// The plain summary every report ends with.
pub const SUMMARY: &str = "af runs on EKS and not on raw ECS: use runtime.provider: kubernetes against an EKS cluster, where the containment probe runs.";

/// The ECS runtime's report for one environment.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct EcsReport {
    /// [`PLACEHOLDER_NOTICE`] when the network is a placeholder.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub notice: Option<&'static str>,
    /// The environment's name (the manifest's).
    pub environment: String,
    /// How many paths are closed, open and unproven.
    pub counts: Counts,
    /// The thirteen paths.
    pub paths: Vec<EgressPath>,
    /// The DNS Firewall names generated from the egress catalogue.
    pub allow_list: AllowList,
    /// [`SUMMARY`].
    pub summary: &'static str,
    /// The configuration the paths were judged against.
    #[serde(skip)]
    pub plan: Plan,
}

/// Paths by verdict.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Counts {
    /// Closed by the plan.
    pub closed: usize,
    /// Open.
    pub open: usize,
    /// Decided neither by the plan nor by AWS's documentation.
    pub unproven: usize,
}

/// The report for the environment `name` with catalogue `egress` on `network`.
pub fn report(name: &str, egress: &EgressSpec, network: &Network) -> EcsReport {
    let allow_list = AllowList::from_catalogue(egress);
    let plan = Plan::generate(name, network, &allow_list);
    let paths = paths::judge(&plan, &allow_list);
    let count = |v| paths.iter().filter(|p| p.verdict == v).count();
    EcsReport {
        notice: network.placeholder.then_some(PLACEHOLDER_NOTICE),
        environment: name.to_owned(),
        counts: Counts {
            closed: count(Verdict::Closed),
            open: count(Verdict::Open),
            unproven: count(Verdict::Unproven),
        },
        paths,
        allow_list,
        summary: SUMMARY,
        plan,
    }
}

impl EcsReport {
    /// The refusal: AF-SCH-006 with the counts, then AF-SCH-012 for each declared host DNS
    /// Firewall cannot hold.
    pub fn refusals(&self) -> Vec<Report> {
        let named = |v| {
            let names: Vec<&str> = self
                .paths
                .iter()
                .filter(|p| p.verdict == v)
                .map(|p| p.name)
                .collect();
            if names.is_empty() {
                String::new()
            } else {
                format!(" ({})", names.join("; "))
            }
        };
        let mut refusals = vec![Report::new(
            &codes::SCH_PROVIDER_UNAVAILABLE,
            format!(
                "The ecs provider refuses every time: of the {} egress paths out of a Fargate task, {} are closed by the configuration it would generate, {} open{} and {} unproven{}.",
                self.paths.len(),
                self.counts.closed,
                self.counts.open,
                named(Verdict::Open),
                self.counts.unproven,
                named(Verdict::Unproven),
            ),
        )
        .with_next(SUMMARY)];
        refusals.extend(self.allow_list.unexpressible.iter().map(|u| {
            Report::new(
                &codes::SCH_ECS_DOMAIN,
                format!(
                    "The egress host {} ({}) cannot be a DNS Firewall domain: {}.",
                    u.host, u.mode, u.reason
                ),
            )
        }));
        refusals
    }
}

/// The report for people: the notice first, then each path with its closures and evidence.
impl fmt::Display for EcsReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(notice) = self.notice {
            writeln!(f, "{notice}\n")?;
        }
        writeln!(
            f,
            "ECS on Fargate (platform 1.4.0+), environment {}: {} egress paths, {} closed, {} open, {} unproven.",
            self.environment,
            self.paths.len(),
            self.counts.closed,
            self.counts.open,
            self.counts.unproven
        )?;
        for path in &self.paths {
            let grade = match path.grade {
                Grade::Computed => "computed from the plan",
                Grade::Observed => "observed in a running task",
                Grade::Documented => "stated in AWS documentation",
            };
            let verdict = match path.verdict {
                Verdict::Closed => "closed  ",
                Verdict::Open => "OPEN    ",
                Verdict::Unproven => "UNPROVEN",
            };
            writeln!(f, "\n{verdict} {} [{}]", path.name, path.id)?;
            writeln!(f, "         {} ({grade})", path.why)?;
            for closure in &path.closed_by {
                writeln!(f, "         closed by {}: {}", closure.at, closure.says)?;
            }
            for citation in &path.evidence.documented {
                writeln!(
                    f,
                    "         AWS: \"{}\" ({})",
                    citation.title, citation.guide
                )?;
            }
        }
        writeln!(
            f,
            "\nObserved in a running task: nothing. Every closure above is computed from the plan document (--plan FILE writes it); none was recorded by an attempt.\n"
        )?;
        write!(f, "{}", self.summary)
    }
}

#[cfg(test)]
mod tests;
