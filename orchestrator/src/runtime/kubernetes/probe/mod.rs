//! The containment probe: after the namespace and its policies exist and before any sidecar
//! or service, one pod under exactly the services' rules tries every route out
//! ([`targets`]). Any route that got out, or any the probe could not answer for, refuses the
//! environment (AF-RUN-043) naming each; the pod is removed either way, the namespace stays
//! for `af down`.

pub mod pod;
pub mod targets;
pub mod verdict;

use std::collections::HashMap;
use std::time::{SystemTime, UNIX_EPOCH};

use k8s_openapi::api::core::v1::{ContainerStatus, Pod};
use kube::Client;
use kube::api::{Api, DeleteParams, ListParams, LogParams, PostParams};

use self::pod::ProbePod;
use self::targets::{ProbeTargets, Route};
use self::verdict::Outcome;
use super::Timeouts;
use super::cluster::refused;
use super::names::{Names, kind};
use super::wait::{self, Poll};
use crate::plan::short_digest;
use crate::runtime::{Progress, RuntimeError};

/// Container states after which a probe container will never run.
const STUCK: [&str; 7] = [
    "ErrImageNeverPull",
    "ErrImagePull",
    "ImagePullBackOff",
    "InvalidImageName",
    "CreateContainerConfigError",
    "CreateContainerError",
    "RunContainerError",
];

/// The probe image, as the nodes get it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProbeImage {
    /// The image reference.
    pub reference: String,
    /// Its `imagePullPolicy`.
    pub pull_policy: &'static str,
}

/// The routes the probe tries, as the per-pod gate's escape arguments (`tcp:ADDR:PORT`,
/// `dns:ADDR:PORT:NAME`): every service pod tries them again before its process starts.
pub async fn gate_escapes(
    client: &Client,
    targets: &ProbeTargets,
) -> Result<Vec<String>, RuntimeError> {
    let discovered = super::discovery::api_server(client).await?;
    let (routes, _) = targets.routes(&discovered);
    Ok(routes
        .iter()
        .map(|route| match &route.attempt {
            targets::Attempt::Tcp(addr) => format!("tcp:{addr}"),
            targets::Attempt::Dns { server, name } => format!("dns:{server}:{name}"),
        })
        .collect())
}

/// Run the probe in the environment's namespace; `Ok` only if every route held.
pub async fn run(
    client: &Client,
    names: &Names,
    targets: &ProbeTargets,
    image: &ProbeImage,
    timeouts: &Timeouts,
    progress: &dyn Progress,
) -> Result<(), RuntimeError> {
    let namespace = names.namespace();
    let pods: Api<Pod> = Api::namespaced(client.clone(), namespace);
    let discovered = super::discovery::api_server(client).await?;
    let (routes, unknown) = targets.routes(&discovered);
    remove_probes(&pods, names).await?;

    let name = format!("af-probe-{}", nonce());
    progress.begin(&format!(
        "probing containment in {namespace}: {} routes",
        routes.len()
    ))?;
    let spec = pod::render(
        names,
        &ProbePod {
            name: &name,
            image: &image.reference,
            pull_policy: image.pull_policy,
            routes: &routes,
            deadline: timeouts.probe,
        },
    );
    pods.create(&PostParams::default(), &spec)
        .await
        .map_err(refused(format!("create the probe pod in {namespace}")))?;

    let finished = wait::until(
        "the containment probe",
        timeouts.probe,
        timeouts.poll,
        progress,
        || async {
            let found = pods
                .get_opt(&name)
                .await
                .map_err(refused(format!("read the probe pod in {namespace}")))?;
            Ok(match found {
                Some(pod) if done(&pod) => Poll::Ready(pod),
                Some(pod) => Poll::Pending(state(&pod)),
                None => Poll::Pending("the pod is gone".to_owned()),
            })
        },
    )
    .await?;
    let (pod, late) = match finished {
        Ok(pod) => (Some(pod), None),
        Err(last) => (
            pods.get_opt(&name).await.ok().flatten(),
            Some(format!(
                "the probe did not finish within {} s ({last})",
                timeouts.probe.as_secs()
            )),
        ),
    };
    let statuses: HashMap<String, ContainerStatus> = pod
        .and_then(|p| p.status)
        .and_then(|s| s.container_statuses)
        .unwrap_or_default()
        .into_iter()
        .map(|s| (s.name.clone(), s))
        .collect();

    let mut got_out = Vec::new();
    let mut unanswered: Vec<String> = unknown.into_iter().collect();
    for route in &routes {
        let status = statuses.get(route.id);
        let log = match status
            .and_then(|s| s.state.as_ref())
            .and_then(|s| s.terminated.as_ref())
        {
            Some(_) => read_log(&pods, &name, route).await,
            None => None,
        };
        match (verdict::judge(route, status, log.as_deref()), &late) {
            (Outcome::Held(_), _) => {}
            (Outcome::GotOut, _) => got_out.push(route.to_string()),
            (Outcome::Unanswered(why), Some(late)) => {
                unanswered.push(format!("{route}: {why}; {late}"));
            }
            (Outcome::Unanswered(why), None) => unanswered.push(format!("{route}: {why}")),
        }
    }
    // The probe's pod goes either way; the namespace and its policies stay.
    let _ = pods.delete(&name, &DeleteParams::background()).await;
    if got_out.is_empty() && unanswered.is_empty() {
        progress.step("containment probe: every route held");
        return Ok(());
    }
    Err(RuntimeError::NotContained {
        namespace: namespace.to_owned(),
        got_out,
        unanswered,
    })
}

