//! The environment itself, once the cluster passed the containment probe: the sidecar first
//! (its Service, whose address every outside name resolves to; its configuration Secret; its
//! Deployment, available before anything else starts), then each service in the plan's order
//! (its Service, its Deployment, available before the next), then what the manifest no longer
//! has goes. Every object is reused when its digest is unchanged and replaced in place when not.
//!
//! The sidecar's document is the one every runtime writes ([`sidecar_doc`]); on a cluster the
//! environment's names are fixed ([`InsideNames::Fixed`]): each service's name and the
//! sidecar's alias, with the Service addresses made here, answered by the sidecar itself. No
//! query goes to the cluster's resolver, and nothing of another namespace is inside.

pub mod journal;
pub mod objects;
pub mod services;
pub mod sidecar;

use std::collections::{BTreeMap, BTreeSet};
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::time::{Duration, SystemTime};

use af_sidecar_api::config::Admin;
use ipnet::IpNet;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Pod, Secret, Service};
use kube::api::{Api, DeleteParams, ListParams, LogParams};
use kube::{Client, ResourceExt};

use self::journal::Journal;
use self::services::{Gate, Spec};
use super::Timeouts;
use super::cluster::refused;
use super::images::{self, Delivery};
use super::inspect;
use super::names::{self, Names, kind};
use super::wait::{self, Poll};
use crate::plan::{EnvPlan, Kind};
use crate::runtime::labels::SERVICE;
use crate::runtime::local::images::SidecarSource;
use crate::runtime::local::{client, images as local_images, labels as local_labels};
use crate::runtime::service_env::Provisions;
use crate::runtime::sidecar_doc::{self, ALIAS, InsideNames, Kept, Placement, Secrets};
use crate::runtime::{Action, Progress, RuntimeError, ServiceUp, UpReport};
use crate::trust::{self, TrustFiles};
use crate::webhook::WebhookSecrets;

/// Container states after which a pod will not start without a change.
const STUCK: [&str; 6] = [
    "ErrImageNeverPull",
    "ErrImagePull",
    "ImagePullBackOff",
    "InvalidImageName",
    "CreateContainerConfigError",
    "CrashLoopBackOff",
];

/// What deploying needs besides the plan.
pub struct Deployer<'a> {
    /// The cluster.
    pub client: &'a Client,
    /// The environment's names.
    pub names: &'a Names,
    /// How images reach the nodes.
    pub delivery: &'a Delivery,
    /// Where the sidecar image comes from.
    pub sidecar_source: &'a SidecarSource,
    /// The sidecar's resolver for outside names (`ADDR:PORT`).
    pub upstream_resolver: SocketAddr,
    /// Networks the sidecar's guard may dial although private (tests only).
    pub trusted_networks: &'a [IpNet],
    /// The gate every service pod runs first.
    pub gate: Gate,
    /// The stages' timeouts.
    pub timeouts: &'a Timeouts,
}

/// What this runtime does not deploy yet, refused before anything is made (AF-RUN-044).
pub fn unsupported(plan: &EnvPlan) -> Option<String> {
    let named = |pick: &dyn Fn(&crate::plan::ServicePlan) -> bool| -> Vec<&str> {
        plan.services
            .iter()
            .filter(|s| pick(s))
            .map(|s| s.name.as_str())
            .collect()
    };
    let migrate = named(&|s| !s.migrate.is_empty());
    let cron = named(&|s| s.kind == Kind::Cron);
    let what = if !migrate.is_empty() {
        format!("migrations (of {})", migrate.join(", "))
    } else if !cron.is_empty() {
        format!("cron services ({})", cron.join(", "))
    } else {
        return None;
    };
    Some(format!(
        "The kubernetes runtime does not run {what} yet; nothing was created. Run this environment on the local runtime, or without them."
    ))
}

