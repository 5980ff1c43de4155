//! The local runtime: an environment is a set of Docker objects on this machine.
//!
//! Layout: an internal network for the services (no route out, no host address), an edge
//! network for the sidecar only, a publish network for the forwarders that put web services on
//! 127.0.0.1. Every object carries the ownership labels, set in the call that creates it; an
//! object with our name and without them is refused (AF-RUN-045) before anything is touched.
//!
//! Knobs (environment variables, read by [`LocalOptions::from_env`]):
//! `AF_PROXY_IMAGE`, `AF_PROXY_BINARY`, `AF_UPSTREAM_RESOLVER`, `AF_ADDRESS_POOL`,
//! `AF_SIDECAR_NETWORKS`.

pub mod containers;
pub mod hardening;
pub mod host;
pub mod labels;
mod listing;
pub mod networks;
pub mod preflight;
pub mod readiness;
pub mod services;
pub mod sidecar;
pub mod teardown;

use std::collections::{BTreeSet, HashMap};
use std::net::{Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::time::SystemTime;

use af_sidecar_api::config::Admin;
use bollard::Docker;
use bollard::query_parameters::{LogsOptionsBuilder, RestartContainerOptionsBuilder};
use futures_util::StreamExt;
use futures_util::future::BoxFuture;
use ipnet::{IpNet, Ipv4Net};

use self::labels::{Names, kind};
use self::sidecar::SidecarSettings;
use crate::env_id::EnvId;
use crate::plan::{EnvPlan, Kind, short_digest};
use crate::runtime::images::{self, SidecarSource};
use crate::runtime::service_env::Provisions;
use crate::runtime::sidecar_doc::{self, InsideNames, Placement, Secrets};
use crate::runtime::{
    Action, AdminEndpoint, Capabilities, DownReport, EnvStatus, EnvSummary, ExecIo, JournalPlace,
    JournalStorage, LineStream, LogLine, OwnedObject, Phase, Progress, Quiet, Runtime,
    RuntimeError, ServiceStatus, ServiceUp, UpReport, docker_client,
};
use crate::trust::{self, TrustFiles};
use crate::webhook::WebhookSecrets;

/// How the local runtime is set up.
#[derive(Debug, Clone)]
pub struct LocalOptions {
    /// Where the sidecar image comes from.
    pub sidecar_source: SidecarSource,
    /// The pool the internal and edge subnets come from.
    pub address_pool: Ipv4Net,
    /// The sidecar's resolver and extra networks.
    pub sidecar: SidecarSettings,
}

impl Default for LocalOptions {
    fn default() -> Self {
        Self {
            sidecar_source: SidecarSource::Lookup,
            address_pool: networks::DEFAULT_POOL
                .parse()
                .unwrap_or_else(|_| Ipv4Net::default()),
            sidecar: SidecarSettings {
                upstream_resolver: sidecar::DOCKER_RESOLVER.to_string(),
                trusted_networks: Vec::new(),
                extra_networks: Vec::new(),
            },
        }
    }
}

impl LocalOptions {
    /// The defaults, changed by `AF_PROXY_IMAGE` (a prebuilt sidecar image), `AF_PROXY_BINARY`
    /// (the static af-proxy to build it from), `AF_UPSTREAM_RESOLVER` (the sidecar's resolver
    /// for outside names, default Docker's `127.0.0.11:53`), `AF_ADDRESS_POOL` (default
    /// `10.213.0.0/16`) and `AF_SIDECAR_NETWORKS` (extra networks for the sidecar, comma
    /// separated; tests use it for their simulated internet).
    pub fn from_env() -> Result<Self, RuntimeError> {
        let mut o = Self::default();
        let var = |k: &str| std::env::var(k).ok().filter(|v| !v.trim().is_empty());
        if let Some(image) = var("AF_PROXY_IMAGE") {
            o.sidecar_source = SidecarSource::Image(image);
        } else if let Some(binary) = var("AF_PROXY_BINARY") {
            o.sidecar_source = SidecarSource::Binary(PathBuf::from(binary));
        }
        if let Some(resolver) = var("AF_UPSTREAM_RESOLVER") {
            o.sidecar.upstream_resolver = resolver;
        }
        if let Some(pool) = var("AF_ADDRESS_POOL") {
            o.address_pool = pool.parse().map_err(|_| {
                RuntimeError::Unsupported(format!(
                    "AF_ADDRESS_POOL {pool:?} is not an IPv4 network such as 10.213.0.0/16."
                ))
            })?;
        }
        if let Some(nets) = var("AF_SIDECAR_NETWORKS") {
            o.sidecar.extra_networks = nets
                .split(',')
                .map(|n| n.trim().to_owned())
                .filter(|n| !n.is_empty())
                .collect();
        }
        Ok(o)
    }
}

/// Where the sidecar sits: the internal network (its subnet and the sidecar's address on it)
/// and the edge network (the sidecar's address on it).
struct SidecarPlace<'a> {
    internal: &'a str,
    inside: Ipv4Net,
    inside_addr: Ipv4Addr,
    edge: &'a str,
    edge_addr: Ipv4Addr,
}

