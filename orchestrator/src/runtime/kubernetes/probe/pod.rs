//! The probe's pod: one container per route, all in one network namespace, under exactly the
//! services' rules (the `service` network label and [`confinement`](super::super::confinement)).

use std::net::{IpAddr, Ipv4Addr};
use std::time::Duration;

use k8s_openapi::api::core::v1::{Container, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use super::targets::Route;
use crate::runtime::kubernetes::confinement;
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
    /// How long the pod may run before the kubelet stops it.
    pub deadline: Duration,
}

/// The probe pod.
pub fn render(names: &Names, pod: &ProbePod<'_>) -> Pod {
    let containers = pod
        .routes
        .iter()
        .map(|route| Container {
            name: route.id.to_owned(),
            image: Some(pod.image.to_owned()),
            image_pull_policy: Some(pod.pull_policy.to_owned()),
            command: Some(vec![BINARY.to_owned()]),
            args: Some(
                [
                    "settle".to_owned(),
                    SETTLE_SECS.to_string(),
                    SETTLE_ROUNDS.to_string(),
                ]
                .into_iter()
                .chain(route.args())
                .collect(),
            ),
            ..Container::default()
        })
        .collect();
    let mut spec = confinement::pod_spec(containers, NAMESERVER);
    spec.restart_policy = Some("Never".to_owned());
    spec.active_deadline_seconds = i64::try_from(pod.deadline.as_secs()).ok();
    spec.termination_grace_period_seconds = Some(1);
    let mut labels = names.labels(kind::PROBE);
    labels.insert(NETWORK.to_owned(), network::SERVICE.to_owned());
    Pod {
        metadata: ObjectMeta {
            name: Some(pod.name.to_owned()),
            namespace: Some(names.namespace().to_owned()),
            labels: Some(labels),
            ..ObjectMeta::default()
        },
        spec: Some(spec),
        status: None,
    }
}
