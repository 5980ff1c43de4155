//! Where an environment runs: the manifest's `runtime:` section and the pure function that
//! places an environment on one of its targets.
//!
//! Placement is a function of the manifest alone, never of a cluster's health, so `af up`,
//! `af status`, `af logs` and `af down` each reach the same answer independently. It does not
//! fail over: a requirement no target meets is refused when the manifest is read.

use std::collections::BTreeMap;
use std::fmt;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::error::{Report, codes};
use crate::manifest::{FieldPath, dns_label_problem};

pub mod ecs;
pub mod residency;

/// The `runtime:` section of a manifest.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Runtime {
    /// The runtime provider: `local` (Docker on this machine) or `kubernetes`; `ecs` is known
    /// and always refuses with its report (docs/ecs.md). Missing means `local`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider: Option<String>,
    /// The kubeconfig context of the cluster, for the kubernetes provider. Missing means the
    /// current context.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kubeconfig_context: Option<String>,
    /// The domain web services are published under, e.g. `preview.example.com`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub domain: Option<String>,
    /// The prefix of the namespaces environments get on a cluster.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace_prefix: Option<String>,
    /// Tags a target must carry, each matched by equality. Empty means the first target.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub requires: BTreeMap<String, String>,
    /// The runtimes an environment may be placed on. Empty means the runtime described above.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub targets: Vec<Target>,
}

/// One runtime an environment may be placed on. Unset fields inherit the `runtime:` section's.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Target {
    /// The target's name: a DNS label.
    pub name: String,
    /// The target's provider, if not the runtime's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider: Option<String>,
    /// The kubeconfig context of the target's cluster.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kubeconfig_context: Option<String>,
    /// The domain web services are published under on this target.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub domain: Option<String>,
    /// The prefix of the namespaces environments get on this target.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace_prefix: Option<String>,
    /// What this target is, for `runtime.requires` to match: `region: eu-west-1`, and so on.
    /// A `region` tag is what residency rules judge.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub tags: BTreeMap<String, String>,
}

/// A runtime provider this build knows: two it runs environments on, and `ecs`, which it
/// refuses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Provider {
    /// Docker on this machine.
    Local,
    /// A Kubernetes cluster, reached through a kubeconfig context.
    Kubernetes,
    /// ECS on Fargate: placed like any provider, so residency judges it, and then refused
    /// every time with the report of [`ecs`].
    Ecs,
}

impl Provider {
    /// Every provider this build runs environments on, in documentation order.
    pub const ALL: [Provider; 2] = [Provider::Local, Provider::Kubernetes];

    /// Providers that are known, placed, and always refuse with a report.
    pub const REFUSING: [Provider; 1] = [Provider::Ecs];

    /// The name used in `af.yaml`.
    pub const fn as_str(self) -> &'static str {
        match self {
            Provider::Local => "local",
            Provider::Kubernetes => "kubernetes",
            Provider::Ecs => "ecs",
        }
    }

    /// The provider a manifest names, or AF-SCH-005 listing what this build has. `ecs` is
    /// a provider: its refusal is the report [`ecs::report`] makes, not a parse error.
    pub fn parse(name: &str) -> Result<Provider, Report> {
        if let Some(provider) = Provider::ALL
            .into_iter()
            .chain(Provider::REFUSING)
            .find(|p| p.as_str() == name)
        {
            return Ok(provider);
        }
        let have = Provider::ALL.map(Provider::as_str).join(", ");
        Err(Report::new(
            &codes::SCH_UNKNOWN_PROVIDER,
            format!("The runtime provider {name} is not one this build has; it has {have}."),
        )
        .with_next(format!("Set the provider to one of: {have}.")))
    }
}

impl fmt::Display for Provider {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The longest namespace prefix: a namespace is the prefix and an environment id of up to 30
/// characters, one DNS label of at most 63.
pub const NAMESPACE_PREFIX_MAX: usize = 33;

/// Where an environment is placed: one target with every inherited field resolved.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Placement {
    /// The chosen target's name; `None` when the manifest declares no targets.
    pub target: Option<String>,
    /// The provider that runs the environment.
    pub provider: Provider,
    /// The kubeconfig context, for a cluster; `None` means the current context.
    pub kubeconfig_context: Option<String>,
    /// The domain web services are published under, if any.
    pub domain: Option<String>,
    /// The prefix of the environment's namespace, if any.
    pub namespace_prefix: Option<String>,
    /// The target's tags (a `region` tag feeds residency rules).
    pub tags: BTreeMap<String, String>,
}

