//! A service on a cluster: a Service at the service's own name (so `http://worker:8080` means
//! it) and a Deployment whose pods run under the confinement every service pod gets, resolve
//! through the sidecar only, mount the CA files, take the environment's secret variables from
//! the Secret `af-service-env` (never as values in the Deployment), and start only after their
//! own fence is written (the pod layer: [`fence_container`]) and their gate passed. The pod template is built once ([`pod_template`]) for every [`Role`]: the
//! Deployment's, the migration Job's ([`super::jobs`]) and the CronJob's ([`super::cron`]).

use std::collections::{BTreeMap, BTreeSet};
use std::net::{IpAddr, Ipv4Addr, SocketAddr};

use k8s_openapi::ByteString;
use k8s_openapi::api::apps::v1::{Deployment, DeploymentSpec};
use k8s_openapi::api::core::v1::{
    Capabilities, ConfigMap, ConfigMapVolumeSource, Container, ContainerPort, EnvVar, EnvVarSource,
    HTTPGetAction, ObjectFieldSelector, PodTemplateSpec, Probe, ResourceRequirements, Secret,
    SecretKeySelector, SecurityContext, Service, ServicePort, ServiceSpec, TCPSocketAction, Volume,
    VolumeMount,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use af_policy::manifest::Limits;
use af_sidecar_api::config::Containment;

use super::objects::stamp;
use crate::plan::{EnvPlan, ServicePlan};
use crate::runtime::kubernetes::confinement;
use crate::runtime::kubernetes::names::{self, Names, kind, network};
use crate::runtime::kubernetes::policies::{self, Transport};
use crate::runtime::labels::{CONFIG, NETWORK, SERVICE};
use crate::runtime::service_env::{self, Provisions};
use crate::trust::{self, TrustFiles};

/// The gate: the init container every service pod runs first.
#[derive(Debug, Clone)]
pub struct Gate {
    /// The image holding `af-probe`.
    pub image: String,
    /// Its pull policy.
    pub pull_policy: String,
    /// `af-probe gate`'s escape arguments (`tcp:ADDR:PORT`, `dns:ADDR:PORT:NAME`).
    pub escapes: Vec<String>,
    /// Rounds in a row that must hold.
    pub rounds: u32,
    /// How long it may take in all, in seconds.
    pub deadline_secs: u64,
}

/// The gate's container name.
pub const GATE: &str = "af-gate";
/// The containment watcher's container name: beside the service in every pod of its
/// Deployment, under exactly that pod's rules.
pub const WATCH: &str = "af-watch";
/// The Secret holding the containment watchers' token, read by the watcher containers alone.
pub const WATCH_SECRET: &str = "af-containment";
/// Its key.
pub const WATCH_SECRET_KEY: &str = "token";
/// The annotation that names the container `kubectl logs` and `exec` take by default.
const DEFAULT_CONTAINER: &str = "kubectl.kubernetes.io/default-container";
/// The fence's container name: the pod's own egress rules, written before anything else runs.
pub const FENCE: &str = "af-fence";

/// What one service's objects are made from.
pub struct Spec<'a> {
    /// The whole plan (the service names, for the proxy exceptions).
    pub plan: &'a EnvPlan,
    /// The service.
    pub service: &'a ServicePlan,
    /// Its image, as the nodes know it.
    pub image: &'a str,
    /// Its pull policy.
    pub pull_policy: &'a str,
    /// The sidecar's Service address: proxy, DNS, and every outside name.
    pub sidecar: Ipv4Addr,
    /// The CA files and webhook secrets.
    pub provisions: Provisions<'a>,
    /// The gate.
    pub gate: &'a Gate,
    /// What the pod's own fence lets out (`af-probe fence`'s arguments, [`fence_allowances`]);
    /// none: the pod writes no fence (`AF_KUBE_POD_LAYER=off`, tests only).
    pub fence: &'a [String],
    /// Seconds between the containment watcher's checks in the Deployment's pods.
    pub watch_period_secs: u32,
    /// The system CA stores its image has, each mounted over from its ConfigMap
    /// ([`system_store`]) with the environment CA appended; none for an image without one.
    pub stores: &'a [&'static str],
}

/// The volume of a service's system CA stores ([`system_store`]).
const STORE_VOLUME: &str = "af-store";

/// The labels of a service's pods, which its Service and Deployment select.
pub fn pod_labels(names: &Names, service: &str) -> BTreeMap<String, String> {
    role_labels(names, service, Role::Serve)
}

