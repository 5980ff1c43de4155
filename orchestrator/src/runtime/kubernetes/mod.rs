//! The Kubernetes runtime: an environment is a namespace, proven contained before any service
//! runs.
//!
//! `af up` asks the cluster what it serves ([`discovery`]), makes every image the pods run and
//! delivers it to the nodes, pushed to a registry when they pull from one ([`supply`], through
//! the runtime-neutral image supply), then makes or reuses the
//! namespace ([`namespace`]) and its NetworkPolicies ([`policies`]), then runs the containment
//! probe ([`probe`]): one pod under exactly the services' rules ([`confinement`]) trying every
//! route out. A cluster whose policies do not hold is refused with AF-RUN-043 before any
//! sidecar or service exists. `af down` deletes the namespace, if it is ours, and waits until
//! it is gone ([`teardown`]).
//!
//! What runs in the namespace is reached through the API server, found by its labels
//! ([`inspect`]): the sidecar's admin API, bound to the pod's own loopback, through a
//! port-forward served on 127.0.0.1 and re-aimed at the sidecar's new pod when a forward fails
//! ([`forward`]); `af logs` through the pods' log API; a command in a service through exec.
//!
//! Once the probe passed, [`deploy`] makes the sidecar (its journal on a claim of the default
//! StorageClass, else in its pod) and the services, every service pod behind its gate (an init
//! container that passes only once its own pod is governed). `af status` reads their Deployments and
//! pods ([`status`]); the sidecar is restarted by rolling its Deployment ([`restart`]). When
//! `af up` fails after the namespace is there, a namespace this `af up` made is removed again
//! unless `AF_PRESERVE=1`, and the error says which ([`RuntimeError::FailedUp`]).
//!
//! Knobs (environment variables, read by [`KubeOptions::from_env`]): `AF_KUBE_IMAGES`,
//! `AF_IMAGE_REPOSITORY`, `AF_IMAGE_PULL_CREDENTIALS`,
//! `AF_PROBE_IMAGE`, `AF_PROBE_BINARY`, `AF_PROXY_IMAGE`, `AF_PROXY_BINARY`,
//! `AF_UPSTREAM_RESOLVER`, `AF_TRUSTED_NETWORKS`, `AF_KUBE_RESOLVER`, `AF_KUBE_NAMESPACE_TIMEOUT`,
//! `AF_KUBE_PROBE_TIMEOUT`, `AF_KUBE_DOWN_TIMEOUT`, `AF_KUBE_SIDECAR_TIMEOUT`,
//! `AF_KUBE_SERVICE_TIMEOUT`, `AF_KUBE_GATE_TIMEOUT`, `AF_KUBE_MIGRATION_TIMEOUT`, `AF_KUBE_WATCH_PERIOD`,
//! `AF_KUBE_INGRESS_CLASS`, `AF_KUBE_INGRESS_FROM`, `AF_PRESERVE`, and the probe's targets
//! ([`probe::targets`]). `docs/kubernetes-runtime.md` describes each.

pub mod cluster;
pub mod confinement;
pub mod deploy;
pub mod discovery;
pub mod forward;
pub mod inspect;
mod listing;
pub mod names;
pub mod namespace;
pub mod policies;
pub mod probe;
pub mod pull_secret;
pub mod pulls;
pub mod restart;
pub mod selection;
pub mod status;
pub mod supply;
pub mod teardown;
pub mod wait;

#[cfg(test)]
mod deploy_sequence;
#[cfg(test)]
mod golden;
#[cfg(test)]
mod inspect_sequence;
#[cfg(test)]
mod lifecycle_sequence;
#[cfg(test)]
mod mock;
#[cfg(test)]
mod sequence;

use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::time::Duration;

use af_policy::manifest::OnLoss;
use af_policy::placement::Placement;
use futures_util::future::BoxFuture;
use ipnet::IpNet;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::networking::v1::NetworkPolicy;
use kube::Client;
use kube::api::{Api, ListParams};