/// Place an environment: the first target carrying every required tag, or the runtime itself
/// when no targets are declared. Refuses with the first problem [`check`] finds, or AF-SCH-001
/// naming the requirement no target meets and what the targets offer.
pub fn place(runtime: &Runtime) -> Result<Placement, Report> {
    if let Some((_, report)) = check(runtime).into_iter().next() {
        return Err(report);
    }
    let candidates = resolve(runtime);
    let chosen = candidates
        .into_iter()
        .flatten()
        .find(|placement| satisfies(&placement.tags, &runtime.requires));
    chosen.ok_or_else(|| unsatisfiable(runtime).1)
}

/// Every placement problem in `runtime`, each with the path (under `runtime`) it is written
/// at: unknown providers, target names that are not DNS labels or repeat, targets
/// sharing a cluster context, Kubernetes targets left on a localhost domain, namespace
/// prefixes that cannot begin a namespace name, and requirements no target meets.
pub fn check(runtime: &Runtime) -> Vec<(FieldPath, Report)> {
    let mut problems = Vec::new();
    let root = FieldPath::root();
    if let Some(problem) = runtime.namespace_prefix.as_deref().and_then(prefix_problem) {
        problems.push((root.key("namespace_prefix"), problem));
    }
    let runtime_provider = runtime.provider.as_deref().map(|name| {
        Provider::parse(name).inspect_err(|report| {
            problems.push((root.key("provider"), report.clone()));
        })
    });

    let targets = FieldPath::root().key("targets");
    let mut contexts: Vec<(&str, String)> = Vec::new();
    for (i, target) in runtime.targets.iter().enumerate() {
        let at = targets.index(i);
        if let Some(problem) = dns_label_problem(&target.name, "runtime target name") {
            problems.push((at.key("name"), problem));
        }
        if let Some(problem) = target.namespace_prefix.as_deref().and_then(prefix_problem) {
            problems.push((at.key("namespace_prefix"), problem));
        }
        if runtime.targets[..i].iter().any(|t| t.name == target.name) {
            problems.push((
                at.key("name"),
                Report::new(
                    &codes::SCH_DUPLICATE_TARGET,
                    format!("Two runtime targets are named {}.", target.name),
                ),
            ));
        }
        let provider = match &target.provider {
            Some(name) => Provider::parse(name)
                .inspect_err(|report| problems.push((at.key("provider"), report.clone())))
                .ok(),
            None => runtime_provider.clone().unwrap_or(Ok(Provider::Local)).ok(),
        };
        let Some(provider) = provider else { continue };
        let context = cluster_identity(provider, context_of(runtime, target));
        if let Some((other, _)) = contexts.iter().find(|(_, c)| *c == context) {
            problems.push((
                at.key(if target.kubeconfig_context.is_some() {
                    "kubeconfig_context"
                } else {
                    "name"
                }),
                Report::new(
                    &codes::SCH_SHARED_CONTEXT,
                    format!(
                        "Runtime targets {other} and {} both resolve to {context}.",
                        target.name
                    ),
                ),
            ));
        } else {
            contexts.push((&target.name, context));
        }
        let domain = target.domain.as_deref().or(runtime.domain.as_deref());
        if provider == Provider::Kubernetes && domain.is_some_and(is_localhost) {
            let field = if target.domain.is_some() {
                at.key("domain")
            } else {
                root.key("domain")
            };
            problems.push((field, localhost_domain(&format!("target {}", target.name))));
        }
    }
    if runtime.targets.is_empty()
        && matches!(runtime_provider, Some(Ok(Provider::Kubernetes)))
        && runtime.domain.as_deref().is_some_and(is_localhost)
    {
        problems.push((root.key("domain"), localhost_domain("runtime")));
    }

    if problems.is_empty()
        && !resolve(runtime)
            .into_iter()
            .flatten()
            .any(|placement| satisfies(&placement.tags, &runtime.requires))
    {
        problems.push(unsatisfiable(runtime));
    }
    problems
}

/// Every placement the runtime offers whose provider is known, in order (where `af ls` looks).
pub fn offered(runtime: &Runtime) -> Vec<Placement> {
    resolve(runtime).into_iter().flatten().collect()
}

/// Every placement the runtime offers, in order; `Err` for a target whose provider is refused.
fn resolve(runtime: &Runtime) -> Vec<Result<Placement, Report>> {
    let runtime_provider = runtime
        .provider
        .as_deref()
        .map_or(Ok(Provider::Local), Provider::parse);
    if runtime.targets.is_empty() {
        return vec![runtime_provider.map(|provider| Placement {
            target: None,
            provider,
            kubeconfig_context: runtime.kubeconfig_context.clone(),
            domain: runtime.domain.clone(),
            namespace_prefix: runtime.namespace_prefix.clone(),
            tags: BTreeMap::new(),
        })];
    }
    runtime
        .targets
        .iter()
        .map(|target| {
            let provider = match &target.provider {
                Some(name) => Provider::parse(name)?,
                None => runtime_provider.clone()?,
            };
            Ok(Placement {
                target: Some(target.name.clone()),
                provider,
                kubeconfig_context: context_of(runtime, target).map(str::to_owned),
                domain: target.domain.clone().or_else(|| runtime.domain.clone()),
                namespace_prefix: target
                    .namespace_prefix
                    .clone()
                    .or_else(|| runtime.namespace_prefix.clone()),
                tags: target.tags.clone(),
            })
        })
        .collect()
}

