//! The one place a command gets its runtime: where the manifest places the environment,
//! judged by the organization policy, then that provider connected. `af validate`, `af up`,
//! `af status`, `af logs` and `af down` all [`decide`] here, so each reaches the same answer
//! from the same files. No command builds a runtime itself.

use std::path::PathBuf;

use af_policy::error::Report;
use af_policy::manifest::{Manifest, Problem};
use af_policy::placement::ecs::EcsReport;
use af_policy::placement::residency::{self, Residency};
use af_policy::placement::{self, Placement, Provider};

use super::kubernetes::{KubeOptions, KubernetesRuntime};
use super::local::{LocalOptions, LocalRuntime};
use super::org_policy::{self, Found, OrgPolicyError};
use super::{Runtime, RuntimeError, ecs};

/// Where an environment runs and the residency verdict that let it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decision {
    /// The placement.
    pub placement: Placement,
    /// Which organization policy judged it.
    pub residency: Residency,
}

/// Why an environment cannot be placed. Nothing has been created.
#[derive(Debug)]
pub enum Refused {
    /// A coded refusal: placement, residency, or the ECS network variables.
    Report(Report),
    /// The organization policy file, refused at positions.
    OrgPolicy {
        /// The file.
        path: PathBuf,
        /// Every problem in it.
        problems: Vec<Problem>,
    },
    /// The ECS runtime's refusal, which carries its report.
    Ecs(Box<EcsReport>),
}

impl From<Report> for Refused {
    fn from(report: Report) -> Self {
        Refused::Report(report)
    }
}

/// Place the environment `manifest` describes (the local runtime when there is none), judge
/// the placement by the organization policy, and refuse `provider: ecs` with its report.
pub fn decide(manifest: Option<&Manifest>) -> Result<Decision, Refused> {
    let placement = match manifest {
        Some(manifest) => manifest.placement()?,
        None => placement::place(&Default::default())?,
    };
    let residency = match org_policy::load() {
        Ok(Found::None { looked_in }) => Residency::None {
            looked_in: looked_in.map_or_else(
                || format!("{} (unset)", org_policy::ENV),
                |p| format!("{} (unset) and {}", org_policy::ENV, p.display()),
            ),
        },
        Ok(Found::Policy { path, policy }) => {
            residency::judge(&placement, &path.display().to_string(), &policy)?
        }
        Err(OrgPolicyError::Unreadable(report)) => return Err(report.into()),
        Err(OrgPolicyError::Invalid { path, problems }) => {
            return Err(Refused::OrgPolicy { path, problems });
        }
    };
    if placement.provider == Provider::Ecs {
        // A placement on ecs comes from a manifest: with none, the runtime is local.
        if let Some(manifest) = manifest {
            return Err(Refused::Ecs(Box::new(ecs::report(manifest)?)));
        }
    }
    Ok(Decision {
        placement,
        residency,
    })
}

/// The runtime `decision` names, with its knobs from the environment.
pub async fn connect(decision: &Decision) -> Result<Box<dyn Runtime>, RuntimeError> {
    connect_to(&decision.placement).await
}

/// Where `af ls` looks: this machine's Docker daemon first, then each cluster the manifest's
/// runtime section offers (its targets, or the runtime itself), each context once; with each,
/// whether environments are placed there (the daemon: with no manifest, or one that offers it).
pub fn places(manifest: Option<&Manifest>) -> Vec<(Placement, bool)> {
    let offered = manifest.map_or_else(Vec::new, |m| placement::offered(&m.runtime));
    let local = offered.iter().find(|p| p.provider == Provider::Local);
    let mut places = vec![match local {
        Some(local) => (local.clone(), true),
        None => (
            Placement {
                target: None,
                provider: Provider::Local,
                kubeconfig_context: None,
                domain: None,
                namespace_prefix: None,
                tags: Default::default(),
            },
            manifest.is_none(),
        ),
    }];
    for placement in offered {
        let seen = places.iter().any(|(p, _)| {
            p.provider == placement.provider && p.kubeconfig_context == placement.kubeconfig_context
        });
        if placement.provider == Provider::Kubernetes && !seen {
            places.push((placement, true));
        }
    }
    places
}

/// The runtime of `placement`, with its knobs from the environment, without the organization
/// policy's judgement (a command that only reads, such as `af ls`).
pub async fn connect_to(placement: &Placement) -> Result<Box<dyn Runtime>, RuntimeError> {
    Ok(match placement.provider {
        Provider::Local => Box::new(LocalRuntime::connect(LocalOptions::from_env()?).await?),
        Provider::Kubernetes => {
            Box::new(KubernetesRuntime::connect(KubeOptions::from_env(placement)?).await?)
        }
        Provider::Ecs => return Err(RuntimeError::Unsupported(ECS_UNDECIDED.to_owned())),
    })
}

/// [`decide`] refuses every ECS placement with its report, so none reaches here.
const ECS_UNDECIDED: &str =
    "The ecs provider refuses every time, with the report af validate shows";
