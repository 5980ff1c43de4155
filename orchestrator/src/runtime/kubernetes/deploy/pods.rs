//! What the pods of a Deployment or a Job say about themselves while af waits on them: a fence
//! that could not be written or a gate that gave up (the pod was never governed), an image a
//! node could not pull ([`pulls`]), a container stuck where it will not leave by itself, and a short state for progress lines.

use k8s_openapi::api::core::v1::Pod;
use kube::ResourceExt;
use kube::api::{Api, LogParams};

use super::services;
use crate::runtime::RuntimeError;
use crate::runtime::kubernetes::names::kind;
use crate::runtime::kubernetes::pulls;
use crate::runtime::labels::KIND;

/// Container states after which a pod will not start without a change.
const STUCK: [&str; 5] = [
    "ErrImageNeverPull",
    "ImagePullBackOff",
    "InvalidImageName",
    "CreateContainerConfigError",
    "CrashLoopBackOff",
];

/// Refuse on what `pods` (of `service`, read through `api`) say: a fence that could not be
/// written or a gate that gave up means the pod was never governed (AF-RUN-043, with what its
/// log names); a container stuck where it will not leave by itself means it will never be
/// ready.
pub async fn refuse_stuck(
    api: &Api<Pod>,
    pods: &[Pod],
    service: &str,
    namespace: &str,
) -> Result<(), RuntimeError> {
    for pod in pods {
        if let Some(why) = init_failed(pod, services::FENCE) {
            let log = last_said(api, &pod.name_any(), services::FENCE, "error").await;
            return Err(RuntimeError::Unfenced {
                service: service.to_owned(),
                namespace: namespace.to_owned(),
                why: log.unwrap_or(why),
            });
        }
        if let Some(route) = init_failed(pod, services::GATE) {
            let log = last_said(api, &pod.name_any(), services::GATE, "route").await;
            return Err(RuntimeError::Ungoverned {
                service: service.to_owned(),
                namespace: namespace.to_owned(),
                route: log.unwrap_or(route),
            });
        }
        if let Some(unpulled) = pulls::refusal(&api.clone().into_client(), pod, service).await {
            return Err(unpulled);
        }
        if let Some(stuck) = stuck(pod) {
            return Err(RuntimeError::NotReady {
                service: service.to_owned(),
                seconds: 0,
                tail: vec![stuck],
            });
        }
    }
    Ok(())
}

/// A pod of a migration or of a cron run: never one a Deployment waits on.
pub fn runs_once(pod: &Pod) -> bool {
    matches!(
        pod.labels().get(KIND).map(String::as_str),
        Some(kind::MIGRATION | kind::CRON)
    )
}

/// The init container `name`'s own account, when it exited non-zero.
fn init_failed(pod: &Pod, name: &str) -> Option<String> {
    let statuses = pod.status.as_ref()?.init_container_statuses.as_ref()?;
    let gate = statuses.iter().find(|s| s.name == name)?;
    let terminated = gate
        .state
        .as_ref()
        .and_then(|s| s.terminated.as_ref())
        .or_else(|| gate.last_state.as_ref().and_then(|s| s.terminated.as_ref()))?;
    (terminated.exit_code != 0).then(|| {
        terminated
            .message
            .clone()
            .unwrap_or_else(|| format!("its {name} exited with status {}", terminated.exit_code))
    })
}

/// The `field` of the last line of `container`'s log that has one (the gate's route, the
/// fence's error).
async fn last_said(pods: &Api<Pod>, pod: &str, container: &str, field: &str) -> Option<String> {
    let params = LogParams {
        container: Some(container.to_owned()),
        previous: false,
        tail_lines: Some(5),
        ..LogParams::default()
    };
    let text = pods.logs(pod, &params).await.ok()?;
    let key = format!("\"{field}\"");
    let line = text.lines().rev().find(|l| l.contains(&key))?;
    let value: serde_json::Value = serde_json::from_str(line).ok()?;
    value.get(field)?.as_str().map(str::to_owned)
}

/// A container of `pod` waiting in a state it will not leave by itself.
fn stuck(pod: &Pod) -> Option<String> {
    let (container, reason, message) = pulls::waiting_on(pod, &STUCK)?;
    Some(format!(
        "{}: {reason}{}",
        container.name,
        message.map(|m| format!(" ({m})")).unwrap_or_default()
    ))
}

/// `2 pods: Pending, Init:0/1` for progress lines.
pub fn pod_states(pods: &[Pod]) -> String {
    if pods.is_empty() {
        return "no pod yet".to_owned();
    }
    let states: Vec<String> = pods
        .iter()
        .map(|p| {
            let status = p.status.as_ref();
            let gate_running = status
                .and_then(|s| s.init_container_statuses.as_ref())
                .and_then(|s| s.iter().find(|c| c.name == services::GATE))
                .and_then(|c| c.state.as_ref())
                .is_some_and(|s| s.running.is_some());
            if gate_running {
                "gate running".to_owned()
            } else {
                status
                    .and_then(|s| s.phase.clone())
                    .unwrap_or_else(|| "Pending".to_owned())
            }
        })
        .collect();
    states.join(", ")
}