use self::cluster::{ClusterId, refused};
use self::names::{Names, kind};
use self::probe::image::ProbeSource;
use self::probe::targets::ProbeTargets;
use self::supply::{PullCredentials, Sources, Supplied, Supply};
use crate::env_id::EnvId;
use crate::plan::EnvPlan;
use crate::runtime::error::NamespaceFate;
use crate::runtime::images::{Delivery, PULL_CREDENTIALS_VAR, REPOSITORY_VAR, SidecarSource};
use crate::runtime::labels::{KIND, SERVICE};
use crate::runtime::{
    Action, AdminEndpoint, Capabilities, DownReport, EnvStatus, EnvSummary, ExecIo, LineStream,
    OwnedObject, PhasesOnly, Progress, Runtime, RuntimeError, UpReport,
};

/// Rounds in a row each pod's gate must hold: the sidecar answered and every route failed.
const GATE_ROUNDS: u32 = 3;

/// How long each stage may take, and how often it is polled.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Timeouts {
    /// A namespace to be ready (`AF_KUBE_NAMESPACE_TIMEOUT`, 60 s): a previous one finished
    /// terminating, the default service account made.
    pub namespace: Duration,
    /// The probe pod to finish, scheduling and image included (`AF_KUBE_PROBE_TIMEOUT`, 120 s).
    pub probe: Duration,
    /// The namespace to be gone after `af down` (`AF_KUBE_DOWN_TIMEOUT`, 120 s).
    pub down: Duration,
    /// The sidecar's Deployment to be available (`AF_KUBE_SIDECAR_TIMEOUT`, 120 s).
    pub sidecar: Duration,
    /// Each service's Deployment to be available, its gate and image included
    /// (`AF_KUBE_SERVICE_TIMEOUT`, 180 s).
    pub service: Duration,
    /// Each pod's gate to pass (`AF_KUBE_GATE_TIMEOUT`, 60 s).
    pub gate: Duration,
    /// Each migration Job to finish, its gate included: its `activeDeadlineSeconds`
    /// (`AF_KUBE_MIGRATION_TIMEOUT`, 600 s).
    pub migration: Duration,
    /// Between two checks of each service pod's containment watcher
    /// (`AF_KUBE_WATCH_PERIOD`, 10 s); a watcher silent for three is no longer proof.
    pub watch: Duration,
    /// Between two polls.
    pub poll: Duration,
}

impl Default for Timeouts {
    fn default() -> Self {
        Self {
            namespace: Duration::from_secs(60),
            probe: Duration::from_secs(120),
            down: Duration::from_secs(120),
            sidecar: Duration::from_secs(120),
            service: Duration::from_secs(180),
            gate: Duration::from_secs(60),
            migration: Duration::from_secs(600),
            watch: Duration::from_secs(10),
            poll: Duration::from_millis(500),
        }
    }
}

