//! Restarting the sidecar on a cluster: its Deployment is rolled (the pod template stamped
//! with the time, as `kubectl rollout restart` does), so the Deployment's Recreate strategy
//! stops the old pod (draining it, its journal committed) before the new one starts: never
//! two writers of one journal. Deleting the pod instead would let its ReplicaSet start the
//! new pod while the old one still drains. Done when the Deployment is available again with a
//! Ready pod that is not one of the old ones (`AF_KUBE_SIDECAR_TIMEOUT`); a port-forward held
//! across the restart finds the new pod by itself ([`super::forward`]).

use std::time::SystemTime;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, ListParams, Patch, PatchParams};
use kube::{Client, ResourceExt};
use serde_json::json;

use super::Timeouts;
use super::cluster::refused;
use super::deploy::{Rollout, wait_available};
use super::names::{self, Names};
use super::namespace;
use super::selection;
use crate::runtime::{Quiet, RuntimeError};

/// The pod template's annotation a restart sets.
pub const RESTARTED_AT: &str = "dev.antifailure.restarted-at";

/// Restart the sidecar of `names`' environment and wait until its new pod is Ready.
pub async fn sidecar(
    client: &Client,
    names: &Names,
    timeouts: &Timeouts,
) -> Result<(), RuntimeError> {
    roll(
        client,
        names,
        names::SIDECAR,
        selection::SIDECAR_SERVICE,
        timeouts.sidecar,
        timeouts,
    )
    .await
}

/// Restart `service` of `names`' environment (its Deployment rolled the same way) and wait
/// until it is available again with new pods (`AF_KUBE_SERVICE_TIMEOUT`).
pub async fn service(
    client: &Client,
    names: &Names,
    service: &str,
    timeouts: &Timeouts,
) -> Result<(), RuntimeError> {
    roll(client, names, service, service, timeouts.service, timeouts).await
}

/// Stamp the Deployment `deployment` (of `service`) and wait for its new pods.
async fn roll(
    client: &Client,
    names: &Names,
    deployment: &str,
    service: &str,
    timeout: std::time::Duration,
    timeouts: &Timeouts,
) -> Result<(), RuntimeError> {
    if namespace::ours(client, names).await?.is_none() {
        return Err(RuntimeError::NoEnvironment(names.env().to_string()));
    }
    let ns = names.namespace();
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), ns);
    if deployments
        .get_opt(deployment)
        .await
        .map_err(refused(format!("read Deployment {deployment} in {ns}")))?
        .is_none()
    {
        return Err(RuntimeError::NoService {
            env: names.env().to_string(),
            service: service.to_owned(),
        });
    }
    let selector = format!(
        "{},{}={service}",
        names.selector(),
        crate::runtime::labels::SERVICE
    );
    let old: Vec<String> = Api::<Pod>::namespaced(client.clone(), ns)
        .list(&ListParams::default().labels(&selector))
        .await
        .map_err(refused(format!("list the pods of {service} in {ns}")))?
        .items
        .iter()
        .map(ResourceExt::name_any)
        .collect();
    let at = humantime::format_rfc3339_seconds(SystemTime::now()).to_string();
    let patch = json!({"spec": {"template": {"metadata": {"annotations": {RESTARTED_AT: at}}}}});
    deployments
        .patch(deployment, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .map_err(refused(format!("restart Deployment {deployment} in {ns}")))?;
    wait_available(
        client,
        names,
        timeouts.poll,
        Rollout {
            name: deployment,
            service,
            timeout,
            not: &old,
        },
        &Quiet,
    )
    .await
}
