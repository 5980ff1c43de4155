//! The environment itself, once the cluster passed the containment probe: the sidecar first
//! (its Service, whose address every outside name resolves to; its configuration Secret; its
//! Deployment, available before anything else starts), then each service in the plan's order
//! ([`Deployer::start`]): its migration Job run to completion ([`jobs`]), then its Deployment,
//! available before the next (a cron service: its CronJob, [`cron`]), then with a domain its
//! Ingress and the policy letting the ingress controller in ([`ingress`]); then what the
//! manifest no longer has goes ([`stale`]). Every object is reused when its digest is unchanged
//! and replaced in place when not (a Job, which cannot change, is made again).
//!
//! The sidecar's document is the one every runtime writes ([`sidecar_doc`]); on a cluster the
//! environment's names are fixed ([`InsideNames::Fixed`]): each service's name and the
//! sidecar's alias, with the Service addresses made here, answered by the sidecar itself. No
//! query goes to the cluster's resolver, and nothing of another namespace is inside.

pub mod cron;
pub mod ingress;
pub mod jobs;
pub mod journal;
pub mod keeper;
pub mod objects;
pub mod pods;
pub mod services;
pub mod sidecar;
pub mod stale;

use std::collections::{BTreeMap, BTreeSet};
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::time::{Duration, SystemTime};

use std::num::NonZeroU32;

use af_sidecar_api::config::{Admin, Containment};
use ipnet::IpNet;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{ConfigMap, Pod, Secret, Service};
use k8s_openapi::api::networking::v1::{Ingress, NetworkPolicy};
use kube::api::{Api, ListParams};
use kube::{Client, ResourceExt};

use self::cron::CronApi;
use self::ingress::IngressOptions;
use self::journal::Journal;
use self::services::{Gate, Spec};
use super::Timeouts;
use super::cluster::refused;
use super::names::{self, Names, kind};
use super::selection;
use super::supply::Supplied;
use super::wait::{self, Poll};
use crate::plan::{EnvPlan, Kind, ServicePlan};
use crate::runtime::labels::SERVICE;
use crate::runtime::service_env::Provisions;
use crate::runtime::sidecar_doc::{self, ALIAS, InsideNames, Kept, Placement, Secrets};
use crate::runtime::{Action, Phase, Progress, RuntimeError, ServiceUp, UpReport};
use crate::trust::store::ImageFile;
use crate::trust::{self, TrustFiles, store};
use crate::webhook::WebhookSecrets;

/// What deploying needs besides the plan.
pub struct Deployer<'a> {
    /// The cluster.
    pub client: &'a Client,
    /// The environment's names.
    pub names: &'a Names,
    /// The images the pods run, delivered.
    pub images: &'a Supplied,
    /// The sidecar's resolver for outside names (`ADDR:PORT`).
    pub upstream_resolver: SocketAddr,
    /// Networks the sidecar's guard may dial although private (tests only).
    pub trusted_networks: &'a [IpNet],
    /// The gate every service pod runs first.
    pub gate: Gate,
    /// The containment keeper in the sidecar's pod (`containment.on_loss: stop`).
    pub keeper: Option<keeper::Keeper>,
    /// Whether every service pod writes its own fence first (`AF_KUBE_POD_LAYER`).
    pub pod_layer: bool,
    /// The stages' timeouts.
    pub timeouts: &'a Timeouts,
    /// The CronJob API the cluster serves, when the plan has cron services ([`cron::preflight`]).
    pub cron: Option<CronApi>,
    /// The domain and the ingress controllers of preview URLs.
    pub ingress: &'a IngressOptions,
}

/// What this runtime cannot deploy, refused before anything is made (AF-RUN-044): a cron
/// service without a schedule or with a name too long for a CronJob, a preview host longer
/// than a DNS name.
pub fn unsupported(plan: &EnvPlan, names: &Names, ingress: &IngressOptions) -> Option<String> {
    let cron = || plan.services.iter().filter(|s| s.kind == Kind::Cron);
    if let Some(s) = cron().find(|s| s.schedule.is_none()) {
        return Some(format!(
            "The cron service {} has no schedule, so there is nothing to make its CronJob with; nothing was created.",
            s.name
        ));
    }
    if let Some(s) = cron().find(|s| s.name.len() > cron::MAX_NAME) {
        return Some(format!(
            "The cron service {} has a name longer than the {} characters a CronJob's name may have; nothing was created. Shorten it.",
            s.name,
            cron::MAX_NAME
        ));
    }
    let domain = ingress.domain.as_deref()?;
    ingress::unsupported(names, &plan.services, domain)
}