/// Seconds a service has to stop on `af restart` before it is killed.
const RESTART_STOP_SECS: i32 = 10;

/// The local (Docker) runtime.
pub struct LocalRuntime {
    docker: Docker,
    options: LocalOptions,
}

impl LocalRuntime {
    /// Connect to the local Docker daemon.
    pub async fn connect(options: LocalOptions) -> Result<Self, RuntimeError> {
        Ok(Self {
            docker: docker_client::connect().await?,
            options,
        })
    }

    /// The Docker client (tests and `af doctor`).
    pub fn docker(&self) -> &Docker {
        &self.docker
    }

    /// Whether the daemon still answers (within 5 s): a failed step with a silent daemon was
    /// the daemon going away, whatever error the step saw.
    async fn answers(&self) -> bool {
        let ping = tokio::time::timeout(std::time::Duration::from_secs(5), self.docker.ping());
        matches!(ping.await, Ok(Ok(_)))
    }

    /// The options in force.
    pub fn options(&self) -> &LocalOptions {
        &self.options
    }

    async fn up_impl(
        &self,
        plan: &EnvPlan,
        progress: &dyn Progress,
    ) -> Result<UpReport, RuntimeError> {
        let docker = &self.docker;
        let names = Names::new(&plan.env);
        // What cannot run here and ownership first: refuse before anything is made or changed.
        preflight::check(plan, preflight::host_cpus(docker, plan).await?)?;
        // Every prebuilt image held or pulled before anything is made, so one that cannot be
        // is refused with nothing to take down.
        for service in plan.services.iter().filter(|s| s.image.is_some()) {
            images::service_image(docker, service, progress).await?;
        }
        self.refuse_foreign(&names).await?;
        let system_roots = trust::bundle::system_roots()?;

        let image =
            images::ensure_sidecar_image(docker, &self.options.sidecar_source, progress).await?;
        progress.begin("networks")?;
        let mut used = networks::used_subnets(docker).await?;
        let pool = Some(self.options.address_pool);
        let internal = networks::ensure(
            docker,
            &names,
            &names.internal(),
            kind::INTERNAL,
            true,
            pool,
            &mut used,
        )
        .await?;
        let edge = networks::ensure(
            docker,
            &names,
            &names.edge(),
            kind::EDGE,
            false,
            pool,
            &mut used,
        )
        .await?;
        let needs_publish = plan
            .services
            .iter()
            .any(|s| s.kind == Kind::Web && s.port.is_some());
        let publish = if needs_publish {
            Some(
                networks::ensure(
                    docker,
                    &names,
                    &names.publish(),
                    kind::PUBLISH,
                    false,
                    None,
                    &mut used,
                )
                .await?,
            )
        } else {
            None
        };
        let (Some(inside), Some(inside_addr), Some(edge_addr)) = (
            internal.subnet,
            internal.sidecar_addr(),
            edge.sidecar_addr(),
        ) else {
            return Err(RuntimeError::engine(
                "use the environment's networks",
                "they exist without a fixed subnet; run `af down` and `af up` again",
            ));
        };

        // The sidecar, keeping the token and CA of the one it replaces.
        let place = SidecarPlace {
            internal: &internal.name,
            inside,
            inside_addr,
            edge: &edge.name,
            edge_addr,
        };
        let secrets = self
            .ensure_sidecar(plan, &names, &image, &place, progress)
            .await?;
        let trust = TrustFiles::new(&system_roots, &secrets.ca);
        let webhooks = WebhookSecrets::derive(&secrets.token);
        let provisions = Provisions {
            trust: &trust,
            webhooks: &webhooks,
        };

        // The services, in order, each ready before the next.
        let mut report = UpReport {
            env: plan.env.clone(),
            services: Vec::new(),
            admin: None,
        };
        for service in &plan.services {
            let image_id = images::service_image(docker, service, progress).await?;
            let digest = short_digest(
                format!(
                    "{}|{image_id}|{inside_addr}|{}|{}|{}",
                    service.config_digest(),
                    hardening::REVISION,
                    provisions.digest(),
                    plan.services
                        .iter()
                        .map(|s| s.name.as_str())
                        .collect::<Vec<_>>()
                        .join(",")
                )
                .as_bytes(),
            );
            let name = names.service(&service.name);
            let existing = containers::find(docker, &names, &name).await?;
            let action = match &existing {
                Some(found) if found.config() == Some(digest.as_str()) && found.running() => {
                    Action::Reused
                }
                Some(_) => Action::Replaced,
                None => Action::Created,
            };
            let spec = services::Spec {
                plan,
                service,
                image: &image_id,
                internal: &internal.name,
                sidecar: inside_addr,
                provisions,
                digest: &digest,
            };
            if action != Action::Reused {
                if existing.is_some() {
                    containers::remove(docker, &name).await?;
                }
                if !service.migrate.is_empty() {
                    progress.begin(&format!("migrating {}", service.name))?;
                    services::migrate(docker, &spec).await?;
                }
                progress.begin(&format!("starting {}", service.name))?;
                progress.phase(&service.name, Phase::Starting);
                services::create(docker, &spec).await?;
            }
            let found = containers::find(docker, &names, &name)
                .await?
                .ok_or_else(|| RuntimeError::Exited {
                    service: service.name.clone(),
                    status: -1,
                    tail: Vec::new(),
                })?;
            let addr = found.addr_on(&internal.name).unwrap_or_default();
            readiness::wait(docker, &names, service, &addr, progress).await?;

            let mut url = None;
            if let (Kind::Web, Some(port), Some(publish)) =
                (service.kind, service.port, publish.as_ref())
            {
                url = Some(
                    self.ensure_forwarder(
                        &names,
                        &image,
                        service,
                        port,
                        &addr,
                        &internal.name,
                        &publish.name,
                    )
                    .await?,
                );
            }
            let up = ServiceUp {
                name: service.name.clone(),
                kind: service.kind,
                ready: true,
                url,
                action,
            };
            progress.service(&up);
            report.services.push(up);
        }

        // Services no longer in the manifest go.
        let wanted: BTreeSet<&str> = plan.services.iter().map(|s| s.name.as_str()).collect();
        for c in containers::owned(docker, &names).await? {
            let stale = matches!(
                c.kind.as_str(),
                kind::SERVICE | kind::FORWARDER | kind::MIGRATE
            ) && !wanted.contains(c.service.as_str());
            if stale {
                progress.begin(&format!("removing {}", c.name))?;
                progress.phase(&c.name, Phase::Removing);
                containers::remove(docker, &c.name).await?;
            }
        }
        report.admin = sidecar::admin(docker, &names)
            .await
            .ok()
            .map(|a| format!("http://{}", a.addr));
        Ok(report)
    }

