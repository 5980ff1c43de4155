//! The probe's pod: one container per route, all in one network namespace, under exactly the
//! services' rules (the `service` network label and [`confinement`](super::super::confinement)),
//! each aiming outside only once the pod is governed; and the witness it proves that by.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::time::Duration;

use af_sidecar_api::config::{Admin, ProxyListener, SmtpListener};
use k8s_openapi::api::core::v1::{Container, EnvVar, Pod, PodSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use super::targets::Route;
use crate::runtime::kubernetes::confinement;
use crate::runtime::kubernetes::deploy::services;
use crate::runtime::kubernetes::names::{Names, kind, network};
use crate::runtime::labels::NETWORK;

/// The probe binary inside its image.
pub const BINARY: &str = "/af-probe";

/// The probe's nameserver: its own loopback, where nothing listens. Every target is an
/// address, so the probe asks no names; the services' nameserver is the sidecar, which does
/// not exist before the probe has passed.
pub const NAMESERVER: IpAddr = IpAddr::V4(Ipv4Addr::LOCALHOST);

/// How long each route is tried before an open route counts as open: a new pod is governed
/// some time after it starts (an enforcer learns its address when the kubelet reports it,
/// about a second later), so one attempt in that window says nothing about the cluster.
pub const SETTLE_SECS: u64 = 20;
/// Failed attempts in a row after which a route counts as held.
pub const SETTLE_ROUNDS: u32 = 3;

/// The witness's port the services' policy lets them reach: the sidecar's proxy listener.
pub const WITNESS_OPEN: u16 = ProxyListener::DEFAULT_PORT;
/// Another the services' policy lets them reach (one of the sidecar's SMTP listeners), which
/// the fenced probe's own fence does not: only the pod layer can refuse it.
pub const WITNESS_FENCED: u16 = SmtpListener::DEFAULT_PORTS[2];
/// The witness's port the services' policy refuses them: the sidecar's admin port.
pub const WITNESS_CLOSED: u16 = Admin::DEFAULT_PORT;
/// Rounds in a row the witness must answer on [`WITNESS_OPEN`] and not on [`WITNESS_CLOSED`]
/// before a route is aimed outside.
pub const GOVERNED_ROUNDS: u32 = 3;

/// What the probe pod is made of.
pub struct ProbePod<'a> {
    /// The pod's name.
    pub name: &'a str,
    /// The image holding [`BINARY`].
    pub image: &'a str,
    /// `Never` for images already on the nodes, `IfNotPresent` for pulled ones.
    pub pull_policy: &'a str,
    /// The routes, one container each.
    pub routes: &'a [Route],
    /// The witness's address: every route waits until the pod is governed by it.
    pub witness: IpAddr,
    /// The pod's own fence (`af-probe fence`'s arguments): the fenced probe, which proves the
    /// pod layer (empty: it writes none, `AF_KUBE_POD_LAYER=off`, and so cannot pass); `None`
    /// for the probe of the services' policy, which runs without one.
    pub fence: Option<&'a [String]>,
    /// How long the pod may run before the kubelet stops it.
    pub deadline: Duration,
}

/// The probe pod: each route behind the witness's check. Without a fence it is the policy's
/// probe (governed when the witness's closed port is refused), with one its own proof of the pod
/// layer (governed when the fenced port is refused, which the policy allows).
pub fn render(names: &Names, pod: &ProbePod<'_>) -> Pod {
    let refused = match pod.fence {
        None => WITNESS_CLOSED,
        Some(_) => WITNESS_FENCED,
    };
    let behind = governed_by(pod.witness, refused);
    let mut containers: Vec<Container> = pod
        .routes
        .iter()
        .map(|route| {
            let settle = [
                "settle".to_owned(),
                SETTLE_SECS.to_string(),
                SETTLE_ROUNDS.to_string(),
            ];
            let args = behind
                .iter()
                .cloned()
                .chain(settle)
                .chain(route.args())
                .collect();
            probe_container(route.id, pod, args)
        })
        .collect();
    if pod.fence.is_none() {
        // The policy lets a service reach the fenced port: what makes it the pod layer's test.
        let fenced = SocketAddr::new(pod.witness, WITNESS_FENCED).to_string();
        let args = behind
            .iter()
            .cloned()
            .chain(["tcp".to_owned(), fenced])
            .collect();
        containers.push(probe_container(FENCED_CONTROL, pod, args));
    }
    let mut spec = confinement::pod_spec(containers, NAMESERVER);
    if let Some(allowed) = pod.fence.filter(|a| !a.is_empty()) {
        spec.init_containers = Some(vec![services::fence_container(
            pod.image,
            pod.pull_policy,
            allowed,
        )]);
    }
    probe_pod(names, pod.name, network::SERVICE, spec, pod.deadline)
}

