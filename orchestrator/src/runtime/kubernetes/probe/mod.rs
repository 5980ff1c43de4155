//! The containment probe: after the namespace and its policies exist and before any sidecar
//! or service, one pod under exactly the services' rules tries every route out
//! ([`targets`]), but only once it is governed: a witness pod inside the environment answers
//! on a port the policy allows and on one it refuses, and each route first waits until the
//! first answers and the second does not ([`pod`]). A pod never governed aims nothing outside.
//! Any route that got out, a pod never governed, or any route the probe could not answer for,
//! refuses the environment (AF-RUN-043) naming each; the pods are removed either way, the
//! namespace stays for `af down`. The probe's image reaches the nodes first ([`image`]).

pub mod image;
pub mod pod;
pub mod targets;
pub mod verdict;

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::time::{SystemTime, UNIX_EPOCH};

use k8s_openapi::api::core::v1::{ContainerStatus, Pod};
use kube::Client;
use kube::api::{Api, DeleteParams, ListParams, LogParams, PostParams};

use self::pod::ProbePod;
use self::targets::{Attempt, ProbeTargets, Route};
use self::verdict::Outcome;
use super::Timeouts;
use super::cluster::refused;
use super::deploy::services::FENCE;
use super::names::{Names, kind};
use super::pulls;
use super::wait::{self, Poll};
use crate::plan::short_digest;
use crate::runtime::{Progress, RuntimeError};

