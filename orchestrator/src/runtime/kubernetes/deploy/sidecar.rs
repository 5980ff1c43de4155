//! The sidecar on a cluster: a Service (the address every outside name resolves to), a Secret
//! holding its configuration document (the CA key only there) and a Deployment of one pod
//! under the `sidecar` network rules. Its admin API listens on the pod's own loopback, which
//! only a port-forward reaches: no service can.

use std::collections::BTreeMap;

use af_policy::manifest::OnLoss;
use af_sidecar_api::config::{
    Containment, JournalConfig, ProxyListener, SidecarConfig, SmtpListener,
};
use k8s_openapi::ByteString;
use k8s_openapi::api::apps::v1::{Deployment, DeploymentSpec, DeploymentStrategy};
use k8s_openapi::api::core::v1::{
    Capabilities, Container, ContainerPort, PodSpec, PodTemplateSpec, Probe, Secret,
    SecretVolumeSource, SecurityContext, Service, ServicePort, ServiceSpec, TCPSocketAction,
    Volume, VolumeMount,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use super::journal::{self, Journal};
use super::keeper;
use super::objects::stamp;
use crate::runtime::kubernetes::names::{self, Names, kind, network};
use crate::runtime::labels::{CONFIG, NETWORK, SERVICE};
use crate::runtime::sidecar_doc;

/// Where the Secret is mounted in the sidecar's container.
const CONFIG_DIR: &str = "/etc/af";
/// The volume of the Secret.
pub const CONFIG_VOLUME: &str = "config";
/// The container's name.
pub const CONTAINER: &str = "sidecar";

/// The sidecar's listeners a service reaches through its Service, and the containment
/// watchers' report listener and layer witnesses: (name, protocol, port).
fn ports() -> Vec<(String, &'static str, u16)> {
    let mut ports = vec![
        ("proxy".to_owned(), "TCP", ProxyListener::DEFAULT_PORT),
        ("http".to_owned(), "TCP", 80),
        ("https".to_owned(), "TCP", 443),
    ];
    ports.extend(
        SmtpListener::DEFAULT_PORTS
            .iter()
            .map(|p| (format!("smtp-{p}"), "TCP", *p)),
    );
    ports.push(("dns-udp".to_owned(), "UDP", 53));
    ports.push(("dns-tcp".to_owned(), "TCP", 53));
    ports.extend([
        ("watch-report".to_owned(), "TCP", Containment::REPORT_PORT),
        (
            "watch-policy".to_owned(),
            "TCP",
            Containment::POLICY_WITNESS_PORT,
        ),
        (
            "watch-fence".to_owned(),
            "TCP",
            Containment::FENCE_WITNESS_PORT,
        ),
    ]);
    ports
}

/// The labels of the sidecar's pods, which its Service and Deployment select.
pub fn pod_labels(names: &Names) -> BTreeMap<String, String> {
    let mut labels = names.labels(kind::SIDECAR);
    labels.insert(SERVICE.to_owned(), "sidecar".to_owned());
    labels.insert(NETWORK.to_owned(), network::SIDECAR.to_owned());
    labels
}

fn meta(names: &Names, name: &str, kind_label: &str) -> ObjectMeta {
    let mut labels = names.labels(kind_label);
    labels.insert(SERVICE.to_owned(), "sidecar".to_owned());
    ObjectMeta {
        name: Some(name.to_owned()),
        namespace: Some(names.namespace().to_owned()),
        labels: Some(labels),
        ..ObjectMeta::default()
    }
}

/// The sidecar's Service.
pub fn service(names: &Names) -> Service {
    stamp(Service {
        metadata: meta(names, names::SIDECAR, kind::SIDECAR),
        spec: Some(ServiceSpec {
            selector: Some(pod_labels(names)),
            ports: Some(
                ports()
                    .into_iter()
                    .map(|(name, protocol, port)| ServicePort {
                        name: Some(name),
                        protocol: Some(protocol.to_owned()),
                        port: i32::from(port),
                        target_port: Some(IntOrString::Int(i32::from(port))),
                        ..ServicePort::default()
                    })
                    .collect(),
            ),
            ..ServiceSpec::default()
        }),
        status: None,
    })
}

/// The Secret holding the document; its digest is the document's without the secrets.
pub fn config_secret(names: &Names, doc: &SidecarConfig, digest: &str) -> Secret {
    let mut metadata = meta(names, names::SIDECAR_CONFIG, kind::SIDECAR);
    if let Some(labels) = metadata.labels.as_mut() {
        labels.insert(CONFIG.to_owned(), digest.to_owned());
    }
    Secret {
        metadata,
        data: Some(BTreeMap::from([(
            names::SIDECAR_CONFIG_KEY.to_owned(),
            ByteString(sidecar_doc::file_bytes(doc)),
        )])),
        type_: Some("Opaque".to_owned()),
        ..Secret::default()
    }
}

/// The sidecar's Deployment: one pod, replaced (never two at once: the journal has one
/// writer), restarted when the document's digest changes, its journal where `journal` says.
/// With `keeper`, its container beside the sidecar's, its service account and its token's
/// volume ([`super::keeper`]); `on_loss` is annotated for `af status`.
pub fn deployment(
    names: &Names,
    image: &str,
    pull_policy: &str,
    digest: &str,
    journal: &Journal,
    keeper: Option<Container>,
    on_loss: OnLoss,
) -> Deployment {
    let labels = pod_labels(names);
    let container = Container {
        name: CONTAINER.to_owned(),
        image: Some(image.to_owned()),
        image_pull_policy: Some(pull_policy.to_owned()),
        args: Some(vec![
            "--config".to_owned(),
            format!("{CONFIG_DIR}/{}", names::SIDECAR_CONFIG_KEY),
        ]),
        ports: Some(
            ports()
                .into_iter()
                .map(|(name, protocol, port)| ContainerPort {
                    name: Some(name.chars().take(15).collect()),
                    protocol: Some(protocol.to_owned()),
                    container_port: i32::from(port),
                    ..ContainerPort::default()
                })
                .collect(),
        ),
        readiness_probe: Some(Probe {
            tcp_socket: Some(TCPSocketAction {
                port: IntOrString::Int(i32::from(ProxyListener::DEFAULT_PORT)),
                host: None,
            }),
            period_seconds: Some(1),
            ..Probe::default()
        }),
        volume_mounts: Some(vec![
            VolumeMount {
                name: CONFIG_VOLUME.to_owned(),
                mount_path: CONFIG_DIR.to_owned(),
                read_only: Some(true),
                ..VolumeMount::default()
            },
            VolumeMount {
                name: journal::VOLUME.to_owned(),
                mount_path: JournalConfig::DEFAULT_DIR.to_owned(),
                ..VolumeMount::default()
            },
        ]),
        // The listeners below 1024 need this one capability and nothing else.
        security_context: Some(SecurityContext {
            allow_privilege_escalation: Some(false),
            privileged: Some(false),
            read_only_root_filesystem: Some(true),
            capabilities: Some(Capabilities {
                drop: Some(vec!["ALL".to_owned()]),
                add: Some(vec!["NET_BIND_SERVICE".to_owned()]),
            }),
            ..SecurityContext::default()
        }),
        ..Container::default()
    };
    let with_keeper = keeper.is_some();
    let spec = PodSpec {
        containers: std::iter::once(container).chain(keeper).collect(),
        service_account_name: with_keeper.then(|| keeper::NAME.to_owned()),
        automount_service_account_token: Some(false),
        enable_service_links: Some(false),
        termination_grace_period_seconds: Some(i64::from(sidecar_doc::STOP_TIMEOUT_SECS)),
        volumes: Some(
            vec![
                Volume {
                    name: CONFIG_VOLUME.to_owned(),
                    secret: Some(SecretVolumeSource {
                        secret_name: Some(names::SIDECAR_CONFIG.to_owned()),
                        ..SecretVolumeSource::default()
                    }),
                    ..Volume::default()
                },
                journal::volume(journal),
            ]
            .into_iter()
            .chain(with_keeper.then(keeper::Keeper::volume))
            .collect(),
        ),
        ..PodSpec::default()
    };
    let mut metadata = meta(names, names::SIDECAR, kind::SIDECAR);
    let mut annotations = BTreeMap::from([(
        keeper::ON_LOSS.to_owned(),
        keeper::on_loss(on_loss).to_owned(),
    )]);
    if let Journal::InPod(reason) = journal {
        annotations.insert(journal::IN_POD_REASON.to_owned(), reason.clone());
    }
    metadata.annotations = Some(annotations);
    stamp(Deployment {
        metadata,
        spec: DeploymentSpec {
            replicas: Some(1),
            selector: LabelSelector {
                match_labels: Some(labels.clone()),
                ..LabelSelector::default()
            },
            strategy: Some(DeploymentStrategy {
                type_: Some("Recreate".to_owned()),
                rolling_update: None,
            }),
            template: PodTemplateSpec {
                metadata: Some(ObjectMeta {
                    labels: Some(labels),
                    annotations: Some(BTreeMap::from([(CONFIG.to_owned(), digest.to_owned())])),
                    ..ObjectMeta::default()
                }),
                spec: Some(spec),
            },
            ..DeploymentSpec::default()
        },
        status: None,
    })
}