/// The metadata of `name`, an object of `kind_label` made for `service`.
pub fn meta(names: &Names, name: &str, kind_label: &str, service: &str) -> ObjectMeta {
    let mut labels = names.labels(kind_label);
    labels.insert(SERVICE.to_owned(), service.to_owned());
    ObjectMeta {
        name: Some(name.to_owned()),
        namespace: Some(names.namespace().to_owned()),
        labels: Some(labels),
        ..ObjectMeta::default()
    }
}

/// The ConfigMap of the CA files every service mounts at `/etc/af` (certificates only: the
/// CA's key stays in the sidecar's Secret).
pub fn trust_files(names: &Names, files: &TrustFiles) -> ConfigMap {
    let file = |path: &str| path.rsplit('/').next().unwrap_or(path).to_owned();
    stamp(ConfigMap {
        metadata: meta(names, names::TRUST, kind::TRUST, ""),
        data: Some(BTreeMap::from([
            (file(trust::BUNDLE_PATH), files.bundle_pem.clone()),
            (file(trust::CA_PATH), files.ca_pem.clone()),
        ])),
        ..ConfigMap::default()
    })
}

/// The ConfigMap of `service`'s system CA stores, each the image's own with the environment CA
/// appended (`trust::store::replacements`), under [`store_key`]: mounted over the image's
/// files, so a client that reads only its system store (Java's default store, Go, `requests`
/// with `trust_env=False`) trusts intercepted answers too.
pub fn system_store(names: &Names, service: &str, stores: &[(&str, String)]) -> ConfigMap {
    stamp(ConfigMap {
        metadata: meta(names, &names::system_store(service), kind::STORE, service),
        data: Some(
            stores
                .iter()
                .map(|(path, pem)| (store_key(path), pem.clone()))
                .collect(),
        ),
        ..ConfigMap::default()
    })
}

/// A store's key in its ConfigMap: its path, `/` as `_` (`etc_ssl_certs_ca-certificates.crt`).
fn store_key(path: &str) -> String {
    path.trim_start_matches('/').replace('/', "_")
}

/// The Secret of the variables every service gets that are secret (the webhook secrets),
/// each under its variable's name; the Deployments name them, never hold them.
pub fn env_secret(names: &Names, provisions: Provisions<'_>) -> Secret {
    let data: BTreeMap<String, ByteString> = service_env::secrets(provisions)
        .into_iter()
        .map(|v| (v.name, ByteString(v.value.into_bytes())))
        .collect();
    let mut metadata = meta(names, names::SERVICE_ENV, kind::SERVICE_ENV, "");
    // The secrets' own digest, not one of the values: a label is readable by all.
    if let Some(labels) = metadata.labels.as_mut() {
        labels.insert(CONFIG.to_owned(), provisions.webhooks.digest());
    }
    Secret {
        metadata,
        data: Some(data),
        type_: Some("Opaque".to_owned()),
        ..Secret::default()
    }
}

/// A variable as the container has it: a secret one by reference to [`env_secret`].
fn env_var(v: service_env::Variable) -> EnvVar {
    if v.secret {
        return EnvVar {
            value_from: Some(EnvVarSource {
                secret_key_ref: Some(SecretKeySelector {
                    name: names::SERVICE_ENV.to_owned(),
                    key: v.name.clone(),
                    optional: Some(false),
                }),
                ..EnvVarSource::default()
            }),
            name: v.name,
            value: None,
        };
    }
    EnvVar {
        name: v.name,
        value: Some(v.value),
        value_from: None,
    }
}

/// The service's Service, when it listens on a port.
pub fn service(names: &Names, service: &ServicePlan) -> Option<Service> {
    let port = service.port?;
    Some(stamp(Service {
        metadata: meta(names, &service.name, kind::SERVICE, &service.name),
        spec: Some(ServiceSpec {
            selector: Some(pod_labels(names, &service.name)),
            ports: Some(vec![ServicePort {
                name: Some("main".to_owned()),
                protocol: Some("TCP".to_owned()),
                port: i32::from(port),
                target_port: Some(IntOrString::Int(i32::from(port))),
                ..ServicePort::default()
            }]),
            ..ServiceSpec::default()
        }),
        status: None,
    }))
}

/// What a pod of a service is for: the role decides its `dev.antifailure.kind`, its command,
/// whether it serves (port, readiness) and whether it restarts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// The long-running service of a Deployment.
    Serve,
    /// The service's migration, run once by a Job.
    Migrate,
    /// One run of a cron service, by its CronJob.
    Cron,
}

