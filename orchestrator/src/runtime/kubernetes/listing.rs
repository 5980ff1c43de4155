//! Every environment on this cluster (`af ls`): the namespaces carrying our labels, and in each
//! the sidecar's and the services' pods.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Namespace, Pod};
use kube::api::{Api, ListParams};
use kube::{Client, ResourceExt};

use super::cluster::refused;
use super::names::kind;
use super::namespace;
use super::selection::{self, Need};
use crate::env_id::EnvId;
use crate::runtime::labels::{ENV, KIND, MANAGED, PROJECT, REPOSITORY, SERVICE};
use crate::runtime::{EnvSummary, RuntimeError};

/// Every environment with a namespace on the cluster, by id.
pub(super) async fn environments(client: &Client) -> Result<Vec<EnvSummary>, RuntimeError> {
    let namespaces = Api::<Namespace>::all(client.clone())
        .list(&ListParams::default().labels(&format!("{MANAGED}=true,{KIND}={}", kind::NAMESPACE)))
        .await
        .map_err(refused("list namespaces".to_owned()))?;
    let mut found: BTreeMap<String, EnvSummary> = BTreeMap::new();
    for ns in &namespaces {
        let Some(env) = ns.labels().get(ENV).and_then(|id| EnvId::parse(id).ok()) else {
            continue;
        };
        let annotation = |k: &str| ns.annotations().get(k).cloned();
        let mut summary = EnvSummary::empty(env);
        summary.project = annotation(PROJECT);
        summary.repository = annotation(REPOSITORY);
        summary.saw_created(ns.creation_timestamp().map(|t| t.0.as_second()));
        summary.removing = namespace::terminating(ns);
        found.insert(ns.name_any(), summary);
    }
    if found.is_empty() {
        return Ok(Vec::new());
    }
    let pods = Api::<Pod>::all(client.clone())
        .list(&ListParams::default().labels(&format!("{MANAGED}=true")))
        .await
        .map_err(refused("list pods".to_owned()))?;
    for pod in &pods {
        let Some(summary) = pod.namespace().and_then(|ns| found.get_mut(&ns)) else {
            continue;
        };
        let Some(service) = pod.labels().get(SERVICE) else {
            continue;
        };
        let running = selection::usable(pod, selection::container_of(service), Need::Running);
        match pod.labels().get(KIND).map(String::as_str) {
            Some(kind::SIDECAR) => summary.sidecar_running |= running,
            Some(kind::SERVICE) => summary.saw_service(service.clone(), running),
            _ => {}
        }
    }
    let mut found: Vec<EnvSummary> = found.into_values().collect();
    found.sort_by(|a, b| a.env.cmp(&b.env));
    Ok(found)
}