    /// Reuse the sidecar if its configuration is unchanged, else (re)create it. The token and
    /// the CA are read back from the existing sidecar and kept (the CA while it has two days
    /// left), so an unchanged environment keeps its sidecar and its services.
    async fn ensure_sidecar(
        &self,
        plan: &EnvPlan,
        names: &Names,
        image: &str,
        place: &SidecarPlace<'_>,
        progress: &dyn Progress,
    ) -> Result<Secrets, RuntimeError> {
        let docker = &self.docker;
        let settings = &self.options.sidecar;
        let existing = containers::find(docker, names, &names.sidecar()).await?;
        let previous = match &existing {
            Some(_) => sidecar::read_config(docker, &names.sidecar()).await?,
            None => None,
        };
        let secrets = Secrets::keep_or_make(previous.as_ref(), &plan.env, SystemTime::now())?;
        let placement = Placement {
            inside: vec![IpNet::V4(place.inside)],
            names: InsideNames::Resolved,
            inside_addr: place.inside_addr,
            admin: SocketAddr::from((place.edge_addr, Admin::DEFAULT_PORT)),
            inside_resolver: sidecar::DOCKER_RESOLVER,
            upstream_resolver: &settings.upstream_resolver,
            trusted_networks: &settings.trusted_networks,
        };
        let doc = sidecar_doc::document(plan, &placement, &secrets);
        let digest = sidecar::digest(&doc, image, &settings.extra_networks);
        match existing {
            Some(found) if found.config() == Some(digest.as_str()) => {
                if !found.running() {
                    progress.begin("starting sidecar")?;
                    docker
                        .start_container(&names.sidecar(), None)
                        .await
                        .map_err(|e| RuntimeError::engine("start the sidecar", e))?;
                }
            }
            other => {
                if other.is_some() {
                    progress.begin("replacing sidecar")?;
                    // Stopped first, so it drains and its journal (kept in the volume) is whole.
                    containers::stop(docker, &names.sidecar(), sidecar_doc::STOP_TIMEOUT_SECS)
                        .await?;
                    containers::remove(docker, &names.sidecar()).await?;
                } else {
                    progress.begin("starting sidecar")?;
                }
                sidecar::create(
                    docker,
                    names,
                    sidecar::Create {
                        image,
                        internal: (place.internal, place.inside_addr),
                        edge: (place.edge, place.edge_addr),
                        extra_networks: &settings.extra_networks,
                        doc: &doc,
                        digest: &digest,
                        origin: &crate::runtime::labels::origin(plan),
                    },
                )
                .await?;
            }
        }
        self.wait_sidecar(names, progress).await?;
        Ok(secrets)
    }