impl Role {
    /// The kind label of the role's objects and pods.
    pub fn kind(self) -> &'static str {
        match self {
            Role::Serve => kind::SERVICE,
            Role::Migrate => kind::MIGRATION,
            Role::Cron => kind::CRON,
        }
    }
}

/// The labels of a service's pods in `role`: a Deployment's selector never matches the pods
/// of the service's Job or CronJob, nor does its Service.
pub fn role_labels(names: &Names, service: &str, role: Role) -> BTreeMap<String, String> {
    let mut labels = names.labels(role.kind());
    labels.insert(SERVICE.to_owned(), service.to_owned());
    labels.insert(NETWORK.to_owned(), network::SERVICE.to_owned());
    labels
}

/// The metadata of the service's object in `role` (named as the service: a Job, a CronJob and a
/// Deployment of one name are different objects).
pub fn object_meta(names: &Names, service: &str, role: Role) -> ObjectMeta {
    meta(names, service, role.kind(), service)
}

/// The service's pod in `role`: its image, environment, CA files, capabilities and limits, confined,
/// resolving through the sidecar only, behind the gate. Every pod of a service, whatever runs
/// it, is this one template.
pub fn pod_template(names: &Names, spec: &Spec<'_>, role: Role) -> PodTemplateSpec {
    let service = spec.service;
    let env = service_env::variables(spec.plan, service, spec.sidecar, spec.provisions)
        .into_iter()
        .map(env_var)
        .collect();
    let serves = role == Role::Serve;
    let command = match role {
        Role::Migrate => &service.migrate,
        Role::Serve | Role::Cron => &service.command,
    };
    let main = Container {
        name: service.name.clone(),
        image: Some(spec.image.to_owned()),
        image_pull_policy: Some(spec.pull_policy.to_owned()),
        // As Docker runs it: the entrypoint replaced only when the service names one, the
        // command (or the migration) its arguments.
        command: (!service.entrypoint.is_empty()).then(|| service.entrypoint.clone()),
        args: (!command.is_empty()).then(|| command.clone()),
        env: Some(env),
        ports: service.port.filter(|_| serves).map(|port| {
            vec![ContainerPort {
                container_port: i32::from(port),
                protocol: Some("TCP".to_owned()),
                ..ContainerPort::default()
            }]
        }),
        readiness_probe: if serves { readiness(service) } else { None },
        resources: resources(service.resources),
        volume_mounts: Some(
            [VolumeMount {
                name: "af-trust".to_owned(),
                mount_path: "/etc/af".to_owned(),
                read_only: Some(true),
                ..VolumeMount::default()
            }]
            .into_iter()
            .chain(spec.stores.iter().map(|path| VolumeMount {
                name: STORE_VOLUME.to_owned(),
                mount_path: (*path).to_owned(),
                sub_path: Some(store_key(path)),
                read_only: Some(true),
                ..VolumeMount::default()
            }))
            .collect(),
        ),
        ..Container::default()
    };
    let gate = gate_container(spec.gate, spec.sidecar);
    let mut pod = confinement::pod_spec(vec![main], IpAddr::V4(spec.sidecar));
    let fence = (!spec.fence.is_empty())
        .then(|| fence_container(&spec.gate.image, &spec.gate.pull_policy, spec.fence));
    pod.init_containers = Some(
        fence
            .into_iter()
            .chain([confinement::confine(gate)])
            .collect(),
    );
    confinement::give_back(&mut pod, &service.capabilities);
    // After the service's own capabilities are given back: the watcher gets none.
    if serves {
        pod.containers.push(watch_container(
            spec.gate,
            spec.sidecar,
            spec.watch_period_secs,
        ));
    }
    let config_map = |name: String| ConfigMapVolumeSource {
        name,
        ..ConfigMapVolumeSource::default()
    };
    let store = (!spec.stores.is_empty()).then(|| Volume {
        name: STORE_VOLUME.to_owned(),
        config_map: Some(config_map(names::system_store(&service.name))),
        ..Volume::default()
    });
    pod.volumes = Some(
        [Volume {
            name: "af-trust".to_owned(),
            config_map: Some(config_map(names::TRUST.to_owned())),
            ..Volume::default()
        }]
        .into_iter()
        .chain(store)
        .collect(),
    );
    if !serves {
        // Run once: a failure is reported, never retried in place.
        pod.restart_policy = Some("Never".to_owned());
    }
    PodTemplateSpec {
        metadata: Some(ObjectMeta {
            labels: Some(role_labels(names, &service.name, role)),
            annotations: Some(BTreeMap::from([
                (CONFIG.to_owned(), spec.provisions.digest()),
                (DEFAULT_CONTAINER.to_owned(), service.name.clone()),
            ])),
            ..ObjectMeta::default()
        }),
        spec: Some(pod),
    }
}