fn context_of<'a>(runtime: &'a Runtime, target: &'a Target) -> Option<&'a str> {
    target
        .kubeconfig_context
        .as_deref()
        .or(runtime.kubeconfig_context.as_deref())
}

/// What a target runs on, for telling two targets apart: the local provider has one Docker
/// daemon per machine, a cluster is named by its kubeconfig context.
fn cluster_identity(provider: Provider, context: Option<&str>) -> String {
    match (provider, context) {
        (Provider::Local, _) => "the local Docker daemon".to_owned(),
        (Provider::Kubernetes, Some(context)) => format!("the kubeconfig context {context}"),
        (Provider::Kubernetes, None) => "the current kubeconfig context".to_owned(),
        (Provider::Ecs, _) => "the ECS cluster AF_ECS_CLUSTER names".to_owned(),
    }
}

fn satisfies(tags: &BTreeMap<String, String>, requires: &BTreeMap<String, String>) -> bool {
    requires.iter().all(|(k, v)| tags.get(k) == Some(v))
}

fn is_localhost(domain: &str) -> bool {
    let domain = domain.trim_end_matches('.').to_ascii_lowercase();
    domain == "localhost" || domain.ends_with(".localhost")
}

/// AF-SCH-007 unless `prefix` can begin a namespace name: 1 to [`NAMESPACE_PREFIX_MAX`]
/// lower-case letters, digits and hyphens, starting with a letter (the environment id that
/// follows never starts with a hyphen, so the prefix may end with one).
fn prefix_problem(prefix: &str) -> Option<Report> {
    let valid = (1..=NAMESPACE_PREFIX_MAX).contains(&prefix.len())
        && prefix.starts_with(|c: char| c.is_ascii_lowercase())
        && prefix
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-');
    (!valid).then(|| {
        Report::new(
            &codes::SCH_NAMESPACE_PREFIX,
            format!("The namespace prefix {prefix:?} cannot begin a Kubernetes namespace name."),
        )
    })
}

/// AF-SCH-004 for `what` ("target eu", "runtime").
fn localhost_domain(what: &str) -> Report {
    Report::new(
        &codes::SCH_LOCALHOST_DOMAIN,
        format!("The Kubernetes {what} still has a localhost domain."),
    )
}

/// AF-SCH-001 for a runtime whose requirements no target meets, at the requirement it names.
fn unsatisfiable(runtime: &Runtime) -> (FieldPath, Report) {
    let requires = FieldPath::root().key("requires");
    let placements: Vec<Placement> = resolve(runtime).into_iter().flatten().collect();
    let offered = |keys: &[&String]| -> String {
        if runtime.targets.is_empty() {
            return "no targets are declared under runtime.targets".to_owned();
        }
        let offers: Vec<String> = placements
            .iter()
            .map(|p| {
                let tags: Vec<String> = keys
                    .iter()
                    .map(|k| match p.tags.get(*k) {
                        Some(v) => format!("{k}={v}"),
                        None => format!("no {k}"),
                    })
                    .collect();
                format!(
                    "{} ({})",
                    tags.join(" "),
                    p.target.as_deref().unwrap_or_default()
                )
            })
            .collect();
        format!("targets offer {}", offers.join(", "))
    };
    let alone = runtime
        .requires
        .iter()
        .find(|(k, v)| !placements.iter().any(|p| p.tags.get(*k) == Some(*v)));
    let (path, statement) = match alone {
        Some((key, value)) => (
            requires.key(key.clone()),
            format!(
                "No runtime satisfies the placement requirement {key}={value}; {}.",
                offered(&[key])
            ),
        ),
        None => {
            let keys: Vec<&String> = runtime.requires.keys().collect();
            let wanted: Vec<String> = runtime
                .requires
                .iter()
                .map(|(k, v)| format!("{k}={v}"))
                .collect();
            (
                requires,
                format!(
                    "No runtime satisfies the placement requirements {} together; {}.",
                    wanted.join(", "),
                    offered(&keys)
                ),
            )
        }
    };
    (path, Report::new(&codes::SCH_UNSATISFIABLE, statement))
}
