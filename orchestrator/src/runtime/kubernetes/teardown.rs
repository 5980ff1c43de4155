//! `af down` on a cluster: the namespace goes, if it is ours, and `down` waits until it is
//! gone, so the next `af up` never meets a namespace still terminating. A pod whose containers
//! have all stopped but which its kubelet still holds well past its deletion time is removed
//! with grace 0 (nothing of it runs any longer); one whose containers still run is never
//! forced. A namespace that does not go within its timeout is named with what holds it: its
//! finalizers, what its conditions say remains, and each overdue pod with what still runs.

use std::sync::Mutex;
use std::time::{SystemTime, UNIX_EPOCH};

use k8s_openapi::api::core::v1::{Namespace, Pod};
use kube::api::{Api, DeleteParams, ListParams};
use kube::{Client, ResourceExt};

use super::Timeouts;
use super::cluster::{is_status, refused};
use super::names::Names;
use super::namespace;
use super::wait::{self, Poll};
use crate::runtime::{DownReport, Phase, Progress, RuntimeError};

/// Delete the environment's namespace (AF-RUN-045 if it is not ours) and wait until it is gone.
pub async fn down(
    client: &Client,
    names: &Names,
    timeouts: &Timeouts,
    progress: &dyn Progress,
) -> Result<DownReport, RuntimeError> {
    let mut report = DownReport::default();
    let name = names.namespace();
    let Some(found) = namespace::ours(client, names).await? else {
        return Ok(report);
    };
    let api: Api<Namespace> = Api::all(client.clone());
    progress.phase(&format!("namespace {name}"), Phase::Removing);
    if !namespace::terminating(&found) {
        match api.delete(name, &DeleteParams::background()).await {
            Ok(_) => {}
            Err(e) if is_status(&e, 404) => {}
            Err(e) => return Err(refused(format!("delete namespace {name}"))(e)),
        }
    }
    let pods: Api<Pod> = Api::namespaced(client.clone(), name);
    let let_go = Mutex::new(Vec::new());
    let gone = wait::until(
        &format!("namespace {name} to go"),
        timeouts.down,
        timeouts.poll,
        progress,
        || async {
            let now = api
                .get_opt(name)
                .await
                .map_err(refused(format!("read namespace {name}")))?;
            let Some(ns) = now else {
                return Ok(Poll::Ready(()));
            };
            let mut held = holders(&ns);
            let mut let_go_now = false;
            for pod in pods
                .list(&ListParams::default())
                .await
                .map_err(refused(format!("list the pods of namespace {name}")))?
            {
                match overdue(&pod, unix_now()) {
                    None => {}
                    Some(Overdue::Stopped { late }) => {
                        let pod_name = pod.name_any();
                        match pods
                            .delete(&pod_name, &DeleteParams::default().grace_period(0))
                            .await
                        {
                            Ok(_) => {}
                            Err(e) if is_status(&e, 404) => {}
                            Err(e) => return Err(refused(format!("delete pod {pod_name}"))(e)),
                        }
                        let_go_now = true;
                        let_go
                            .lock()
                            .unwrap_or_else(std::sync::PoisonError::into_inner)
                            .push(format!(
                            "pod {pod_name} (its containers had stopped; its kubelet still held it \
                             {late} s past its deletion, so it was removed with grace 0)"
                        ));
                    }
                    Some(Overdue::Running { late, containers }) => held.push(format!(
                        "pod {} on {}: {} still running {late} s past its deletion",
                        pod.name_any(),
                        pod.spec
                            .as_ref()
                            .and_then(|s| s.node_name.as_deref())
                            .unwrap_or("no node"),
                        containers.join(", ")
                    )),
                }
            }
            // What was let go may have been all that held it.
            if let_go_now && api.get_opt(name).await.ok().flatten().is_none() {
                return Ok(Poll::Ready(()));
            }
            Ok(Poll::Pending(held.join("; ")))
        },
    )
    .await?;
    report.removed.extend(
        let_go
            .into_inner()
            .unwrap_or_else(std::sync::PoisonError::into_inner),
    );
    match gone {
        Ok(()) => report.removed.push(format!("namespace {name}")),
        Err(held) => report.failed.push((
            format!("namespace {name}"),
            format!(
                "still terminating after {} s; held by {}",
                timeouts.down.as_secs(),
                if held.is_empty() {
                    "nothing it names".to_owned()
                } else {
                    held
                }
            ),
        )),
    }
    Ok(report)
}

/// How long past its deletion time a pod whose containers have all stopped is left to its
/// kubelet (whose own clean-up, volumes and sandbox, takes seconds) before `down` removes it.
const LET_GO_SECS: i64 = 20;

/// A pod of a terminating namespace still there well past its deletion time.
#[derive(Debug, PartialEq, Eq)]
pub enum Overdue {
    /// None of its containers runs: only its kubelet's clean-up holds it.
    Stopped {
        /// Seconds past its deletion time.
        late: i64,
    },
    /// These containers run, or were never reported stopped: it is never forced.
    Running {
        /// Seconds past its deletion time.
        late: i64,
        /// The containers, init containers first.
        containers: Vec<String>,
    },
}