impl Deployer<'_> {
    /// Deploy the sidecar and the services of `plan`.
    pub async fn deploy(
        &self,
        plan: &EnvPlan,
        progress: &dyn Progress,
    ) -> Result<UpReport, RuntimeError> {
        let docker = client::connect().await?;
        let image =
            local_images::ensure_sidecar_image(&docker, self.sidecar_source, progress).await?;
        images::to_nodes(self.delivery, "sidecar", &image, progress).await?;

        // The Services first: their addresses are the sidecar's, and the environment's names.
        progress.begin("sidecar service")?;
        let sidecar_ip = self.ensure_service(sidecar::service(self.names)).await?.0;
        let IpAddr::V4(sidecar_v4) = sidecar_ip else {
            return Err(RuntimeError::Unsupported(format!(
                "The sidecar's Service got the IPv6 address {sidecar_ip}; IPv6-only clusters are not supported yet."
            )));
        };
        let mut hosts = BTreeMap::from([(ALIAS.to_owned(), vec![sidecar_ip])]);
        for service in &plan.services {
            if let Some(rendered) = services::service(self.names, service) {
                let (ip, _) = self.ensure_service(rendered).await?;
                hosts.insert(service.name.clone(), vec![ip]);
                hosts.insert(self.names.cluster_name(&service.name), vec![ip]);
            }
        }

        let secrets = self
            .ensure_sidecar(plan, &image, sidecar_v4, hosts, progress)
            .await?;
        let trust_files = TrustFiles::new(&trust::bundle::system_roots()?, &secrets.ca);
        let webhooks = WebhookSecrets::derive(&secrets.token);
        let provisions = Provisions {
            trust: &trust_files,
            webhooks: &webhooks,
        };
        objects::ensure(
            self.client,
            self.names.namespace(),
            services::trust_files(self.names, &trust_files),
            |_, _| {},
        )
        .await?;
        objects::ensure(
            self.client,
            self.names.namespace(),
            services::env_secret(self.names, provisions),
            |_, _| {},
        )
        .await?;

        let mut report = UpReport {
            env: plan.env.clone(),
            services: Vec::new(),
            admin: None,
        };
        let local = local_labels::Names::new(&plan.env);
        for service in &plan.services {
            local_images::build_service_image(&docker, &local, service, progress).await?;
            let reference = local.image(&service.name);
            images::to_nodes(self.delivery, &service.name, &reference, progress).await?;
            let spec = Spec {
                plan,
                service,
                image: &reference,
                pull_policy: self.delivery.pull_policy(),
                sidecar: sidecar_v4,
                provisions,
                gate: &self.gate,
            };
            progress.begin(&format!("starting {}", service.name))?;
            let (_, action) = objects::ensure(
                self.client,
                self.names.namespace(),
                services::deployment(self.names, &spec),
                |_, _| {},
            )
            .await?;
            self.wait_available(
                &service.name,
                &service.name,
                self.timeouts.service,
                progress,
            )
            .await?;
            let up = ServiceUp {
                name: service.name.clone(),
                kind: service.kind,
                ready: true,
                url: None,
                action,
            };
            progress.service(&up);
            report.services.push(up);
        }
        self.remove_stale(plan, progress).await?;
        Ok(report)
    }

    /// Make or reuse a Service; its cluster address is kept when it is replaced.
    async fn ensure_service(&self, wanted: Service) -> Result<(IpAddr, Action), RuntimeError> {
        let name = wanted.name_any();
        let (made, action) = objects::ensure(
            self.client,
            self.names.namespace(),
            wanted,
            |found: &Service, wanted: &mut Service| {
                if let (Some(old), Some(new)) = (found.spec.as_ref(), wanted.spec.as_mut()) {
                    new.cluster_ip.clone_from(&old.cluster_ip);
                    new.cluster_ips.clone_from(&old.cluster_ips);
                }
            },
        )
        .await?;
        let ip = made
            .spec
            .and_then(|s| s.cluster_ip)
            .and_then(|ip| ip.parse::<IpAddr>().ok())
            .ok_or_else(|| RuntimeError::Api {
                context: format!("read the address of Service {name}"),
                message: "the API server gave it no cluster address".to_owned(),
            })?;
        Ok((ip, action))
    }

    /// The sidecar's Secret and Deployment, keeping the token and CA of the Secret there is;
    /// waits until the sidecar is available.
    async fn ensure_sidecar(
        &self,
        plan: &EnvPlan,
        image: &str,
        sidecar_v4: Ipv4Addr,
        hosts: BTreeMap<String, Vec<IpAddr>>,
        progress: &dyn Progress,
    ) -> Result<Secrets, RuntimeError> {
        let namespace = self.names.namespace();
        let secrets_api: Api<Secret> = Api::namespaced(self.client.clone(), namespace);
        let previous = secrets_api
            .get_opt(names::SIDECAR_CONFIG)
            .await
            .map_err(refused(format!(
                "read the sidecar's configuration in {namespace}"
            )))?
            .and_then(|s| s.data)
            .and_then(|d| d.get(names::SIDECAR_CONFIG_KEY).map(|b| b.0.clone()))
            .and_then(|bytes| Kept::read(&bytes));
        let secrets = Secrets::keep_or_make(previous.as_ref(), &plan.env, SystemTime::now())?;
        let inside: Vec<IpNet> = hosts
            .values()
            .flatten()
            .collect::<BTreeSet<_>>()
            .into_iter()
            .map(|ip| IpNet::from(*ip))
            .collect();
        let upstream = self.upstream_resolver.to_string();
        let placement = Placement {
            inside,
            names: InsideNames::Fixed(hosts),
            inside_addr: sidecar_v4,
            admin: SocketAddr::from((Ipv4Addr::LOCALHOST, Admin::DEFAULT_PORT)),
            // Asked for nothing: every inside name is fixed above.
            inside_resolver: self.upstream_resolver,
            upstream_resolver: &upstream,
            trusted_networks: self.trusted_networks,
        };
        let doc = sidecar_doc::document(plan, &placement, &secrets);
        let digest = sidecar_doc::digest(&doc, image);
        progress.begin("starting sidecar")?;
        objects::ensure(
            self.client,
            namespace,
            sidecar::config_secret(self.names, &doc, &digest),
            |_, _| {},
        )
        .await?;
        let journal = self.ensure_journal(progress).await?;
        objects::ensure(
            self.client,
            namespace,
            sidecar::deployment(
                self.names,
                image,
                self.delivery.pull_policy(),
                &digest,
                &journal,
            ),
            |_, _| {},
        )
        .await?;
        self.wait_available(names::SIDECAR, "sidecar", self.timeouts.sidecar, progress)
            .await?;
        Ok(secrets)
    }

    /// Where the journal goes, its claim made when it is a new one.
    async fn ensure_journal(&self, progress: &dyn Progress) -> Result<Journal, RuntimeError> {
        let chosen = journal::choose(self.client, self.names).await?;
        match &chosen {
            Journal::Claim { class, made: false } => {
                objects::ensure(
                    self.client,
                    self.names.namespace(),
                    journal::claim(self.names, class),
                    |_, _| {},
                )
                .await?;
                progress.step(&format!(
                    "sidecar journal on PersistentVolumeClaim {} (StorageClass {class})",
                    names::JOURNAL_CLAIM
                ));
            }
            Journal::Claim { .. } => {}
            Journal::InPod(reason) => progress.step(&format!(
                "sidecar journal in its pod: {reason}, so it is lost when the pod is replaced"
            )),
        }
        Ok(chosen)
    }

    /// Wait until the Deployment `name` (of `service`) is available; see [`wait_available`].
    async fn wait_available(
        &self,
        name: &str,
        service: &str,
        timeout: Duration,
        progress: &dyn Progress,
    ) -> Result<(), RuntimeError> {
        wait_available(
            self.client,
            self.names,
            self.timeouts.poll,
            Rollout {
                name,
                service,
                timeout,
                not: &[],
            },
            progress,
        )
        .await
    }

    /// Delete the Deployments and Services of services the plan no longer has.
    async fn remove_stale(
        &self,
        plan: &EnvPlan,
        progress: &dyn Progress,
    ) -> Result<(), RuntimeError> {
        let namespace = self.names.namespace();
        let wanted: BTreeSet<&str> = plan.services.iter().map(|s| s.name.as_str()).collect();
        let lp = ListParams::default().labels(&self.names.selector_of(kind::SERVICE));
        let deployments: Api<Deployment> = Api::namespaced(self.client.clone(), namespace);
        let services: Api<Service> = Api::namespaced(self.client.clone(), namespace);
        let stale = |labels: &BTreeMap<String, String>| {
            !wanted.contains(labels.get(SERVICE).map_or("", String::as_str))
        };
        for d in deployments
            .list(&lp)
            .await
            .map_err(refused(format!("list the Deployments of {namespace}")))?
        {
            if stale(d.labels()) {
                progress.begin(&format!("removing {}", d.name_any()))?;
                deployments
                    .delete(&d.name_any(), &DeleteParams::background())
                    .await
                    .map_err(refused(format!("delete Deployment {}", d.name_any())))?;
            }
        }
        for s in services
            .list(&lp)
            .await
            .map_err(refused(format!("list the Services of {namespace}")))?
        {
            if stale(s.labels()) {
                services
                    .delete(&s.name_any(), &DeleteParams::background())
                    .await
                    .map_err(refused(format!("delete Service {}", s.name_any())))?;
            }
        }
        Ok(())
    }
}

