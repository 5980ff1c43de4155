//! The one place a command gets its runtime: the provider the manifest's placement names,
//! connected. No command builds a runtime itself.

use af_policy::placement::{Placement, Provider};

use super::kubernetes::{KubeOptions, KubernetesRuntime};
use super::local::{LocalOptions, LocalRuntime};
use super::{Runtime, RuntimeError};

/// The runtime `placement` names, with its knobs from the environment.
pub async fn connect(placement: &Placement) -> Result<Box<dyn Runtime>, RuntimeError> {
    Ok(match placement.provider {
        Provider::Local => Box::new(LocalRuntime::connect(LocalOptions::from_env()?).await?),
        Provider::Kubernetes => {
            Box::new(KubernetesRuntime::connect(KubeOptions::from_env(placement)?).await?)
        }
    })
}
