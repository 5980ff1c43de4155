//! `af status` on a cluster: the sidecar and each service from their Deployments and pods
//! (found by the environment's labels), each pod's state in words (`running`, `pending (gate
//! running)`, `crashloop`, ...), and where the sidecar's journal lives.

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, ListParams};
use kube::{Client, ResourceExt};

use super::cluster::refused;
use super::deploy::{journal, keeper, services};
use super::names::{Names, kind};
use super::namespace;
use super::selection::{self, Need};
use crate::runtime::labels::{KIND, SERVICE};
use crate::runtime::{EnvStatus, RuntimeError, ServiceStatus};

/// The state of the environment of `names`; empty when its namespace does not exist.
pub async fn status(client: &Client, names: &Names) -> Result<EnvStatus, RuntimeError> {
    let mut status = EnvStatus {
        env: names.env().clone(),
        exists: namespace::ours(client, names).await?.is_some(),
        sidecar: None,
        services: Vec::new(),
        journal: None,
        watched: None,
        on_loss: None,
        containment: None,
    };
    if !status.exists {
        return Ok(status);
    }
    let ns = names.namespace();
    let lp = ListParams::default().labels(&names.selector());
    let deployments = Api::<Deployment>::namespaced(client.clone(), ns)
        .list(&lp)
        .await
        .map_err(refused(format!("list the Deployments of {ns}")))?;
    let pods = Api::<Pod>::namespaced(client.clone(), ns)
        .list(&lp)
        .await
        .map_err(refused(format!("list the pods of {ns}")))?;
    let label =
        |labels: &BTreeMap<String, String>, key: &str| labels.get(key).cloned().unwrap_or_default();
    // Every running pod of a service's Deployment carries a containment watcher.
    let mut watched = Vec::new();
    for d in &deployments.items {
        let (k, service) = (label(d.labels(), KIND), label(d.labels(), SERVICE));
        if k != kind::SIDECAR && k != kind::SERVICE {
            continue;
        }
        let mine: Vec<Pod> = pods
            .items
            .iter()
            .filter(|p| label(p.labels(), KIND) == k && label(p.labels(), SERVICE) == service)
            .cloned()
            .collect();
        let container = if k == kind::SIDECAR {
            selection::SIDECAR_CONTAINER
        } else {
            service.as_str()
        };
        let (mut state, running) = deployment_state(d, &mine, container);
        if let Some(why) = d.annotations().get(keeper::STOPPED) {
            state = format!("stopped by the keeper: {why}");
        }
        let entry = ServiceStatus {
            name: service.clone(),
            state,
            running,
            url: None,
            addresses: mine
                .iter()
                .filter_map(|p| p.status.as_ref()?.pod_ip.as_deref()?.parse().ok())
                .collect(),
        };
        if k == kind::SIDECAR {
            status.on_loss = d.annotations().get(keeper::ON_LOSS).cloned();
            let newest = selection::choose(&mine, container, Need::Running)
                .map(str::to_owned)
                .or_else(|| mine.first().map(ResourceExt::name_any));
            status.journal = journal::place(d, newest.as_deref());
            status.sidecar = Some(entry);
        } else {
            watched.extend(
                mine.iter()
                    .filter(|p| pod_state(p, container).1)
                    .map(ResourceExt::name_any),
            );
            status.services.push(entry);
        }
    }
    watched.sort();
    status.watched = Some(watched);
    status.services.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(status)
}

/// The state of a Deployment from its pods: one pod's own state, or each state with how many
/// pods are in it; running when any pod's `container` runs.
pub fn deployment_state(d: &Deployment, pods: &[Pod], container: &str) -> (String, bool) {
    if pods.is_empty() {
        let state = if d.spec.replicas == Some(0) {
            "scaled to 0"
        } else {
            "no pod yet"
        };
        return (state.to_owned(), false);
    }
    let states: Vec<(String, bool)> = pods.iter().map(|p| pod_state(p, container)).collect();
    let running = states.iter().any(|(_, r)| *r);
    if let [(one, _)] = states.as_slice() {
        return (one.clone(), running);
    }
    let mut counted: BTreeMap<&str, usize> = BTreeMap::new();
    for (s, _) in &states {
        *counted.entry(s.as_str()).or_default() += 1;
    }
    let words: Vec<String> = counted.iter().map(|(s, n)| format!("{n} {s}")).collect();
    (words.join(", "), running)
}

/// One pod's state in words, and whether its `container` runs.
pub fn pod_state(pod: &Pod, container: &str) -> (String, bool) {
    if pod.metadata.deletion_timestamp.is_some() {
        return ("terminating".to_owned(), false);
    }
    let Some(status) = pod.status.as_ref() else {
        return ("pending".to_owned(), false);
    };
    let gate = status
        .init_container_statuses
        .iter()
        .flatten()
        .find(|c| c.name == services::GATE)
        .and_then(|c| c.state.as_ref());
    if let Some(gate) = gate {
        if gate.running.is_some() {
            return ("pending (gate running)".to_owned(), false);
        }
        if let Some(t) = gate.terminated.as_ref().filter(|t| t.exit_code != 0) {
            return (format!("gate failed ({})", t.exit_code), false);
        }
        if let Some(reason) = gate.waiting.as_ref().and_then(|w| w.reason.as_deref()) {
            return (format!("pending (gate {reason})"), false);
        }
    }
    let main = status
        .container_statuses
        .iter()
        .flatten()
        .find(|c| c.name == container)
        .and_then(|c| c.state.as_ref());
    if let Some(state) = main {
        if let Some(reason) = state.waiting.as_ref().and_then(|w| w.reason.as_deref()) {
            return match reason {
                "CrashLoopBackOff" => ("crashloop".to_owned(), false),
                other => (format!("waiting ({other})"), false),
            };
        }
        if let Some(t) = state.terminated.as_ref() {
            return (format!("exited ({})", t.exit_code), false);
        }
    }
    if selection::usable(pod, container, Need::Ready) {
        return ("running".to_owned(), true);
    }
    if selection::usable(pod, container, Need::Running) {
        return ("running (not ready)".to_owned(), true);
    }
    let phase = status.phase.as_deref().unwrap_or("Pending");
    (phase.to_ascii_lowercase(), false)
}
