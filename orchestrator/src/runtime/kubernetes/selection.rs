//! Which pods of an environment a command reaches: the sidecar's or a service's, by their
//! labels, the newest one usable as the command needs (running, or running and Ready).

use k8s_openapi::api::core::v1::Pod;

use super::names::{Names, kind};
use crate::runtime::labels::SERVICE;

/// The `dev.antifailure.service` of the sidecar's pods.
pub const SIDECAR_SERVICE: &str = "sidecar";
/// The sidecar's container in its pod.
pub const SIDECAR_CONTAINER: &str = "sidecar";

/// The container of `service` in its pods: named after the service, `sidecar` for the sidecar.
pub fn container_of(service: &str) -> &str {
    if service == SIDECAR_SERVICE {
        SIDECAR_CONTAINER
    } else {
        service
    }
}

/// What a pod must be for a use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Need {
    /// Its container running (a command can be run in it).
    Running,
    /// Running and Ready (the sidecar answering its admin API).
    Ready,
}

/// Whether `pod` is usable: Running, not being deleted, its `container` running, and Ready
/// when `need` says so.
pub fn usable(pod: &Pod, container: &str, need: Need) -> bool {
    let Some(status) = pod.status.as_ref() else {
        return false;
    };
    let running =
        status.phase.as_deref() == Some("Running")
            && pod.metadata.deletion_timestamp.is_none()
            && status.container_statuses.iter().flatten().any(|c| {
                c.name == container && c.state.as_ref().is_some_and(|s| s.running.is_some())
            });
    let ready = status
        .conditions
        .iter()
        .flatten()
        .any(|c| c.type_ == "Ready" && c.status == "True");
    running && (need == Need::Running || ready)
}

/// The name of the newest pod usable as `need` says (a rollout's new pod before its old one).
pub fn choose<'p>(pods: &'p [Pod], container: &str, need: Need) -> Option<&'p str> {
    pods.iter()
        .filter(|p| usable(p, container, need))
        .max_by(|a, b| {
            (&a.metadata.creation_timestamp, &a.metadata.name)
                .cmp(&(&b.metadata.creation_timestamp, &b.metadata.name))
        })
        .and_then(|p| p.metadata.name.as_deref())
}

/// The label selector of the pods of `service` (the sidecar's included) in the environment.
pub fn service_selector(names: &Names, service: &str) -> String {
    format!("{},{SERVICE}={service}", names.selector())
}

/// The label selector of the sidecar's pods (never a service's, whatever its name).
pub fn sidecar_selector(names: &Names) -> String {
    format!(
        "{},{SERVICE}={SIDECAR_SERVICE}",
        names.selector_of(kind::SIDECAR)
    )
}