/// How the Kubernetes runtime is set up: the placement's fields and the knobs.
#[derive(Debug, Clone)]
pub struct KubeOptions {
    /// The kubeconfig context; `None` means the current one.
    pub context: Option<String>,
    /// What every namespace name starts with.
    pub namespace_prefix: String,
    /// How images reach the nodes, when not by the context's name (`AF_KUBE_IMAGES`).
    pub images: Option<String>,
    /// The repository a registry cluster's images are pushed to (`AF_IMAGE_REPOSITORY`), read
    /// when `af up` needs it.
    pub repository: Option<String>,
    /// The credentials the nodes pull with (`AF_IMAGE_PULL_CREDENTIALS`).
    pub pull_credentials: PullCredentials,
    /// Where the probe image comes from.
    pub probe_source: ProbeSource,
    /// Where the probe aims.
    pub probe: ProbeTargets,
    /// The cluster resolver's addresses, when not discovered (`AF_KUBE_RESOLVER`).
    pub resolver: Option<Vec<IpAddr>>,
    /// Where the sidecar image comes from (`AF_PROXY_IMAGE`, `AF_PROXY_BINARY`).
    pub sidecar_source: SidecarSource,
    /// The sidecar's resolver for outside names (`AF_UPSTREAM_RESOLVER`), else the cluster's.
    pub upstream_resolver: Option<SocketAddr>,
    /// Networks the sidecar's guard may dial although private (`AF_TRUSTED_NETWORKS`; tests).
    pub trusted_networks: Vec<IpNet>,
    /// The stages' timeouts.
    pub timeouts: Timeouts,
    /// Preview URLs: the placement's domain, the Ingress class, the controllers let in.
    pub ingress: deploy::ingress::IngressOptions,
    /// Keep the namespace a failed `af up` made, for inspection (`AF_PRESERVE=1`).
    pub preserve: bool,
    /// Whether each pod gets its own fence (`AF_KUBE_POD_LAYER`, `on`). `off` exists for the
    /// tests that prove the other layer alone: the probe then refuses every environment,
    /// naming the pod layer.
    pub pod_layer: bool,
}

impl KubeOptions {
    /// The options for `placement`, with the knobs from the process environment.
    pub fn from_env(placement: &Placement) -> Result<Self, RuntimeError> {
        Self::from_vars(placement, &|k: &str| {
            std::env::var(k).ok().filter(|v| !v.trim().is_empty())
        })
    }