/// The policy probe's container that reaches the witness's fenced port, as the policy lets it.
pub const FENCED_CONTROL: &str = "fenced-port";

/// What the fenced probe's fence lets out: the witness's open port alone.
pub fn probe_fence(witness: IpAddr) -> Vec<String> {
    vec![format!("tcp:{}", SocketAddr::new(witness, WITNESS_OPEN))]
}

fn probe_container(id: &str, pod: &ProbePod<'_>, args: Vec<String>) -> Container {
    Container {
        name: id.to_owned(),
        image: Some(pod.image.to_owned()),
        image_pull_policy: Some(pod.pull_policy.to_owned()),
        command: Some(vec![BINARY.to_owned()]),
        args: Some(args),
        ..Container::default()
    }
}

/// `af-probe governed ... --`: what a route runs behind, so that nothing is aimed outside
/// before the pod reaches the witness's open port and is refused its closed one, several
/// rounds in a row (a pod is governed some time after it starts, or never).
fn governed_by(witness: IpAddr, refused: u16) -> Vec<String> {
    vec![
        "governed".to_owned(),
        SocketAddr::new(witness, WITNESS_OPEN).to_string(),
        GOVERNED_ROUNDS.to_string(),
        SETTLE_SECS.to_string(),
        format!("tcp:{}", SocketAddr::new(witness, refused)),
        "--".to_owned(),
    ]
}

/// The witness: a pod of the environment labelled as the sidecar is, answering on two ports
/// the services may reach ([`WITNESS_OPEN`], [`WITNESS_FENCED`]) and on one they may not
/// ([`WITNESS_CLOSED`]). It only listens: it is the probe's target inside the environment,
/// that the policy must refuse before anything is aimed outside.
pub fn witness(
    names: &Names,
    name: &str,
    image: &str,
    pull_policy: &str,
    deadline: Duration,
) -> Pod {
    let containers = [
        ("open", WITNESS_OPEN),
        ("fenced", WITNESS_FENCED),
        ("closed", WITNESS_CLOSED),
    ]
    .into_iter()
    .map(|(id, port)| Container {
        name: id.to_owned(),
        image: Some(image.to_owned()),
        image_pull_policy: Some(pull_policy.to_owned()),
        command: Some(vec![BINARY.to_owned(), "serve".to_owned()]),
        env: Some(vec![
            EnvVar {
                name: "PORT".to_owned(),
                value: Some(port.to_string()),
                ..EnvVar::default()
            },
            EnvVar {
                name: "AF_SERVICE".to_owned(),
                value: Some("witness".to_owned()),
                ..EnvVar::default()
            },
        ]),
        ..Container::default()
    })
    .collect();
    let spec = confinement::pod_spec(containers, NAMESERVER);
    probe_pod(names, name, network::SIDECAR, spec, deadline)
}

/// One of the probe's pods, under the `network` rules: run once, stopped by the kubelet at
/// `deadline`, gone at once when deleted.
fn probe_pod(
    names: &Names,
    name: &str,
    network: &str,
    mut spec: PodSpec,
    deadline: Duration,
) -> Pod {
    spec.restart_policy = Some("Never".to_owned());
    spec.active_deadline_seconds = i64::try_from(deadline.as_secs()).ok();
    spec.termination_grace_period_seconds = Some(1);
    let mut labels = names.labels(kind::PROBE);
    labels.insert(NETWORK.to_owned(), network.to_owned());
    Pod {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            namespace: Some(names.namespace().to_owned()),
            labels: Some(labels),
            ..ObjectMeta::default()
        },
        spec: Some(spec),
        status: None,
    }
}