/// A Deployment to wait for.
pub struct Rollout<'a> {
    /// The Deployment.
    pub name: &'a str,
    /// Its service (`sidecar` for the sidecar).
    pub service: &'a str,
    /// How long it may take.
    pub timeout: Duration,
    /// Pods that do not count: the ones a restart replaces, by name.
    pub not: &'a [String],
}

/// Wait until the Deployment of `rollout` has every replica updated and ready, with a Ready
/// pod not in `rollout.not`; a pod whose gate gave up is reported as not governed
/// (AF-RUN-043), one stuck (an image that cannot be pulled, a crash loop) as not ready.
pub async fn wait_available(
    client: &Client,
    names: &Names,
    poll: Duration,
    rollout: Rollout<'_>,
    progress: &dyn Progress,
) -> Result<(), RuntimeError> {
    let Rollout {
        name,
        service,
        timeout,
        not,
    } = rollout;
    let namespace = names.namespace();
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), namespace);
    let pods: Api<Pod> = Api::namespaced(client.clone(), namespace);
    let selector = format!("{},{SERVICE}={service}", names.selector());
    let stage = format!("{service} to be available");
    let container = inspect::container_of(service);
    let outcome = wait::until(&stage, timeout, poll, progress, || async {
        let found = deployments
            .get_opt(name)
            .await
            .map_err(refused(format!("read Deployment {name} in {namespace}")))?;
        let listed = pods
            .list(&ListParams::default().labels(&selector))
            .await
            .map_err(refused(format!("list the pods of {service}")))?;
        let fresh: Vec<Pod> = listed
            .items
            .iter()
            .filter(|p| !not.contains(&p.name_any()))
            .cloned()
            .collect();
        let new_pod_ready =
            not.is_empty() || inspect::choose(&fresh, container, inspect::Need::Ready).is_some();
        if found.as_ref().is_some_and(available) && new_pod_ready {
            return Ok(Poll::Ready(()));
        }
        for pod in &fresh {
            if let Some(route) = gate_failed(pod) {
                let log = gate_log(&pods, &pod.name_any()).await;
                return Err(RuntimeError::Ungoverned {
                    service: service.to_owned(),
                    namespace: namespace.to_owned(),
                    route: log.unwrap_or(route),
                });
            }
            if let Some(stuck) = stuck(pod) {
                return Err(RuntimeError::NotReady {
                    service: service.to_owned(),
                    seconds: 0,
                    tail: vec![stuck],
                });
            }
        }
        Ok(Poll::Pending(pod_states(&listed.items)))
    })
    .await?;
    outcome.map_err(|state| RuntimeError::Timeout {
        what: format!("{service} in {namespace} to be available"),
        seconds: timeout.as_secs(),
        state,
        knob: if service == "sidecar" {
            "AF_KUBE_SIDECAR_TIMEOUT"
        } else {
            "AF_KUBE_SERVICE_TIMEOUT"
        },
    })
}