/// TCP when the service has no `health_path`, HTTP when it has (Kubernetes counts 4xx and 5xx
/// as not ready).
fn readiness(service: &ServicePlan) -> Option<Probe> {
    let port = IntOrString::Int(i32::from(service.port?));
    let timeout = i32::try_from(service.health_timeout.as_secs()).unwrap_or(i32::MAX);
    Some(match &service.health_path {
        Some(path) => Probe {
            http_get: Some(HTTPGetAction {
                path: Some(path.clone()),
                port,
                ..HTTPGetAction::default()
            }),
            period_seconds: Some(1),
            failure_threshold: Some(timeout.max(1)),
            ..Probe::default()
        },
        None => Probe {
            tcp_socket: Some(TCPSocketAction { port, host: None }),
            period_seconds: Some(1),
            failure_threshold: Some(timeout.max(1)),
            ..Probe::default()
        },
    })
}

/// The limits of the service's container as Kubernetes quantities (`500m`, bytes), requested
/// as much as they limit: Kubernetes would copy a limit without a request into the request
/// anyway, so writing it says what the pod is scheduled with (and no LimitRange default can
/// make the request differ). `None` with no limits: the pod is scheduled on no request.
fn resources(limits: Limits) -> Option<ResourceRequirements> {
    let quantities: BTreeMap<String, Quantity> = [
        ("cpu", limits.cpu_millicores.map(|m| format!("{m}m"))),
        ("memory", limits.memory_bytes.map(|b| b.to_string())),
    ]
    .into_iter()
    .filter_map(|(name, q)| Some((name.to_owned(), Quantity(q?))))
    .collect();
    (!quantities.is_empty()).then(|| ResourceRequirements {
        limits: Some(quantities.clone()),
        requests: Some(quantities),
        ..ResourceRequirements::default()
    })
}

/// The service's Deployment, at the manifest's `replicas`.
pub fn deployment(names: &Names, spec: &Spec<'_>) -> Deployment {
    let service = spec.service;
    stamp(Deployment {
        metadata: object_meta(names, &service.name, Role::Serve),
        spec: DeploymentSpec {
            replicas: Some(i32::try_from(service.replicas).unwrap_or(i32::MAX)),
            selector: LabelSelector {
                match_labels: Some(pod_labels(names, &service.name)),
                ..LabelSelector::default()
            },
            template: pod_template(names, spec, Role::Serve),
            ..DeploymentSpec::default()
        },
        status: None,
    })
}

/// What a service pod's fence lets out: the sidecar's Service on its listeners, and the
/// environment's own Services (`services`, the sidecar's among them or not) on any port.
pub fn fence_allowances(sidecar: Ipv4Addr, services: &[IpAddr]) -> Vec<String> {
    let mut allowed: Vec<String> = policies::fence_allows()
        .into_iter()
        .map(|(transport, port)| {
            let protocol = match transport {
                Transport::Tcp => "tcp",
                Transport::Udp => "udp",
            };
            format!("{protocol}:{sidecar}:{port}")
        })
        .collect();
    let others: BTreeSet<&IpAddr> = services
        .iter()
        .filter(|ip| **ip != IpAddr::V4(sidecar))
        .collect();
    allowed.extend(others.into_iter().map(|ip| format!("host:{ip}")));
    allowed
}