/// Remove probe pods an earlier `af up` left (one interrupted mid-probe).
async fn remove_probes(pods: &Api<Pod>, names: &Names) -> Result<(), RuntimeError> {
    let namespace = names.namespace();
    let old = pods
        .list(&ListParams::default().labels(&names.selector_of(kind::PROBE)))
        .await
        .map_err(refused(format!("list the probe pods in {namespace}")))?;
    for pod in old.items {
        let name = pod.metadata.name.unwrap_or_default();
        pods.delete(&name, &DeleteParams::background())
            .await
            .map_err(refused(format!("delete the old probe pod {name}")))?;
    }
    Ok(())
}

async fn read_log(pods: &Api<Pod>, name: &str, route: &Route) -> Option<String> {
    let params = LogParams {
        container: Some(route.id.to_owned()),
        limit_bytes: Some(16 * 1024),
        ..LogParams::default()
    };
    pods.logs(name, &params).await.ok()
}

/// Whether the pod is over, or stuck where it will never run.
fn done(pod: &Pod) -> bool {
    let status = pod.status.as_ref();
    let phase = status.and_then(|s| s.phase.as_deref());
    if matches!(phase, Some("Succeeded" | "Failed")) {
        return true;
    }
    status
        .and_then(|s| s.container_statuses.as_ref())
        .is_some_and(|all| {
            !all.is_empty()
                && all.iter().all(|c| {
                    let state = c.state.as_ref();
                    state.is_some_and(|s| s.terminated.is_some())
                        || state
                            .and_then(|s| s.waiting.as_ref())
                            .and_then(|w| w.reason.as_deref())
                            .is_some_and(|r| STUCK.contains(&r))
                })
        })
}

/// The pod's state for a person: its phase, why it is not scheduled, what containers wait on.
fn state(pod: &Pod) -> String {
    let status = pod.status.as_ref();
    let mut parts = vec![
        status
            .and_then(|s| s.phase.clone())
            .unwrap_or_else(|| "Pending".to_owned()),
    ];
    if let Some(unscheduled) = status.and_then(|s| s.conditions.as_ref()).and_then(|c| {
        c.iter()
            .find(|c| c.type_ == "PodScheduled" && c.status == "False")
    }) {
        parts.push(unscheduled.message.clone().unwrap_or_default());
    }
    let mut waiting: Vec<String> = status
        .and_then(|s| s.container_statuses.as_ref())
        .into_iter()
        .flatten()
        .filter_map(|c| c.state.as_ref()?.waiting.as_ref()?.reason.clone())
        .collect();
    waiting.sort();
    waiting.dedup();
    parts.extend(waiting);
    parts.retain(|p| !p.is_empty());
    parts.join(", ")
}

fn nonce() -> String {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or_default();
    short_digest(format!("{now}{}", std::process::id()).as_bytes())
}