/// Every replica of the current generation updated and ready.
fn available(d: &Deployment) -> bool {
    let want = d.spec.replicas.unwrap_or(1);
    let Some(status) = d.status.as_ref() else {
        return false;
    };
    status.observed_generation >= d.metadata.generation
        && status.updated_replicas.unwrap_or(0) >= want
        && status.available_replicas.unwrap_or(0) >= want
        && status.replicas.unwrap_or(0) == want
}

/// The gate's own account, when it exited non-zero.
fn gate_failed(pod: &Pod) -> Option<String> {
    let statuses = pod.status.as_ref()?.init_container_statuses.as_ref()?;
    let gate = statuses.iter().find(|s| s.name == services::GATE)?;
    let terminated = gate
        .state
        .as_ref()
        .and_then(|s| s.terminated.as_ref())
        .or_else(|| gate.last_state.as_ref().and_then(|s| s.terminated.as_ref()))?;
    (terminated.exit_code != 0).then(|| {
        terminated
            .message
            .clone()
            .unwrap_or_else(|| format!("its gate exited with status {}", terminated.exit_code))
    })
}

/// The route the gate's last line names.
async fn gate_log(pods: &Api<Pod>, pod: &str) -> Option<String> {
    let params = LogParams {
        container: Some(services::GATE.to_owned()),
        previous: false,
        tail_lines: Some(5),
        ..LogParams::default()
    };
    let text = pods.logs(pod, &params).await.ok()?;
    let line = text.lines().rev().find(|l| l.contains("\"route\""))?;
    let value: serde_json::Value = serde_json::from_str(line).ok()?;
    value.get("route")?.as_str().map(str::to_owned)
}

/// A container of `pod` waiting in a state it will not leave by itself.
fn stuck(pod: &Pod) -> Option<String> {
    let status = pod.status.as_ref()?;
    status
        .init_container_statuses
        .iter()
        .chain(status.container_statuses.iter())
        .flatten()
        .find_map(|c| {
            let waiting = c.state.as_ref()?.waiting.as_ref()?;
            let reason = waiting.reason.as_deref()?;
            STUCK.contains(&reason).then(|| {
                format!(
                    "{}: {reason}{}",
                    c.name,
                    waiting
                        .message
                        .as_deref()
                        .map(|m| format!(" ({m})"))
                        .unwrap_or_default()
                )
            })
        })
}

/// `2 pods: Pending, Init:0/1` for progress lines.
fn pod_states(pods: &[Pod]) -> String {
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