/// A pod's fence: `af-probe fence` from `image`, root with `NET_ADMIN` alone (the only container of the
/// pod with a capability), writing the rules of the pod's network namespace before the gate and
/// the service run. A cluster whose admission refuses `NET_ADMIN` refuses the pod, and `af up`
/// names it.
pub fn fence_container(image: &str, pull_policy: &str, allowed: &[String]) -> Container {
    let mut args = vec!["fence".to_owned()];
    args.extend(allowed.iter().cloned());
    Container {
        name: FENCE.to_owned(),
        image: Some(image.to_owned()),
        image_pull_policy: Some(pull_policy.to_owned()),
        command: Some(vec![
            crate::runtime::kubernetes::probe::pod::BINARY.to_owned(),
        ]),
        args: Some(args),
        security_context: Some(SecurityContext {
            allow_privilege_escalation: Some(false),
            privileged: Some(false),
            run_as_user: Some(0),
            run_as_non_root: Some(false),
            read_only_root_filesystem: Some(true),
            capabilities: Some(Capabilities {
                drop: Some(vec!["ALL".to_owned()]),
                add: Some(vec!["NET_ADMIN".to_owned()]),
            }),
            ..SecurityContext::default()
        }),
        ..Container::default()
    }
}

fn gate_container(gate: &Gate, sidecar: Ipv4Addr) -> Container {
    let sidecar = SocketAddr::new(
        IpAddr::V4(sidecar),
        af_sidecar_api::config::ProxyListener::DEFAULT_PORT,
    );
    let mut args = vec![
        "gate".to_owned(),
        sidecar.to_string(),
        gate.rounds.to_string(),
        gate.deadline_secs.to_string(),
    ];
    args.extend(gate.escapes.iter().cloned());
    Container {
        name: GATE.to_owned(),
        image: Some(gate.image.clone()),
        image_pull_policy: Some(gate.pull_policy.clone()),
        command: Some(vec![
            crate::runtime::kubernetes::probe::pod::BINARY.to_owned(),
        ]),
        args: Some(args),
        ..Container::default()
    }
}

/// The containment watcher: `af-probe watch` from the gate's image, trying the gate's escapes
/// and the sidecar's two layer witnesses each period and reporting to the sidecar with the
/// token of [`WATCH_SECRET`]. No capability, no privilege, a nobody user, a read-only root and
/// a small fixed share of the pod.
fn watch_container(gate: &Gate, sidecar: Ipv4Addr, period_secs: u32) -> Container {
    let at = |port: u16| SocketAddr::new(IpAddr::V4(sidecar), port).to_string();
    let mut args = vec![
        "watch".to_owned(),
        at(Containment::REPORT_PORT),
        period_secs.to_string(),
        at(Containment::POLICY_WITNESS_PORT),
        at(Containment::FENCE_WITNESS_PORT),
    ];
    args.extend(gate.escapes.iter().cloned());
    let share = BTreeMap::from([
        ("cpu".to_owned(), Quantity("20m".to_owned())),
        ("memory".to_owned(), Quantity("16Mi".to_owned())),
    ]);
    let container = confinement::confine(Container {
        name: WATCH.to_owned(),
        image: Some(gate.image.clone()),
        image_pull_policy: Some(gate.pull_policy.clone()),
        command: Some(vec![
            crate::runtime::kubernetes::probe::pod::BINARY.to_owned(),
        ]),
        args: Some(args),
        env: Some(vec![
            EnvVar {
                name: "AF_WATCH_POD".to_owned(),
                value_from: Some(EnvVarSource {
                    field_ref: Some(ObjectFieldSelector {
                        field_path: "metadata.name".to_owned(),
                        api_version: None,
                    }),
                    ..EnvVarSource::default()
                }),
                ..EnvVar::default()
            },
            EnvVar {
                name: "AF_WATCH_TOKEN".to_owned(),
                value_from: Some(EnvVarSource {
                    secret_key_ref: Some(SecretKeySelector {
                        name: WATCH_SECRET.to_owned(),
                        key: WATCH_SECRET_KEY.to_owned(),
                        optional: Some(false),
                    }),
                    ..EnvVarSource::default()
                }),
                ..EnvVar::default()
            },
        ]),
        resources: Some(ResourceRequirements {
            limits: Some(share.clone()),
            requests: Some(share),
            ..ResourceRequirements::default()
        }),
        ..Container::default()
    });
    let mut container = container;
    if let Some(security) = container.security_context.as_mut() {
        security.run_as_user = Some(65534);
        security.run_as_non_root = Some(true);
        security.read_only_root_filesystem = Some(true);
    }
    container
}

/// The Secret of the containment watchers' token.
pub fn watch_secret(names: &Names, token: &str) -> Secret {
    stamp(Secret {
        metadata: meta(names, WATCH_SECRET, kind::SIDECAR, "sidecar"),
        data: Some(BTreeMap::from([(
            WATCH_SECRET_KEY.to_owned(),
            ByteString(token.as_bytes().to_vec()),
        )])),
        ..Secret::default()
    })
}