    /// The options for `placement`, with the knobs read through `var`.
    pub fn from_vars(
        placement: &Placement,
        var: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Self, RuntimeError> {
        let defaults = Timeouts::default();
        let seconds = |name: &str, default: Duration| -> Result<Duration, RuntimeError> {
            let Some(text) = var(name) else {
                return Ok(default);
            };
            text.trim()
                .parse::<u64>()
                .map(Duration::from_secs)
                .or_else(|_| humantime::parse_duration(text.trim()))
                .map_err(|_| {
                    RuntimeError::Unsupported(format!(
                        "{name} {text:?} is not a duration such as 90 or 2m."
                    ))
                })
        };
        let resolver = var("AF_KUBE_RESOLVER")
            .map(|list| {
                list.split(',')
                    .map(str::trim)
                    .filter(|a| !a.is_empty())
                    .map(|a| {
                        a.parse::<IpAddr>().map_err(|_| {
                            RuntimeError::Unsupported(format!(
                                "AF_KUBE_RESOLVER {a:?} is not an IP address."
                            ))
                        })
                    })
                    .collect::<Result<Vec<_>, _>>()
            })
            .transpose()?;
        let upstream_resolver = var("AF_UPSTREAM_RESOLVER")
            .map(|text| {
                text.trim().parse::<SocketAddr>().map_err(|_| {
                    RuntimeError::Unsupported(format!(
                        "AF_UPSTREAM_RESOLVER {text:?} is not an address and port such as 10.96.0.10:53."
                    ))
                })
            })
            .transpose()?;
        let trusted_networks = var("AF_TRUSTED_NETWORKS")
            .map(|list| {
                list.split(',')
                    .map(str::trim)
                    .filter(|n| !n.is_empty())
                    .map(|n| {
                        n.parse::<IpNet>().map_err(|_| {
                            RuntimeError::Unsupported(format!(
                                "AF_TRUSTED_NETWORKS {n:?} is not a network such as 198.51.100.0/24."
                            ))
                        })
                    })
                    .collect::<Result<Vec<_>, _>>()
            })
            .transpose()?
            .unwrap_or_default();
        let sidecar_source = match (var("AF_PROXY_IMAGE"), var("AF_PROXY_BINARY")) {
            (Some(image), _) => SidecarSource::Image(image),
            (None, Some(binary)) => SidecarSource::Binary(PathBuf::from(binary)),
            (None, None) => SidecarSource::Lookup,
        };
        let preserve = match var("AF_PRESERVE").as_deref().map(str::trim) {
            None | Some("0") => false,
            Some("1") => true,
            Some(other) => {
                return Err(RuntimeError::Unsupported(format!(
                    "AF_PRESERVE {other:?} is neither 1 (keep a failed environment's namespace) nor 0."
                )));
            }
        };
        let pod_layer = match var("AF_KUBE_POD_LAYER").as_deref().map(str::trim) {
            None | Some("on") => true,
            Some("off") => false,
            Some(other) => {
                return Err(RuntimeError::Unsupported(format!(
                    "AF_KUBE_POD_LAYER {other:?} is neither on (each pod writes its own fence) nor off (tests only: af up then refuses)."
                )));
            }
        };
        Ok(Self {
            preserve,
            pod_layer,
            sidecar_source,
            upstream_resolver,
            trusted_networks,
            context: placement.kubeconfig_context.clone(),
            namespace_prefix: placement
                .namespace_prefix
                .clone()
                .unwrap_or_else(|| names::DEFAULT_PREFIX.to_owned()),
            images: var("AF_KUBE_IMAGES"),
            repository: var(REPOSITORY_VAR),
            pull_credentials: PullCredentials::from_var(var(PULL_CREDENTIALS_VAR).as_deref()),
            probe_source: match var("AF_PROBE_IMAGE") {
                Some(image) => ProbeSource::Image(image),
                None => ProbeSource::Binary(var("AF_PROBE_BINARY").map(PathBuf::from)),
            },
            probe: ProbeTargets::from_vars(var)?,
            ingress: deploy::ingress::IngressOptions::from_vars(placement.domain.clone(), var)?,
            resolver,
            timeouts: Timeouts {
                namespace: seconds("AF_KUBE_NAMESPACE_TIMEOUT", defaults.namespace)?,
                probe: seconds("AF_KUBE_PROBE_TIMEOUT", defaults.probe)?,
                down: seconds("AF_KUBE_DOWN_TIMEOUT", defaults.down)?,
                sidecar: seconds("AF_KUBE_SIDECAR_TIMEOUT", defaults.sidecar)?,
                service: seconds("AF_KUBE_SERVICE_TIMEOUT", defaults.service)?,
                gate: seconds("AF_KUBE_GATE_TIMEOUT", defaults.gate)?,
                migration: seconds("AF_KUBE_MIGRATION_TIMEOUT", defaults.migration)?,
                watch: seconds("AF_KUBE_WATCH_PERIOD", defaults.watch)?,
                poll: defaults.poll,
            },
        })
    }
}

/// The Kubernetes runtime.
pub struct KubernetesRuntime {
    client: Client,
    cluster: ClusterId,
    images: Box<dyn Supply>,
    options: KubeOptions,
}

impl KubernetesRuntime {
    /// Connect to the cluster of the options' context.
    pub async fn connect(options: KubeOptions) -> Result<Self, RuntimeError> {
        let (client, cluster) = cluster::connect(options.context.as_deref()).await?;
        Self::new(client, cluster, options)
    }

    /// The runtime over an existing client (tests use a mock API server).
    pub fn new(
        client: Client,
        cluster: ClusterId,
        options: KubeOptions,
    ) -> Result<Self, RuntimeError> {
        let images = Box::new(Sources {
            delivery: Delivery::choose(&cluster.context, options.images.as_deref())?,
            repository: options.repository.clone(),
            pull_credentials: options.pull_credentials.clone(),
            sidecar: options.sidecar_source.clone(),
            probe: options.probe_source.clone(),
        });
        Ok(Self {
            client,
            cluster,
            images,
            options,
        })
    }

    /// The cluster in use.
    pub fn cluster(&self) -> &ClusterId {
        &self.cluster
    }

    /// The names of `env`'s objects.
    pub fn names(&self, env: &EnvId) -> Names {
        Names::new(&self.options.namespace_prefix, env)
    }