    #[allow(clippy::too_many_arguments)]
    async fn ensure_forwarder(
        &self,
        names: &Names,
        image: &str,
        service: &crate::plan::ServicePlan,
        port: u16,
        target: &str,
        internal: &str,
        publish: &str,
    ) -> Result<String, RuntimeError> {
        let docker = &self.docker;
        let name = names.forwarder(&service.name);
        let digest = short_digest(
            format!(
                "{image}|{target}|{port}|{internal}|{publish}|{}",
                hardening::REVISION
            )
            .as_bytes(),
        );
        let existing = containers::find(docker, names, &name).await?;
        let reuse = existing
            .as_ref()
            .is_some_and(|f| f.config() == Some(digest.as_str()) && f.running());
        if !reuse {
            containers::remove(docker, &name).await?;
            services::forwarder(
                docker,
                names,
                &services::Forwarder {
                    image,
                    service: &service.name,
                    port,
                    target,
                    internal,
                    publish,
                    digest: &digest,
                },
            )
            .await?;
        }
        let found = containers::find(docker, names, &name)
            .await?
            .ok_or_else(|| RuntimeError::engine(format!("start {name}"), "it vanished"))?;
        let host_port = found.host_port(port).ok_or_else(|| {
            RuntimeError::engine(
                format!("publish {}", service.name),
                "no host port was assigned",
            )
        })?;
        let path = service.health_path.as_deref().unwrap_or("/");
        Ok(format!(
            "http://127.0.0.1:{host_port}{}",
            if path.starts_with('/') { "/" } else { "" }
        ))
    }