/// Whether `pod` is more than [`LET_GO_SECS`] past its deletion time at `now` (Unix
/// seconds), and what of it still runs.
pub fn overdue(pod: &Pod, now: i64) -> Option<Overdue> {
    let due = pod.metadata.deletion_timestamp.as_ref()?.0.as_second();
    let late = now - due;
    if late <= LET_GO_SECS {
        return None;
    }
    let status = pod.status.as_ref();
    let reported = status
        .into_iter()
        .flat_map(|s| {
            s.init_container_statuses
                .iter()
                .flatten()
                .chain(s.container_statuses.iter().flatten())
        })
        .collect::<Vec<_>>();
    let declared = pod
        .spec
        .iter()
        .flat_map(|s| s.init_containers.iter().flatten().chain(&s.containers))
        .map(|c| c.name.as_str());
    let containers: Vec<String> = declared
        .filter(|name| {
            // Stopped: reported terminated, or waiting (never started, or not again).
            !reported.iter().any(|c| {
                &c.name == name
                    && c.state
                        .as_ref()
                        .is_some_and(|s| s.terminated.is_some() || s.waiting.is_some())
            })
        })
        .map(str::to_owned)
        .collect();
    Some(if containers.is_empty() {
        Overdue::Stopped { late }
    } else {
        Overdue::Running { late, containers }
    })
}

fn unix_now() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX))
}

/// What holds a terminating namespace: its finalizers, and what its conditions say remains
/// (content with finalizers of its own, content not yet deleted).
pub fn holders(ns: &Namespace) -> Vec<String> {
    let mut held: Vec<String> = Vec::new();
    let finalizers: Vec<String> = ns
        .spec
        .as_ref()
        .and_then(|s| s.finalizers.clone())
        .into_iter()
        .flatten()
        .chain(ns.metadata.finalizers.clone().into_iter().flatten())
        .collect();
    if !finalizers.is_empty() {
        held.push(format!("finalizers {}", finalizers.join(", ")));
    }
    held.extend(
        ns.status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .into_iter()
            .flatten()
            .filter(|c| c.status == "True")
            .filter(|c| {
                matches!(
                    c.type_.as_str(),
                    "NamespaceFinalizersRemaining" | "NamespaceContentRemaining"
                )
            })
            .filter_map(|c| c.message.clone()),
    );
    held
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::Pod;
    use serde_json::json;

    use super::{LET_GO_SECS, Overdue, overdue};

    /// 2026-12-01T00:00:00Z.
    const DUE: i64 = 1_796_083_200;

    fn pod(deleted: bool, states: &[(&str, serde_json::Value)]) -> Pod {
        let names: Vec<_> = states.iter().map(|(n, _)| json!({"name": n})).collect();
        let statuses: Vec<_> = states
            .iter()
            .filter(|(_, s)| !s.is_null())
            .map(|(n, s)| {
                json!({"name": n, "image": "", "imageID": "", "ready": false,
                       "restartCount": 0, "state": s})
            })
            .collect();
        let mut pod = json!({
            "metadata": {"name": "p"},
            "spec": {"initContainers": [names[0]], "containers": names[1..]},
            "status": {"initContainerStatuses": statuses.first().into_iter().collect::<Vec<_>>(),
                       "containerStatuses": statuses.get(1..).unwrap_or_default()},
        });
        if deleted {
            pod["metadata"]["deletionTimestamp"] = json!("2026-12-01T00:00:00Z");
        }
        serde_json::from_value(pod).expect("pod")
    }

    #[test]
    fn a_pod_is_overdue_only_past_its_deletion_and_the_kubelets_time() {
        let stopped = json!({"terminated": {"exitCode": 0}});
        let states = [("gate", stopped.clone()), ("app", stopped)];
        assert_eq!(overdue(&pod(false, &states), DUE + 3600), None);
        assert_eq!(overdue(&pod(true, &states), DUE + LET_GO_SECS), None);
        assert_eq!(
            overdue(&pod(true, &states), DUE + LET_GO_SECS + 1),
            Some(Overdue::Stopped {
                late: LET_GO_SECS + 1
            })
        );
    }

    #[test]
    fn a_container_running_or_never_reported_keeps_a_pod_from_being_forced() {
        let late = DUE + 60;
        let states = [
            ("gate", json!({"terminated": {"exitCode": 0}})),
            ("app", json!({"running": {}})),
            (
                "never-started",
                json!({"waiting": {"reason": "ContainerCreating"}}),
            ),
            ("unreported", serde_json::Value::Null),
        ];
        assert_eq!(
            overdue(&pod(true, &states), late),
            Some(Overdue::Running {
                late: 60,
                containers: vec!["app".to_owned(), "unreported".to_owned()]
            })
        );
    }
}