impl Deployer<'_> {
    /// Deploy the sidecar and the services of `plan`.
    pub async fn deploy(
        &self,
        plan: &EnvPlan,
        progress: &dyn Progress,
    ) -> Result<UpReport, RuntimeError> {
        // The Services first: their addresses are the sidecar's, and the environment's names.
        progress.begin("sidecar service")?;
        let sidecar_ip = self.ensure_service(sidecar::service(self.names)).await?.0;
        let IpAddr::V4(sidecar_v4) = sidecar_ip else {
            return Err(RuntimeError::Unsupported(format!(
                "The sidecar's Service got the IPv6 address {sidecar_ip}; IPv6-only clusters are not supported yet."
            )));
        };
        let mut hosts = BTreeMap::from([(ALIAS.to_owned(), vec![sidecar_ip])]);
        for service in plan.services.iter().filter(|s| s.kind != Kind::Cron) {
            if let Some(rendered) = services::service(self.names, service) {
                let (ip, _) = self.ensure_service(rendered).await?;
                hosts.insert(service.name.clone(), vec![ip]);
                hosts.insert(self.names.cluster_name(&service.name), vec![ip]);
            }
        }

        let service_ips: Vec<IpAddr> = hosts.values().flatten().copied().collect();
        let fence = if self.pod_layer {
            services::fence_allowances(sidecar_v4, &service_ips)
        } else {
            Vec::new()
        };
        let secrets = self
            .ensure_sidecar(plan, &self.images.sidecar, sidecar_v4, hosts, progress)
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
        objects::ensure(
            self.client,
            self.names.namespace(),
            services::watch_secret(self.names, &secrets.containment_token()),
            |_, _| {},
        )
        .await?;

        let mut report = UpReport {
            env: plan.env.clone(),
            services: Vec::new(),
            admin: None,
        };
        for service in &plan.services {
            let image = self.images.services.get(&service.name).ok_or_else(|| {
                RuntimeError::engine(
                    format!("start {}", service.name),
                    "no image was supplied for it",
                )
            })?;
            let stores = self
                .ensure_system_store(&service.name, &image.stores, &trust_files)
                .await?;
            let spec = Spec {
                plan,
                service,
                image: &image.reference,
                pull_policy: self.images.pull_policy,
                sidecar: sidecar_v4,
                provisions,
                gate: &self.gate,
                fence: &fence,
                watch_period_secs: self.watch_period().get(),
                stores: &stores,
            };
            let up = self.start(&spec, progress).await?;
            progress.service(&up);
            report.services.push(up);
        }
        self.remove_stale(plan, progress).await?;
        Ok(report)
    }

    /// Start one service whose image the nodes have: its migration first, run to completion
    /// (or reused when it completed and has not changed); then its CronJob (a cron service) or
    /// its Deployment, available; then, with a domain, the policy letting the ingress
    /// controller in and its Ingress, whose URL is the service's.
    pub async fn start(
        &self,
        spec: &Spec<'_>,
        progress: &dyn Progress,
    ) -> Result<ServiceUp, RuntimeError> {
        let service = spec.service;
        let namespace = self.names.namespace();
        if !service.migrate.is_empty() {
            let job = jobs::job(self.names, spec, self.timeouts.migration);
            jobs::migrate(
                self.client,
                self.names,
                &service.name,
                job,
                self.timeouts,
                progress,
            )
            .await?;
        }
        progress.begin(&format!("starting {}", service.name))?;
        progress.phase(&service.name, Phase::Starting);
        let action = if service.kind == Kind::Cron {
            let api = self.cron.ok_or_else(|| {
                RuntimeError::Unsupported(format!(
                    "No CronJob API was found for the cron service {}; `af down` removes the namespace.",
                    service.name
                ))
            })?;
            cron::ensure(
                self.client,
                self.names,
                api,
                &cron::cron_job(self.names, spec),
            )
            .await?
        } else {
            let (_, action) = objects::ensure(
                self.client,
                namespace,
                services::deployment(self.names, spec),
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
            action
        };
        let mut url = None;
        if let (Some(policy), Some(ingress), Some(domain)) = (
            ingress::policy(self.names, service, self.ingress),
            ingress::ingress(self.names, service, self.ingress),
            self.ingress.domain.as_deref(),
        ) {
            objects::ensure(self.client, namespace, policy, |_, _| {}).await?;
            objects::ensure(self.client, namespace, ingress, |_, _| {}).await?;
            url = Some(ingress::url(self.names, &service.name, domain));
        }
        Ok(ServiceUp {
            name: service.name.clone(),
            kind: service.kind,
            ready: true,
            url,
            action,
        })
    }

    /// The system CA stores the service's image has (`found`), written with the environment
    /// CA appended into the service's ConfigMap that its pods mount over them; their paths
    /// (none, and no ConfigMap, for an image without a store).
    async fn ensure_system_store(
        &self,
        service: &str,
        found: &[(&'static str, ImageFile)],
        trust_files: &TrustFiles,
    ) -> Result<Vec<&'static str>, RuntimeError> {
        let stores = store::replacements(found.iter().cloned(), &trust_files.ca_pem);
        if !stores.is_empty() {
            objects::ensure(
                self.client,
                self.names.namespace(),
                services::system_store(self.names, service, &stores),
                |_, _| {},
            )
            .await?;
        }
        Ok(stores.into_iter().map(|(path, _)| path).collect())
    }

    /// Seconds between two checks of a containment watcher, at least one.
    fn watch_period(&self) -> NonZeroU32 {
        u32::try_from(self.timeouts.watch.as_secs())
            .ok()
            .and_then(NonZeroU32::new)
            .unwrap_or(NonZeroU32::MIN)
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
        let mut doc = sidecar_doc::document(plan, &placement, &secrets);
        doc.containment = Some(Containment {
            period_secs: self.watch_period(),
            ..Containment::new(secrets.containment_token())
        });
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
        let keeper = match &self.keeper {
            Some(keeper) => {
                self.ensure_keeper_rights(plan).await?;
                Some(keeper.container(
                    self.names,
                    plan,
                    placement.admin,
                    sidecar::CONFIG_VOLUME,
                    names::SIDECAR_CONFIG_KEY,
                ))
            }
            None => None,
        };
        objects::ensure(
            self.client,
            namespace,
            sidecar::deployment(
                self.names,
                image,
                self.images.pull_policy,
                &digest,
                &journal,
                keeper,
                plan.on_loss,
            ),
            |_, _| {},
        )
        .await?;
        self.wait_available(names::SIDECAR, "sidecar", self.timeouts.sidecar, progress)
            .await?;
        Ok(secrets)
    }

    /// The keeper's service account, role and binding: the rights to stop exactly the
    /// plan's objects.
    async fn ensure_keeper_rights(&self, plan: &EnvPlan) -> Result<(), RuntimeError> {
        let namespace = self.names.namespace();
        objects::ensure(
            self.client,
            namespace,
            keeper::service_account(self.names, self.images.pull_secret.is_some()),
            |_, _| {},
        )
        .await?;
        objects::ensure(
            self.client,
            namespace,
            keeper::role(self.names, plan),
            |_, _| {},
        )
        .await?;
        objects::ensure(
            self.client,
            namespace,
            keeper::role_binding(self.names),
            |_, _| {},
        )
        .await?;
        Ok(())
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

    /// Delete what the plan no longer has: the Deployment and Service of a service gone (or
    /// now a cron service), the Job of a migration gone, the CronJob of a cron service gone,
    /// the Ingress and its policy of a service no longer published (or of every service, with
    /// no domain).
    async fn remove_stale(
        &self,
        plan: &EnvPlan,
        progress: &dyn Progress,
    ) -> Result<(), RuntimeError> {
        let namespace = self.names.namespace();
        let client = self.client.clone();
        let kept = |pick: fn(&ServicePlan) -> bool| -> BTreeSet<String> {
            plan.services
                .iter()
                .filter(|s| pick(s))
                .map(|s| s.name.clone())
                .collect()
        };
        let serving = kept(|s| s.kind != Kind::Cron);
        let selector = self.names.selector_of(kind::SERVICE);
        let deployments: Api<Deployment> = Api::namespaced(client.clone(), namespace);
        stale::remove(&deployments, "Deployment", &selector, &serving, progress).await?;
        let services: Api<Service> = Api::namespaced(client.clone(), namespace);
        stale::remove(&services, "Service", &selector, &serving, progress).await?;

        let every = kept(|_| true);
        let config_maps: Api<ConfigMap> = Api::namespaced(client.clone(), namespace);
        let selector = self.names.selector_of(kind::STORE);
        stale::remove(&config_maps, "ConfigMap", &selector, &every, progress).await?;

        let migrating = kept(|s| !s.migrate.is_empty());
        let jobs: Api<Job> = Api::namespaced(client.clone(), namespace);
        let selector = self.names.selector_of(kind::MIGRATION);
        stale::remove(&jobs, "Job", &selector, &migrating, progress).await?;

        let cron_api = match self.cron {
            Some(api) => Some(api),
            None => cron::served(self.client).await?,
        };
        if let Some(api) = cron_api {
            let scheduled = kept(|s| s.kind == Kind::Cron);
            let selector = self.names.selector_of(kind::CRON);
            let api = cron::api_in(self.client, namespace, api);
            stale::remove(&api, "CronJob", &selector, &scheduled, progress).await?;
        }

        let published = if self.ingress.domain.is_some() {
            kept(ingress::published)
        } else {
            BTreeSet::new()
        };
        let selector = self.names.selector_of(kind::INGRESS);
        let ingresses: Api<Ingress> = Api::namespaced(client.clone(), namespace);
        stale::remove(&ingresses, "Ingress", &selector, &published, progress).await?;
        let policies: Api<NetworkPolicy> = Api::namespaced(client, namespace);
        stale::remove(&policies, "NetworkPolicy", &selector, &published, progress).await?;
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
    let pod_api: Api<Pod> = Api::namespaced(client.clone(), namespace);
    let selector = format!("{},{SERVICE}={service}", names.selector());
    let stage = format!("{service} to be available");
    let container = selection::container_of(service);
    let outcome = wait::until(&stage, timeout, poll, progress, || async {
        let found = deployments
            .get_opt(name)
            .await
            .map_err(refused(format!("read Deployment {name} in {namespace}")))?;
        // A service's Job and CronJob pods carry its name too; they are not the Deployment's.
        let listed: Vec<Pod> = pod_api
            .list(&ListParams::default().labels(&selector))
            .await
            .map_err(refused(format!("list the pods of {service}")))?
            .items
            .into_iter()
            .filter(|p| !pods::runs_once(p))
            .collect();
        let fresh: Vec<Pod> = listed
            .iter()
            .filter(|p| !not.contains(&p.name_any()))
            .cloned()
            .collect();
        let new_pod_ready = not.is_empty()
            || selection::choose(&fresh, container, selection::Need::Ready).is_some();
        if found.as_ref().is_some_and(available) && new_pod_ready {
            return Ok(Poll::Ready(()));
        }
        pods::refuse_stuck(&pod_api, &fresh, service, namespace).await?;
        Ok(Poll::Pending(pods::pod_states(&listed)))
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

#[cfg(test)]
mod tests {
    use k8s_openapi::api::apps::v1::{DeploymentSpec, DeploymentStatus};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    use super::*;

    fn deployment(replicas: i32, generation: i64, status: DeploymentStatus) -> Deployment {
        Deployment {
            metadata: ObjectMeta {
                generation: Some(generation),
                ..ObjectMeta::default()
            },
            spec: DeploymentSpec {
                replicas: Some(replicas),
                ..DeploymentSpec::default()
            },
            status: Some(status),
        }
    }

    fn status(generation: i64, total: i32, updated: i32, ready: i32) -> DeploymentStatus {
        DeploymentStatus {
            observed_generation: Some(generation),
            replicas: Some(total),
            updated_replicas: Some(updated),
            available_replicas: Some(ready),
            ..DeploymentStatus::default()
        }
    }

    #[test]
    fn a_deployment_is_available_only_when_every_replica_is() {
        assert!(available(&deployment(3, 2, status(2, 3, 3, 3))));
        assert!(
            !available(&deployment(3, 2, status(2, 3, 3, 1))),
            "one of three"
        );
        assert!(
            !available(&deployment(3, 2, status(2, 4, 3, 3))),
            "an old pod left"
        );
        assert!(
            !available(&deployment(3, 2, status(1, 3, 3, 3))),
            "not observed yet"
        );
        assert!(available(&deployment(1, 1, status(1, 1, 1, 1))));
    }
}