    /// Wait until the sidecar's admin API answers `/healthz`.
    async fn wait_sidecar(
        &self,
        names: &Names,
        progress: &dyn Progress,
    ) -> Result<(), RuntimeError> {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        let mut waits = readiness::Waits::default();
        loop {
            progress.check("while the sidecar was getting ready")?;
            let last = match sidecar::admin(&self.docker, names).await {
                Ok(admin) => match crate::admin::healthz(admin.addr).await {
                    Ok(()) => return Ok(()),
                    Err(e) => e.to_string(),
                },
                Err(e) => e.to_string(),
            };
            if let Some(found) = containers::find(&self.docker, names, &names.sidecar()).await?
                && let Some(status) = found.exit_code()
            {
                return Err(RuntimeError::Exited {
                    service: "sidecar".to_owned(),
                    status,
                    tail: containers::tail(&self.docker, &names.sidecar(), 20).await,
                });
            }
            if std::time::Instant::now() >= deadline {
                return Err(RuntimeError::NotReady {
                    service: format!("the sidecar ({last})"),
                    seconds: 30,
                    tail: containers::tail(&self.docker, &names.sidecar(), 20).await,
                });
            }
            waits.sleep().await;
        }
    }

    /// Refuse (AF-RUN-045) if anything with one of the environment's names is not ours.
    async fn refuse_foreign(&self, names: &Names) -> Result<(), RuntimeError> {
        if let Some(name) = networks::foreign(&self.docker, names)
            .await?
            .into_iter()
            .next()
        {
            return Err(RuntimeError::NotOurs {
                class: "network",
                name,
            });
        }
        if let Some(name) = containers::foreign(&self.docker, names)
            .await?
            .into_iter()
            .next()
        {
            return Err(RuntimeError::NotOurs {
                class: "container",
                name,
            });
        }
        if let Some(name) = sidecar::foreign_volume(&self.docker, names).await {
            return Err(RuntimeError::NotOurs {
                class: "volume",
                name,
            });
        }
        Ok(())
    }

    async fn status_impl(&self, env: &EnvId) -> Result<EnvStatus, RuntimeError> {
        let names = Names::new(env);
        let listed = containers::owned(&self.docker, &names).await?;
        let nets = networks::owned(&self.docker, &names).await?;
        let mut status = EnvStatus {
            env: env.clone(),
            exists: !listed.is_empty() || !nets.is_empty(),
            sidecar: None,
            services: Vec::new(),
            journal: None,
            watched: None,
            on_loss: None,
            containment: None,
        };
        let mut urls: HashMap<String, String> = HashMap::new();
        for c in listed.iter().filter(|c| c.kind == kind::FORWARDER) {
            if let Some(found) = containers::find(&self.docker, &names, &c.name).await?
                && let Some(cfg) = found.inspect.config.as_ref()
                && let Some(port) = cfg
                    .exposed_ports
                    .as_ref()
                    .and_then(|p| p.first())
                    .and_then(|p| p.split('/').next())
                    .and_then(|p| p.parse::<u16>().ok())
                && let Some(host_port) = found.host_port(port)
            {
                urls.insert(c.service.clone(), format!("http://127.0.0.1:{host_port}/"));
            }
        }
        for c in &listed {
            if c.kind != kind::SERVICE && c.kind != kind::SIDECAR {
                continue;
            }
            let Some(found) = containers::find(&self.docker, &names, &c.name).await? else {
                continue;
            };
            let s = ServiceStatus {
                name: c.service.clone(),
                state: found.state(),
                running: found.running(),
                url: urls.get(&c.service).cloned(),
                addresses: found
                    .addr_on(&names.internal())
                    .and_then(|a| a.parse().ok())
                    .into_iter()
                    .collect(),
            };
            if c.kind == kind::SIDECAR {
                status.sidecar = Some(s);
            } else {
                status.services.push(s);
            }
        }
        status.services.sort_by(|a, b| a.name.cmp(&b.name));
        status.journal = teardown::owned_volumes(&self.docker, &names)
            .await?
            .into_iter()
            .find(|v| *v == names.journal())
            .map(|name| JournalPlace {
                storage: JournalStorage::Volume,
                name,
                reason: None,
            });
        Ok(status)
    }