    async fn up_impl(
        &self,
        plan: &EnvPlan,
        progress: &dyn Progress,
    ) -> Result<UpReport, RuntimeError> {
        let client = &self.client;
        let names = self.names(&plan.env);
        // What can be refused before anything is made is refused here.
        if let Some(why) = deploy::unsupported(plan, &names, &self.options.ingress) {
            return Err(RuntimeError::Unsupported(why));
        }
        discovery::require_network_policy(client).await?;
        let cron = deploy::cron::preflight(client, plan).await?;
        // Every image is made and delivered before anything exists on the cluster.
        let images = self.images.supply(plan, &names, progress).await?;

        let origin = crate::runtime::labels::origin(plan);
        let action =
            namespace::ensure(client, &names, &origin, &self.options.timeouts, progress).await?;
        progress.step(&format!(
            "namespace {} {}",
            names.namespace(),
            said(&action)
        ));
        match self
            .in_namespace(plan, &names, &images, cron, progress)
            .await
        {
            Ok(report) => Ok(report),
            // Ctrl-C leaves everything in place, as its message says; `af down` removes it.
            Err(e @ RuntimeError::Interrupted { .. }) => Err(e),
            Err(cause) => Err(self.after_failure(&names, &action, cause, progress).await),
        }
    }

    /// What becomes of the namespace after `af up` failed in it: one this `af up` made is
    /// removed unless `AF_PRESERVE=1`; one that was there before stays as it is.
    async fn after_failure(
        &self,
        names: &Names,
        action: &Action,
        cause: RuntimeError,
        progress: &dyn Progress,
    ) -> RuntimeError {
        let namespace = names.namespace().to_owned();
        let fate = if *action != Action::Created {
            NamespaceFate::Existed
        } else if self.options.preserve {
            NamespaceFate::Preserved
        } else {
            progress.step(&format!(
                "removing namespace {namespace} (AF_PRESERVE=1 keeps it)"
            ));
            let progress = PhasesOnly(progress);
            match teardown::down(&self.client, names, &self.options.timeouts, &progress).await {
                Ok(report) if report.failed.is_empty() => NamespaceFate::Removed,
                Ok(report) => NamespaceFate::NotRemoved(
                    report
                        .failed
                        .iter()
                        .map(|(n, why)| format!("{n}: {why}"))
                        .collect::<Vec<_>>()
                        .join("; "),
                ),
                Err(e) => NamespaceFate::NotRemoved(e.report().statement),
            }
        };
        RuntimeError::FailedUp {
            cause: Box::new(cause),
            namespace,
            fate,
        }
    }

