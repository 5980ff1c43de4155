//! Restarting the sidecar on a cluster: its Deployment is rolled (the pod template stamped
//! with the time, as `kubectl rollout restart` does), so the Deployment's Recreate strategy
//! stops the old pod (draining it, its journal committed) before the new one starts: never
//! two writers of one journal. Deleting the pod instead would let its ReplicaSet start the
//! new pod while the old one still drains. Done when the Deployment is available again with a
//! Ready pod that is not one of the old ones (`AF_KUBE_SIDECAR_TIMEOUT`) and, for the sidecar,
//! once its Service's Endpoints list only the new pod: the services reach the sidecar through
//! that Service. The data path (kube-proxy, the policy enforcer) learns the new pod's address a
//! moment later still; a dial in that moment is refused, as during the restart itself. A
//! port-forward held across the restart finds the new pod by itself ([`super::forward`]).

use std::time::SystemTime;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Endpoints, Pod};
use kube::api::{Api, ListParams, Patch, PatchParams};
use kube::{Client, ResourceExt};
use serde_json::json;

use super::Timeouts;
use super::cluster::refused;
use super::deploy::{Rollout, wait_available};
use super::names::{self, Names};
use super::namespace;
use super::selection;
use super::wait::{self, Poll};
use crate::runtime::{Quiet, RuntimeError};

/// The pod template's annotation a restart sets.
pub const RESTARTED_AT: &str = "dev.antifailure.restarted-at";

/// Restart the sidecar of `names`' environment and wait until its new pod is Ready and the
/// only one its Service sends to.
pub async fn sidecar(
    client: &Client,
    names: &Names,
    timeouts: &Timeouts,
) -> Result<(), RuntimeError> {
    let old = roll(
        client,
        names,
        names::SIDECAR,
        selection::SIDECAR_SERVICE,
        timeouts.sidecar,
        timeouts,
    )
    .await?;
    served_by_new_pods(client, names, names::SIDECAR, &old, timeouts).await
}

/// Wait until the Endpoints of the Service `name` list ready addresses, none of them a pod of
/// `old` and none still not ready. A cluster without the Endpoints object (it serves only
/// EndpointSlices) is not waited on.
async fn served_by_new_pods(
    client: &Client,
    names: &Names,
    name: &str,
    old: &[String],
    timeouts: &Timeouts,
) -> Result<(), RuntimeError> {
    let ns = names.namespace();
    let endpoints: Api<Endpoints> = Api::namespaced(client.clone(), ns);
    let stage = format!("the Service {name} to send to the new pod");
    let outcome = wait::until(&stage, timeouts.sidecar, timeouts.poll, &Quiet, || async {
        let Some(found) = endpoints
            .get_opt(name)
            .await
            .map_err(refused(format!("read the Endpoints of {name} in {ns}")))?
        else {
            return Ok(Poll::Ready(()));
        };
        let subsets = found.subsets.unwrap_or_default();
        let ready: Vec<String> = subsets
            .iter()
            .flat_map(|s| s.addresses.iter().flatten())
            .map(|a| {
                a.target_ref
                    .as_ref()
                    .and_then(|r| r.name.clone())
                    .unwrap_or_default()
            })
            .collect();
        let pending = subsets.iter().any(|s| {
            s.not_ready_addresses
                .as_ref()
                .is_some_and(|a| !a.is_empty())
        });
        if !ready.is_empty() && !pending && !ready.iter().any(|pod| old.contains(pod)) {
            return Ok(Poll::Ready(()));
        }
        Ok(Poll::Pending(format!("it sends to {ready:?}")))
    })
    .await?;
    outcome.map_err(|state| RuntimeError::Timeout {
        what: format!("the Service {name} in {ns} to send to the new sidecar"),
        seconds: timeouts.sidecar.as_secs(),
        state,
        knob: "AF_KUBE_SIDECAR_TIMEOUT",
    })
}

/// Restart `service` of `names`' environment (its Deployment rolled the same way) and wait
/// until it is available again with new pods (`AF_KUBE_SERVICE_TIMEOUT`). A new pod that could
/// not be shown governed (its fence or its gate failed) stops the service: a rolling update
/// would otherwise keep the old pod running, and a cluster that cannot govern the new pod
/// is no proof the old one still is.
pub async fn service(
    client: &Client,
    names: &Names,
    service: &str,
    timeouts: &Timeouts,
) -> Result<(), RuntimeError> {
    match roll(client, names, service, service, timeouts.service, timeouts).await {
        Ok(_) => Ok(()),
        Err(cause @ (RuntimeError::Ungoverned { .. } | RuntimeError::Unfenced { .. })) => {
            stop(client, names, service).await?;
            Err(RuntimeError::StoppedUngoverned {
                cause: Box::new(cause),
                service: service.to_owned(),
            })
        }
        Err(other) => Err(other),
    }
}

/// Scale the Deployment `service` to no pods, its digest label changed so that the next
/// `af up` replaces it rather than reusing it stopped.
async fn stop(client: &Client, names: &Names, service: &str) -> Result<(), RuntimeError> {
    let ns = names.namespace();
    let patch = json!({
        "metadata": {"labels": {crate::runtime::labels::CONFIG: "stopped"}},
        "spec": {"replicas": 0}
    });
    Api::<Deployment>::namespaced(client.clone(), ns)
        .patch(service, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .map_err(refused(format!("stop Deployment {service} in {ns}")))?;
    Ok(())
}

/// Stamp the Deployment `deployment` (of `service`) and wait for its new pods; the names of
/// the pods it replaced.
async fn roll(
    client: &Client,
    names: &Names,
    deployment: &str,
    service: &str,
    timeout: std::time::Duration,
    timeouts: &Timeouts,
) -> Result<Vec<String>, RuntimeError> {
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
    .await?;
    Ok(old)
}