    async fn inventory_impl(&self, env: &EnvId) -> Result<Vec<OwnedObject>, RuntimeError> {
        let names = Names::new(env);
        let mut out = Vec::new();
        for c in containers::owned(&self.docker, &names).await? {
            out.push(OwnedObject {
                class: "container",
                name: c.name,
                kind: c.kind,
                service: c.service,
            });
        }
        for (name, k) in networks::owned(&self.docker, &names).await? {
            out.push(OwnedObject {
                class: "network",
                name,
                kind: k,
                service: String::new(),
            });
        }
        for name in teardown::owned_volumes(&self.docker, &names).await? {
            out.push(OwnedObject {
                class: "volume",
                name,
                kind: kind::JOURNAL.to_owned(),
                service: "sidecar".to_owned(),
            });
        }
        for image in teardown::owned_images(&self.docker, &names).await? {
            let name = image.repo_tags.first().cloned().unwrap_or(image.id.clone());
            let label = |k: &str| image.labels.get(k).cloned().unwrap_or_default();
            out.push(OwnedObject {
                class: "image",
                name,
                kind: label(crate::runtime::labels::KIND),
                service: label(crate::runtime::labels::SERVICE),
            });
        }
        Ok(out)
    }

    async fn logs_impl<'a>(
        &'a self,
        env: &'a EnvId,
        service: Option<&'a str>,
        follow: bool,
        tail: Option<usize>,
    ) -> Result<LineStream<'a>, RuntimeError> {
        let names = Names::new(env);
        let listed = containers::owned(&self.docker, &names).await?;
        let mut chosen: Vec<(String, String)> = listed
            .into_iter()
            .filter(|c| {
                c.kind == kind::SERVICE || c.kind == kind::SIDECAR || c.kind == kind::MIGRATE
            })
            .filter(|c| service.is_none_or(|s| s == c.service))
            .map(|c| (c.service, c.name))
            .collect();
        if chosen.is_empty() {
            return Err(match service {
                Some(s) => RuntimeError::NoService {
                    env: env.to_string(),
                    service: s.to_owned(),
                },
                None => RuntimeError::NoEnvironment(env.to_string()),
            });
        }
        chosen.sort();
        let tail = tail.map_or_else(|| "all".to_owned(), |n| n.to_string());
        let streams = chosen.into_iter().map(|(service, container)| {
            let options = LogsOptionsBuilder::default()
                .stdout(true)
                .stderr(true)
                .follow(follow)
                .tail(&tail)
                .build();
            self.docker
                .logs(&container, Some(options))
                .flat_map(move |chunk| {
                    let lines: Vec<Result<LogLine, RuntimeError>> = match chunk {
                        Ok(out) => out
                            .to_string()
                            .lines()
                            .map(|l| {
                                Ok(LogLine {
                                    service: service.clone(),
                                    line: l.to_owned(),
                                })
                            })
                            .collect(),
                        Err(e) => vec![Err(RuntimeError::engine("read logs", e))],
                    };
                    futures_util::stream::iter(lines)
                })
                .boxed()
        });
        Ok(futures_util::stream::select_all(streams).boxed())
    }
}

