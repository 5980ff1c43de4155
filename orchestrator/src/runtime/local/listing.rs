//! Every environment on this Docker daemon (`af ls`): the containers and networks carrying our
//! label, grouped by environment; a kubelet's containers for the cluster runtime's pods on the
//! same daemon are the cluster's, listed there.

use std::collections::{BTreeMap, HashMap};

use bollard::Docker;
use bollard::models::ContainerSummaryStateEnum;
use bollard::query_parameters::{ListContainersOptionsBuilder, ListNetworksOptionsBuilder};

use super::labels::{self, kind};
use crate::env_id::EnvId;
use crate::runtime::labels::{ENV, KIND, MANAGED, PROJECT, REPOSITORY, SERVICE};
use crate::runtime::{EnvSummary, RuntimeError};

/// Every environment with a container or a network here, by id.
pub(super) async fn environments(docker: &Docker) -> Result<Vec<EnvSummary>, RuntimeError> {
    let ours = HashMap::from([("label".to_owned(), vec![format!("{MANAGED}=true")])]);
    let containers = docker
        .list_containers(Some(
            ListContainersOptionsBuilder::default()
                .all(true)
                .filters(&ours)
                .build(),
        ))
        .await
        .map_err(|e| RuntimeError::engine("list containers", e))?;
    let networks = docker
        .list_networks(Some(
            ListNetworksOptionsBuilder::default().filters(&ours).build(),
        ))
        .await
        .map_err(|e| RuntimeError::engine("list networks", e))?;

    let mut found: BTreeMap<EnvId, EnvSummary> = BTreeMap::new();

    for network in &networks {
        if let Some(env) = env_of(network.labels.as_ref()) {
            summary(&mut found, env);
        }
    }
    for container in &containers {
        if labels::made_by_kubelet(container.labels.as_ref()) {
            continue;
        }
        let Some(env) = env_of(container.labels.as_ref()) else {
            continue;
        };
        let label = |k: &str| container.labels.as_ref().and_then(|l| l.get(k)).cloned();
        let running = container.state == Some(ContainerSummaryStateEnum::RUNNING);
        let env = summary(&mut found, env);
        env.saw_created(container.created);
        match label(KIND).as_deref() {
            Some(kind::SIDECAR) => {
                env.sidecar_running = running;
                env.project = label(PROJECT).or(env.project.take());
                env.repository = label(REPOSITORY).or(env.repository.take());
            }
            Some(kind::SERVICE) => {
                if let Some(service) = label(SERVICE) {
                    env.saw_service(service, running);
                }
            }
            _ => {}
        }
    }
    Ok(found.into_values().collect())
}

/// The environment an object's labels name.
fn env_of(labels: Option<&HashMap<String, String>>) -> Option<EnvId> {
    EnvId::parse(labels?.get(ENV)?).ok()
}

/// `env`'s summary, begun empty.
fn summary(found: &mut BTreeMap<EnvId, EnvSummary>, env: EnvId) -> &mut EnvSummary {
    found
        .entry(env.clone())
        .or_insert_with(|| EnvSummary::empty(env))
}