/// Container states after which a probe container will never run.
const STUCK: [&str; 6] = [
    "ErrImageNeverPull",
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

/// Run the probe in the environment's namespace; `Ok` only if every route held and each
/// layer was shown in force: the services' policy by a pod without a fence, the pod layer by
/// a pod with its own fence (`pod_layer`: whether service pods get one).
pub async fn run(
    client: &Client,
    names: &Names,
    targets: &ProbeTargets,
    image: &ProbeImage,
    pod_layer: bool,
    timeouts: &Timeouts,
    progress: &dyn Progress,
) -> Result<(), RuntimeError> {
    let namespace = names.namespace();
    let pods: Api<Pod> = Api::namespaced(client.clone(), namespace);
    let discovered = super::discovery::api_server(client).await?;
    let (routes, unknown) = targets.routes(&discovered);
    remove_probes(&pods, names).await?;

    let nonce = nonce();
    let witness_name = format!("af-probe-witness-{nonce}");
    progress.begin(&format!("starting the probe's witness in {namespace}"))?;
    let witness = match start_witness(&pods, names, &witness_name, image, timeouts, progress).await
    {
        Ok(ip) => ip,
        Err(why) => {
            let _ = pods
                .delete(&witness_name, &DeleteParams::background())
                .await;
            return Err(match why {
                WitnessFailed::Api(e) => e,
                WitnessFailed::NotStarted(why) => RuntimeError::NotContained {
                    namespace: namespace.to_owned(),
                    got_out: Vec::new(),
                    unanswered: vec![format!("the probe's witness pod did not start: {why}")],
                    layers: Vec::new(),
                },
            });
        }
    };

    progress.begin(&format!(
        "probing containment in {namespace}: {} routes, under the policy alone and behind the pod's own fence",
        routes.len()
    ))?;
    let fence = if pod_layer {
        pod::probe_fence(witness)
    } else {
        Vec::new()
    };
    let probes = [
        (format!("af-probe-{nonce}"), None),
        (format!("af-probe-fenced-{nonce}"), Some(fence.as_slice())),
    ];
    let mut created = Vec::new();
    let mut outcome = Ok(());
    let mut admission = None;
    for (name, fence) in &probes {
        let spec = pod::render(
            names,
            &ProbePod {
                name,
                image: &image.reference,
                pull_policy: image.pull_policy,
                routes: &routes,
                witness,
                fence: *fence,
                deadline: timeouts.probe,
            },
        );
        match pods.create(&PostParams::default(), &spec).await {
            Ok(_) => created.push(name.clone()),
            // Admission refusing the fence (PodSecurity `baseline` forbids NET_ADMIN) is the
            // pod layer refused, named as such.
            Err(kube::Error::Api(status))
                if fence.is_some_and(|f| !f.is_empty()) && matches!(status.code, 403 | 422) =>
            {
                admission = Some(status.message);
                break;
            }
            Err(e) => {
                outcome = Err(refused(format!(
                    "create the probe pod {name} in {namespace}"
                ))(e));
                break;
            }
        }
    }
    let mut found = Found {
        got_out: Vec::new(),
        unanswered: unknown.into_iter().collect(),
        layers: Vec::new(),
    };
    if let Some(message) = admission {
        found.layers.push(format!(
            "the pod layer could not be set: the cluster's admission refused a pod whose `af-fence` init container holds NET_ADMIN ({message})"
        ));
    } else if outcome.is_ok() {
        let [(policy, _), (fenced, _)] = &probes;
        let policy_pod = finished(&pods, policy, timeouts, progress).await;
        let fenced_pod = finished(&pods, fenced, timeouts, progress).await;
        match (policy_pod, fenced_pod) {
            (Ok(policy_pod), Ok(fenced_pod)) => {
                judge_policy_probe(&pods, &routes, witness, policy_pod, &mut found).await;
                judge_fenced_probe(&pods, &routes, fenced_pod, &mut found).await;
            }
            (Err(e), _) | (_, Err(e)) => outcome = Err(e),
        }
    }
    // The probe's pods go either way; the namespace and its policies stay.
    for name in created.iter().chain([&witness_name]) {
        let _ = pods.delete(name, &DeleteParams::background()).await;
    }
    outcome?;
    if found.got_out.is_empty() && found.unanswered.is_empty() && found.layers.is_empty() {
        progress.step("containment probe: both layers in force, every route held");
        return Ok(());
    }
    Err(RuntimeError::NotContained {
        namespace: namespace.to_owned(),
        got_out: found.got_out,
        unanswered: found.unanswered,
        layers: found.layers,
    })
}

/// What the probes found, gathered for the refusal.
struct Found {
    got_out: Vec<String>,
    unanswered: Vec<String>,
    layers: Vec<String>,
}

/// A probe pod once it is over (or the deadline passed: `late` says how), with its containers'
/// states by name.
struct Finished {
    name: String,
    pod: Option<Pod>,
    statuses: HashMap<String, ContainerStatus>,
    late: Option<String>,
}

async fn finished(
    pods: &Api<Pod>,
    name: &str,
    timeouts: &Timeouts,
    progress: &dyn Progress,
) -> Result<Finished, RuntimeError> {
    let namespace = pods.namespace().unwrap_or_default().to_owned();
    let waited = wait::until(
        "the containment probe",
        timeouts.probe,
        timeouts.poll,
        progress,
        || async {
            let found = pods
                .get_opt(name)
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
    let (pod, late) = match waited {
        Ok(pod) => (Some(pod), None),
        Err(last) => (
            pods.get_opt(name).await.ok().flatten(),
            Some(format!(
                "the probe did not finish within {} s ({last})",
                timeouts.probe.as_secs()
            )),
        ),
    };
    let statuses = pod
        .as_ref()
        .and_then(|p| p.status.as_ref())
        .and_then(|s| s.container_statuses.clone())
        .unwrap_or_default()
        .into_iter()
        .map(|s| (s.name.clone(), s))
        .collect();
    Ok(Finished {
        name: name.to_owned(),
        pod,
        statuses,
        late,
    })
}

/// One container of a finished probe, judged from its status and log.
async fn outcome_of(pods: &Api<Pod>, probe: &Finished, route: &Route) -> Outcome {
    let status = probe.statuses.get(route.id);
    let terminated = status
        .and_then(|s| s.state.as_ref())
        .and_then(|s| s.terminated.as_ref());
    let log = match terminated {
        Some(_) => read_log(pods, &probe.name, route.id).await,
        None => None,
    };
    match (verdict::judge(route, status, log.as_deref()), &probe.late) {
        (Outcome::Unanswered(why), Some(late)) => Outcome::Unanswered(format!("{why}; {late}")),
        (outcome, _) => outcome,
    }
}

/// The probe under the services' policy alone: every route held, the pod governed, and the
/// witness's fenced port reached (the policy allows it, which makes the fenced probe's check
/// the pod layer's own).
async fn judge_policy_probe(
    pods: &Api<Pod>,
    routes: &[Route],
    witness: IpAddr,
    probe: Finished,
    found: &mut Found,
) {
    let mut ungoverned = None;
    for route in routes {
        match outcome_of(pods, &probe, route).await {
            Outcome::Held(_) => {}
            Outcome::GotOut => found.got_out.push(route.to_string()),
            Outcome::NotGoverned(why) => {
                ungoverned.get_or_insert(why);
            }
            Outcome::Unanswered(why) => found.unanswered.push(format!("{route}: {why}")),
        }
    }
    let control = Route {
        id: pod::FENCED_CONTROL,
        what: "the witness's port the policy allows and the fence refuses",
        attempt: Attempt::Tcp(SocketAddr::new(witness, pod::WITNESS_FENCED)),
    };
    match outcome_of(pods, &probe, &control).await {
        Outcome::GotOut | Outcome::NotGoverned(_) => {}
        Outcome::Held(why) => found.unanswered.push(format!(
            "{control}: the services' policy refused it ({why}), so the pod layer's check could not be told from the policy's"
        )),
        Outcome::Unanswered(why) => found.unanswered.push(format!("{control}: {why}")),
    }
    if let Some(why) = ungoverned {
        found.layers.push(format!(
            "the NetworkPolicy layer is not in force: the pod was never governed ({why}), so nothing was aimed outside"
        ));
    }
}

/// The probe behind its own fence: the fence written, the pod governed by it (refused the
/// witness's port the policy allows), every route held.
async fn judge_fenced_probe(pods: &Api<Pod>, routes: &[Route], probe: Finished, found: &mut Found) {
    if let Some(why) = probe.pod.as_ref().and_then(fence_failed) {
        let said = read_log(pods, &probe.name, FENCE).await;
        let said = said
            .as_deref()
            .and_then(|l| {
                l.lines()
                    .rev()
                    .find_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
            })
            .and_then(|v| v["error"].as_str().map(str::to_owned))
            .unwrap_or(why);
        found.layers.push(format!(
            "the pod layer could not be set: the probe's own fence was refused ({said})"
        ));
        return;
    }
    let mut ungoverned = None;
    for route in routes {
        match outcome_of(pods, &probe, route).await {
            Outcome::Held(_) => {}
            Outcome::GotOut => found
                .got_out
                .push(format!("{route}, past the pod's own fence")),
            Outcome::NotGoverned(why) => {
                ungoverned.get_or_insert(why);
            }
            Outcome::Unanswered(why) => found
                .unanswered
                .push(format!("{route} behind the pod's fence: {why}")),
        }
    }
    if let Some(why) = ungoverned {
        found.layers.push(format!(
            "the pod layer is not in force: a pod meant to be behind its own fence reached what only the fence refuses ({why}), so nothing was aimed outside"
        ));
    }
}

/// Why the pod's fence exited non-zero, when it did.
fn fence_failed(pod: &Pod) -> Option<String> {
    let statuses = pod.status.as_ref()?.init_container_statuses.as_ref()?;
    let fence = statuses.iter().find(|s| s.name == FENCE)?;
    let terminated = fence.state.as_ref()?.terminated.as_ref()?;
    (terminated.exit_code != 0).then(|| format!("it exited with status {}", terminated.exit_code))
}

/// Why the witness gave no address.
enum WitnessFailed {
    /// The API server refused a call.
    Api(RuntimeError),
    /// The pod did not get an address in time, or is stuck where it never runs.
    NotStarted(String),
}

/// Create the witness and wait until it has its address (its listeners come up a moment
/// later; the routes retry until then).
async fn start_witness(
    pods: &Api<Pod>,
    names: &Names,
    name: &str,
    image: &ProbeImage,
    timeouts: &Timeouts,
    progress: &dyn Progress,
) -> Result<IpAddr, WitnessFailed> {
    let namespace = names.namespace();
    let spec = pod::witness(
        names,
        name,
        &image.reference,
        image.pull_policy,
        timeouts.probe,
    );
    pods.create(&PostParams::default(), &spec)
        .await
        .map_err(refused(format!(
            "create the probe's witness pod in {namespace}"
        )))
        .map_err(WitnessFailed::Api)?;
    let started = wait::until(
        "the probe's witness",
        timeouts.probe,
        timeouts.poll,
        progress,
        || async {
            let found = pods.get_opt(name).await.map_err(refused(format!(
                "read the probe's witness pod in {namespace}"
            )))?;
            // An image the node cannot get is named now, not found as a timeout.
            if let Some(pod) = &found
                && let Some(unpulled) =
                    pulls::refusal(&pods.clone().into_client(), pod, "probe").await
            {
                return Err(unpulled);
            }
            let address = found
                .as_ref()
                .and_then(|p| p.status.as_ref())
                .and_then(|s| s.pod_ip.as_deref())
                .and_then(|ip| ip.parse::<IpAddr>().ok());
            Ok(match (found, address) {
                (Some(_), Some(ip)) => Poll::Ready(Ok(ip)),
                (Some(pod), None) if done(&pod) => Poll::Ready(Err(state(&pod))),
                (Some(pod), None) => Poll::Pending(state(&pod)),
                (None, _) => Poll::Pending("the pod is gone".to_owned()),
            })
        },
    )
    .await
    .map_err(WitnessFailed::Api)?;
    match started {
        Ok(Ok(ip)) => Ok(ip),
        Ok(Err(stuck)) => Err(WitnessFailed::NotStarted(stuck)),
        Err(last) => Err(WitnessFailed::NotStarted(format!(
            "no address within {} s ({last})",
            timeouts.probe.as_secs()
        ))),
    }
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

async fn read_log(pods: &Api<Pod>, name: &str, container: &str) -> Option<String> {
    let params = LogParams {
        container: Some(container.to_owned()),
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