impl Runtime for LocalRuntime {
    fn name(&self) -> &'static str {
        "local"
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities {
            published_urls: true,
            admin_api: true,
            restart_sidecar: true,
        }
    }

    fn containment_notes(&self, plan: &EnvPlan) -> Vec<String> {
        if !plan.egress.allow_ipv6 {
            // IPv6 is off in every service and none holds NET_RAW: nothing of the host's
            // settings is in reach.
            return Vec::new();
        }
        host::Exposure::read()
            .with_ipv6()
            .map(|reach| {
                format!(
                    "egress.allow_ipv6 leaves IPv6 on in the services, so they can reach {reach}; the sidecar does not see that traffic. Remove allow_ipv6, or close those on this host."
                )
            })
            .into_iter()
            .collect()
    }

    fn up<'a>(
        &'a self,
        plan: &'a EnvPlan,
        progress: &'a dyn Progress,
    ) -> BoxFuture<'a, Result<UpReport, RuntimeError>> {
        Box::pin(async move {
            match self.up_impl(plan, progress).await {
                Err(e)
                    if !matches!(e, RuntimeError::Interrupted { .. }) && !self.answers().await =>
                {
                    Err(e.daemon_lost())
                }
                other => other,
            }
        })
    }

    fn status<'a>(&'a self, env: &'a EnvId) -> BoxFuture<'a, Result<EnvStatus, RuntimeError>> {
        Box::pin(self.status_impl(env))
    }

    fn logs<'a>(
        &'a self,
        env: &'a EnvId,
        service: Option<&'a str>,
        follow: bool,
        tail: Option<usize>,
    ) -> BoxFuture<'a, Result<LineStream<'a>, RuntimeError>> {
        Box::pin(self.logs_impl(env, service, follow, tail))
    }

    fn down<'a>(
        &'a self,
        env: &'a EnvId,
        progress: &'a dyn Progress,
    ) -> BoxFuture<'a, Result<DownReport, RuntimeError>> {
        Box::pin(async move {
            let names = Names::new(env);
            self.refuse_foreign(&names).await?;
            teardown::down(&self.docker, &names, progress).await
        })
    }

    fn inventory<'a>(
        &'a self,
        env: &'a EnvId,
    ) -> BoxFuture<'a, Result<Vec<OwnedObject>, RuntimeError>> {
        Box::pin(self.inventory_impl(env))
    }

    fn list(&self) -> BoxFuture<'_, Result<Vec<EnvSummary>, RuntimeError>> {
        Box::pin(listing::environments(&self.docker))
    }

    fn admin<'a>(&'a self, env: &'a EnvId) -> BoxFuture<'a, Result<AdminEndpoint, RuntimeError>> {
        Box::pin(async move { sidecar::admin(&self.docker, &Names::new(env)).await })
    }

    fn exec_attached<'a>(
        &'a self,
        env: &'a EnvId,
        service: &'a str,
        argv: &'a [String],
        io: ExecIo<'a>,
    ) -> BoxFuture<'a, Result<Option<i64>, RuntimeError>> {
        Box::pin(async move {
            let names = Names::new(env);
            let name = names.service(service);
            match containers::find(&self.docker, &names, &name).await? {
                Some(found) if found.running() => {
                    containers::exec(&self.docker, &name, argv, io).await
                }
                _ => Err(RuntimeError::NoService {
                    env: env.to_string(),
                    service: service.to_owned(),
                }),
            }
        })
    }

    fn restart_sidecar<'a>(&'a self, env: &'a EnvId) -> BoxFuture<'a, Result<(), RuntimeError>> {
        Box::pin(async move {
            let names = Names::new(env);
            let options = RestartContainerOptionsBuilder::default()
                .t(sidecar_doc::STOP_TIMEOUT_SECS)
                .build();
            self.docker
                .restart_container(&names.sidecar(), Some(options))
                .await
                .map_err(|e| RuntimeError::engine("restart the sidecar", e))?;
            self.wait_sidecar(&names, &Quiet).await
        })
    }

    fn restart_service<'a>(
        &'a self,
        env: &'a EnvId,
        service: &'a str,
    ) -> BoxFuture<'a, Result<(), RuntimeError>> {
        Box::pin(async move {
            let names = Names::new(env);
            let name = names.service(service);
            let not_running = || RuntimeError::NoService {
                env: env.to_string(),
                service: service.to_owned(),
            };
            if !containers::find(&self.docker, &names, &name)
                .await?
                .is_some_and(|found| found.running())
            {
                return Err(not_running());
            }
            let options = RestartContainerOptionsBuilder::default()
                .t(RESTART_STOP_SECS)
                .build();
            self.docker
                .restart_container(&name, Some(options))
                .await
                .map_err(|e| RuntimeError::engine(format!("restart {service}"), e))?;
            match containers::find(&self.docker, &names, &name).await? {
                Some(found) if found.running() => Ok(()),
                Some(found) => Err(RuntimeError::Exited {
                    service: service.to_owned(),
                    status: found.exit_code().unwrap_or(-1),
                    tail: containers::tail(&self.docker, &name, 20).await,
                }),
                None => Err(not_running()),
            }
        })
    }
}