    /// Everything `af up` does once the namespace is there.
    async fn in_namespace(
        &self,
        plan: &EnvPlan,
        names: &Names,
        images: &Supplied,
        cron: Option<deploy::cron::CronApi>,
        progress: &dyn Progress,
    ) -> Result<UpReport, RuntimeError> {
        let client = &self.client;
        let resolver =
            discovery::cluster_resolver(client, self.options.resolver.as_deref()).await?;
        if resolver == policies::ClusterResolver::Unknown {
            progress.step("no cluster resolver found (kube-system/kube-dns, AF_KUBE_RESOLVER): the sidecar's policy reaches none");
        }
        let served = discovery::address_families(client).await?;
        let families = policies::Families {
            v4: served.v4,
            v6: served.v6 && plan.egress.allow_ipv6,
        };
        if served.v6 && !families.v6 {
            progress.step("the cluster serves IPv6; the sidecar's policy reaches none (egress.allow_ipv6 is off)");
        }
        // The keeper in the sidecar's pod stops the services on a loss (`on_loss: stop`): the
        // sidecar's policy lets it reach the API server, at its Service and its own addresses.
        let keeper_api = match plan.on_loss {
            OnLoss::Stop => {
                let service = discovery::api_server(client).await?;
                let Some(dialled) = service.first().copied() else {
                    return Err(RuntimeError::Unsupported(
                        "containment.on_loss is stop, and the API server's address could not be read (default/kubernetes), so nothing could stop the services on a loss. Let this user read it, or set containment.on_loss: keep.".to_owned(),
                    ));
                };
                let mut reached = service;
                reached.extend(discovery::api_server_endpoints(client).await?);
                Some((dialled, reached))
            }
            OnLoss::Keep => None,
        };
        let api_server = keeper_api
            .as_ref()
            .map_or(&[][..], |(_, all)| all.as_slice());
        let wanted = policies::render(names, &resolver, families, api_server);
        let done = policies::apply(client, names, &wanted, progress).await?;
        progress.step(&format!("network policies: {}", summary(&done)));

        if let Some(secret) = &images.pull_secret {
            let action =
                pull_secret::ensure(client, names, secret, &self.options.timeouts, progress)
                    .await?;
            progress.step(&format!(
                "image pull secret {} {}",
                names::PULL_SECRET,
                said(&action)
            ));
        }
        probe::run(
            client,
            names,
            &self.options.probe,
            &probe::ProbeImage {
                reference: images.probe.clone(),
                pull_policy: images.pull_policy,
            },
            self.options.pod_layer,
            &self.options.timeouts,
            progress,
        )
        .await?;

        let upstream_resolver = match self.options.upstream_resolver {
            Some(addr) => addr,
            None => discovery::resolver_service(client).await?.ok_or_else(|| {
                RuntimeError::Unsupported(
                    "This cluster has no resolver the sidecar can use for outside names (no kube-system/kube-dns); set AF_UPSTREAM_RESOLVER to one.".to_owned(),
                )
            })?,
        };
        let gate = deploy::services::Gate {
            image: images.probe.clone(),
            pull_policy: images.pull_policy.to_owned(),
            escapes: probe::gate_escapes(client, &self.options.probe).await?,
            rounds: GATE_ROUNDS,
            deadline_secs: self.options.timeouts.gate.as_secs(),
        };
        let keeper = keeper_api.map(|(api_server, _)| deploy::keeper::Keeper {
            image: images.probe.clone(),
            pull_policy: images.pull_policy.to_owned(),
            api_server,
            period_secs: u32::try_from(self.options.timeouts.watch.as_secs())
                .unwrap_or(u32::MAX)
                .max(1),
        });
        let deployer = deploy::Deployer {
            client,
            names,
            keeper,
            images,
            upstream_resolver,
            trusted_networks: &self.options.trusted_networks,
            gate,
            pod_layer: self.options.pod_layer,
            timeouts: &self.options.timeouts,
            cron,
            ingress: &self.options.ingress,
        };
        deployer.deploy(plan, progress).await
    }

    async fn inventory_impl(&self, env: &EnvId) -> Result<Vec<OwnedObject>, RuntimeError> {
        let names = self.names(env);
        let Some(_) = namespace::ours(&self.client, &names).await? else {
            return Ok(Vec::new());
        };
        let ns = names.namespace();
        let mut out = vec![OwnedObject {
            class: "namespace",
            name: ns.to_owned(),
            kind: kind::NAMESPACE.to_owned(),
            service: String::new(),
        }];
        let lp = ListParams::default().labels(&names.selector());
        let policies: Api<NetworkPolicy> = Api::namespaced(self.client.clone(), ns);
        let pods: Api<Pod> = Api::namespaced(self.client.clone(), ns);
        let owned = |class: &'static str, meta: kube::api::ObjectMeta| {
            let label = |k: &str| {
                meta.labels
                    .as_ref()
                    .and_then(|l| l.get(k).cloned())
                    .unwrap_or_default()
            };
            OwnedObject {
                class,
                kind: label(KIND),
                service: label(SERVICE),
                name: meta.name.clone().unwrap_or_default(),
            }
        };
        for p in policies
            .list(&lp)
            .await
            .map_err(refused(format!("list the network policies of {ns}")))?
        {
            out.push(owned("networkpolicy", p.metadata));
        }
        for p in pods
            .list(&lp)
            .await
            .map_err(refused(format!("list the pods of {ns}")))?
        {
            out.push(owned("pod", p.metadata));
        }
        Ok(out)
    }
}

fn said(action: &Action) -> &'static str {
    match action {
        Action::Created => "created",
        Action::Reused => "reused",
        Action::Replaced => "replaced",
    }
}

/// `5 created` or `3 reused, 2 replaced`.
fn summary(done: &[(String, Action)]) -> String {
    [Action::Created, Action::Reused, Action::Replaced]
        .iter()
        .filter_map(|a| {
            let n = done.iter().filter(|(_, d)| d == a).count();
            (n > 0).then(|| format!("{n} {}", said(a)))
        })
        .collect::<Vec<_>>()
        .join(", ")
}

impl Runtime for KubernetesRuntime {
    fn name(&self) -> &'static str {
        "kubernetes"
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities {
            published_urls: false,
            admin_api: true,
            restart_sidecar: true,
        }
    }

    fn location(&self) -> Option<String> {
        Some(self.cluster.to_string())
    }

    fn up<'a>(
        &'a self,
        plan: &'a EnvPlan,
        progress: &'a dyn Progress,
    ) -> BoxFuture<'a, Result<UpReport, RuntimeError>> {
        Box::pin(self.up_impl(plan, progress))
    }

    fn status<'a>(&'a self, env: &'a EnvId) -> BoxFuture<'a, Result<EnvStatus, RuntimeError>> {
        Box::pin(async move { status::status(&self.client, &self.names(env)).await })
    }

    fn logs<'a>(
        &'a self,
        env: &'a EnvId,
        service: Option<&'a str>,
        follow: bool,
        tail: Option<usize>,
    ) -> BoxFuture<'a, Result<LineStream<'a>, RuntimeError>> {
        Box::pin(async move {
            inspect::logs(&self.client, &self.names(env), service, follow, tail).await
        })
    }

    fn down<'a>(
        &'a self,
        env: &'a EnvId,
        progress: &'a dyn Progress,
    ) -> BoxFuture<'a, Result<DownReport, RuntimeError>> {
        Box::pin(async move {
            teardown::down(
                &self.client,
                &self.names(env),
                &self.options.timeouts,
                progress,
            )
            .await
        })
    }

    fn inventory<'a>(
        &'a self,
        env: &'a EnvId,
    ) -> BoxFuture<'a, Result<Vec<OwnedObject>, RuntimeError>> {
        Box::pin(self.inventory_impl(env))
    }

    fn list(&self) -> BoxFuture<'_, Result<Vec<EnvSummary>, RuntimeError>> {
        Box::pin(listing::environments(&self.client))
    }

    fn admin<'a>(&'a self, env: &'a EnvId) -> BoxFuture<'a, Result<AdminEndpoint, RuntimeError>> {
        Box::pin(async move { inspect::admin(&self.client, &self.names(env)).await })
    }

    fn exec_attached<'a>(
        &'a self,
        env: &'a EnvId,
        service: &'a str,
        argv: &'a [String],
        io: ExecIo<'a>,
    ) -> BoxFuture<'a, Result<Option<i64>, RuntimeError>> {
        Box::pin(
            async move { inspect::exec(&self.client, &self.names(env), service, argv, io).await },
        )
    }

    fn restart_sidecar<'a>(&'a self, env: &'a EnvId) -> BoxFuture<'a, Result<(), RuntimeError>> {
        Box::pin(async move {
            restart::sidecar(&self.client, &self.names(env), &self.options.timeouts).await
        })
    }

    fn restart_service<'a>(
        &'a self,
        env: &'a EnvId,
        service: &'a str,
    ) -> BoxFuture<'a, Result<(), RuntimeError>> {
        Box::pin(async move {
            restart::service(
                &self.client,
                &self.names(env),
                service,
                &self.options.timeouts,
            )
            .await
        })
    }
}
