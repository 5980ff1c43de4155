//! The one contract every runtime keeps.
//!
//! A runtime makes an environment from an [`EnvPlan`], reports on it, shows its logs, gives a
//! way to the sidecar's admin API, and removes everything it made and nothing else. The local
//! runtime (Docker) is in [`local`], the cluster runtime in [`kubernetes`]; both are held to the
//! same conformance suite (`orchestrator/tests/conformance`). What a runtime cannot do it says
//! in [`Capabilities`]; nothing about containment can be declared away.
//!
//! Beside the two runtimes is what they share, the runtime-neutral core, which neither runtime
//! reaches past: the plan they are given ([`EnvPlan`]), the sidecar's document and secrets
//! ([`sidecar_doc`]), each service's provisions ([`service_env`]), the labels every object
//! carries ([`labels`]), and the image supply ([`images`], on this machine's Docker daemon
//! through [`docker_client`]). A runtime never imports the other.
//!
//! Every command gets its runtime from [`factory::connect`], for the placement
//! [`factory::decide`] judged: the organization policy ([`org_policy`]) first, and
//! `provider: ecs` refused with its report ([`ecs`]).

pub mod docker_client;
pub mod ecs;
pub mod error;
pub mod exec;
pub mod factory;
pub mod images;
pub mod kubernetes;
pub mod local;
pub mod org_policy;
pub mod service_env;
pub mod sidecar_doc;

use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use futures_util::Stream;
use futures_util::future::BoxFuture;
use serde::Serialize;
use tokio::task::AbortHandle;

pub use error::RuntimeError;
pub use exec::{ExecIo, ExecOutput, TermSize};

use crate::env_id::EnvId;
use crate::plan::{EnvPlan, Kind};

/// The labels every object a runtime makes carries, set in the call that creates it.
pub mod labels {
    /// `true` on everything af made.
    pub const MANAGED: &str = "dev.antifailure.managed";
    /// The environment id.
    pub const ENV: &str = "dev.antifailure.env";
    /// The service the object belongs to (`sidecar` for the sidecar).
    pub const SERVICE: &str = "dev.antifailure.service";
    /// What the object is: `network`, `sidecar`, `service`, `forwarder`, `migrate`, `image`.
    pub const KIND: &str = "dev.antifailure.kind";
    /// A digest of what the object was made from; a different digest means replace it.
    pub const CONFIG: &str = "dev.antifailure.config";
    /// Which network rules a pod is under on a cluster: `service` (services, migrations, cron
    /// jobs and the containment probe) or `sidecar`.
    pub const NETWORK: &str = "dev.antifailure.network";
    /// The project's name, on the object that stands for the environment (the local runtime's
    /// sidecar container, a cluster's namespace, as an annotation there).
    pub const PROJECT: &str = "dev.antifailure.project";
    /// The repository `af up` made the environment from, beside [`PROJECT`].
    pub const REPOSITORY: &str = "dev.antifailure.repository";

    use crate::plan::EnvPlan;

    /// Where `plan`'s environment comes from, as [`PROJECT`] and [`REPOSITORY`] record it.
    pub fn origin(plan: &EnvPlan) -> Vec<(String, String)> {
        let mut origin = vec![(PROJECT.to_owned(), plan.project.clone())];
        if let Some(repository) = &plan.repository {
            origin.push((REPOSITORY.to_owned(), repository.clone()));
        }
        origin
    }
}

/// A stream of output lines, ended when the source ends (or never, when following).
pub type LineStream<'a> = Pin<Box<dyn Stream<Item = Result<LogLine, RuntimeError>> + Send + 'a>>;

/// What a runtime can and cannot do. Egress behaviours are not listed: every runtime must
/// contain, and the conformance suite never skips them.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct Capabilities {
    /// Web services get a URL the developer can open.
    pub published_urls: bool,
    /// The sidecar's admin API can be reached from this machine.
    pub admin_api: bool,
    /// The sidecar can be restarted in place (journal durability check).
    pub restart_sidecar: bool,
}

/// Where one service (or one thing a runtime waits on) is, for a display that shows it live.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase<'a> {
    /// Its image is being built; `line` is the build's latest output line.
    Building {
        /// The latest line of build output.
        line: &'a str,
    },
    /// Its container or workload is being made.
    Starting,
    /// Waited for (the subject says what: `web to be ready`), for `elapsed` of at most
    /// `timeout`.
    Waiting {
        /// How long it has been waited on.
        elapsed: Duration,
        /// How long it will be waited on at most.
        timeout: Duration,
    },
    /// It is being removed.
    Removing,
}

/// Where to send what `af up` is doing, one line per event, and whether to go on.
pub trait Progress: Send + Sync {
    /// A step started or finished (`building web`, `starting sidecar`, ...).
    fn step(&self, line: &str);
    /// `subject` (a service, or what a wait is for) is in `phase` now; a live display shows the
    /// latest, plain lines show only the steps.
    fn phase(&self, _subject: &str, _phase: Phase<'_>) {}
    /// A service is up (ready, with its URL).
    fn service(&self, up: &ServiceUp);
    /// Whether the user asked `up` to stop (Ctrl-C). A runtime asks through [`Progress::begin`]
    /// and [`Progress::check`], never in the middle of an engine call, so everything it made is
    /// finished, labelled and found by `down`.
    fn stop_requested(&self) -> bool {
        false
    }

    /// Begin the step `line`, or stop before it ([`RuntimeError::Interrupted`]) if asked to.
    fn begin(&self, line: &str) -> Result<(), RuntimeError> {
        self.check(&format!("before {line}"))?;
        self.step(line);
        Ok(())
    }

    /// Stop here ([`RuntimeError::Interrupted`] naming `at`) if asked to: for waits, which
    /// make nothing and may be long.
    fn check(&self, at: &str) -> Result<(), RuntimeError> {
        if self.stop_requested() {
            return Err(RuntimeError::Interrupted { at: at.to_owned() });
        }
        Ok(())
    }
}

/// Progress that goes nowhere (tests, `-o json`).
pub struct Quiet;

impl Progress for Quiet {
    fn step(&self, _: &str) {}
    fn service(&self, _: &ServiceUp) {}
}

/// Only the phases of the progress it wraps: no steps, no service lines, and never a stop. For
/// removals whose steps plain output has never shown (`af down`, the clean-up after a failed
/// `up`, which must go on after a Ctrl-C), so only a live display shows them.
pub struct PhasesOnly<'a>(pub &'a dyn Progress);

impl Progress for PhasesOnly<'_> {
    fn step(&self, _: &str) {}
    fn phase(&self, subject: &str, phase: Phase<'_>) {
        self.0.phase(subject, phase);
    }
    fn service(&self, _: &ServiceUp) {}
}

/// What `up` did for one service.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Action {
    /// Made for the first time.
    Created,
    /// Already there and unchanged.
    Reused,
    /// Already there but different: removed and made again.
    Replaced,
}

/// One service after `up`.
#[derive(Debug, Clone, Serialize)]
pub struct ServiceUp {
    /// The service name.
    pub name: String,
    /// Its kind.
    pub kind: Kind,
    /// Whether it is ready.
    pub ready: bool,
    /// Where a developer reaches it, for web services.
    pub url: Option<String>,
    /// What `up` did.
    pub action: Action,
}

/// What `up` made.
#[derive(Debug, Clone, Serialize)]
pub struct UpReport {
    /// The environment id.
    pub env: EnvId,
    /// One entry per service, in start order.
    pub services: Vec<ServiceUp>,
    /// The sidecar's admin API on this machine, if the runtime publishes it.
    pub admin: Option<String>,
}

/// The state of one service.
#[derive(Debug, Clone, Serialize)]
pub struct ServiceStatus {
    /// The service name.
    pub name: String,
    /// `running`, `exited (1)`, `created`, ...
    pub state: String,
    /// Whether it is running.
    pub running: bool,
    /// Where a developer reaches it.
    pub url: Option<String>,
    /// Its addresses inside the environment now (a container's on the internal network, each
    /// pod's on a cluster): what the sidecar journals as a request's `client`.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub addresses: Vec<IpAddr>,
}

/// The state of an environment; empty when it does not exist.
#[derive(Debug, Clone, Serialize)]
pub struct EnvStatus {
    /// The environment id.
    pub env: EnvId,
    /// Whether anything of it exists.
    pub exists: bool,
    /// The sidecar's state, if it exists.
    pub sidecar: Option<ServiceStatus>,
    /// The services that exist, by name.
    pub services: Vec<ServiceStatus>,
    /// Where the sidecar's journal is kept, if the runtime made a place for it.
    pub journal: Option<JournalPlace>,
    /// The running service pods that carry a containment watcher; `None`: this runtime runs
    /// none (the local runtime proves containment at `af up` only).
    #[serde(skip)]
    pub watched: Option<Vec<String>>,
    /// What a loss of containment does to the services (`stop`, `keep`), where the runtime
    /// watches containment.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub on_loss: Option<String>,
    /// Containment while it runs, judged from the watchers' reports (`af status` fills it).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub containment: Option<crate::containment::Containment>,
}

/// One environment as `af ls` finds it, by label, among everything a runtime holds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct EnvSummary {
    /// The environment id.
    pub env: EnvId,
    /// The project's name, where `af up` recorded it.
    pub project: Option<String>,
    /// The repository it was made from, where `af up` recorded it.
    pub repository: Option<String>,
    /// When its oldest object was made, in seconds since the Unix epoch.
    pub created: Option<i64>,
    /// Whether its sidecar runs.
    pub sidecar_running: bool,
    /// Its services by name, each once, with whether it runs.
    pub services: Vec<(String, bool)>,
    /// Whether it is being removed (a namespace terminating).
    pub removing: bool,
}

impl EnvSummary {
    /// `env` with nothing found of it yet.
    pub fn empty(env: EnvId) -> Self {
        EnvSummary {
            env,
            project: None,
            repository: None,
            created: None,
            sidecar_running: false,
            services: Vec::new(),
            removing: false,
        }
    }

    /// Record that a container or pod of `service` was seen, running or not (services are
    /// kept by name).
    pub fn saw_service(&mut self, service: String, running: bool) {
        match self
            .services
            .binary_search_by(|(name, _)| name.as_str().cmp(&service))
        {
            Ok(at) => self.services[at].1 |= running,
            Err(at) => self.services.insert(at, (service, running)),
        }
    }

    /// Record an object made at `created` (seconds since the epoch).
    pub fn saw_created(&mut self, created: Option<i64>) {
        self.created = match (self.created, created) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
    }
}

/// What keeps the sidecar's journal.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum JournalStorage {
    /// A volume of the container engine, kept when the sidecar's container is replaced.
    Volume,
    /// A PersistentVolumeClaim, kept when the sidecar's pod is replaced.
    PersistentVolumeClaim,
    /// A directory of the sidecar's pod (an emptyDir): lost when the pod is replaced.
    Pod,
}

/// Where the sidecar's journal is kept, and whether it outlives the sidecar.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct JournalPlace {
    /// What keeps it.
    pub storage: JournalStorage,
    /// The volume's, claim's or pod's name.
    pub name: String,
    /// Why it is kept there, when that is a choice the runtime made (no default StorageClass).
    pub reason: Option<String>,
}

impl JournalPlace {
    /// Whether the journal outlives a restart or replacement of the sidecar.
    pub fn outlives_the_sidecar(&self) -> bool {
        self.storage != JournalStorage::Pod
    }
}

/// One object a runtime made, as found by its labels.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct OwnedObject {
    /// `container`, `network`, `image`, `volume`, `namespace`, ...
    pub class: &'static str,
    /// Its name.
    pub name: String,
    /// The `dev.antifailure.kind` label.
    pub kind: String,
    /// The `dev.antifailure.service` label.
    pub service: String,
}

/// What `down` did.
#[derive(Debug, Clone, Default, Serialize)]
pub struct DownReport {
    /// Objects removed.
    pub removed: Vec<String>,
    /// Objects that could not be removed, with why.
    pub failed: Vec<(String, String)>,
}

/// How to reach an environment's sidecar admin API from this machine: an address on it and
/// the token. On a cluster the address is a port-forward's listener, served while any clone
/// of the endpoint is held.
#[derive(Debug, Clone)]
pub struct AdminEndpoint {
    /// Address of the admin API.
    pub addr: SocketAddr,
    /// The bearer token.
    pub token: String,
    /// Held, never read: what serves `addr`, stopped with the last clone.
    _serving: Option<Arc<Serving>>,
}

impl AdminEndpoint {
    /// The admin API at `addr` itself (a port the engine publishes).
    pub fn direct(addr: SocketAddr, token: String) -> Self {
        Self {
            addr,
            token,
            _serving: None,
        }
    }

    /// The admin API through a task of ours that serves `addr` (a port-forward), stopped when
    /// the last clone of the endpoint is dropped.
    pub fn served(addr: SocketAddr, token: String, task: AbortHandle) -> Self {
        Self {
            addr,
            token,
            _serving: Some(Arc::new(Serving(task))),
        }
    }
}

/// The task behind an endpoint's address.
#[derive(Debug)]
struct Serving(AbortHandle);

impl Drop for Serving {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// One line a service wrote.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LogLine {
    /// The service.
    pub service: String,
    /// The line, without its newline.
    pub line: String,
}

/// The lifecycle of environments on one kind of runtime.
pub trait Runtime: Send + Sync {
    /// The runtime's name, as `runtime.provider` spells it.
    fn name(&self) -> &'static str;

    /// What it can do.
    fn capabilities(&self) -> Capabilities;

    /// Where environments run, as `af up` prints it before it starts (the cluster's context and
    /// API server); `None` when the name says it all.
    fn location(&self) -> Option<String> {
        None
    }

    /// Where this plan's containment on this runtime reaches less far than the manifest may
    /// expect (the host's own settings it cannot change), each a sentence `af up` prints before
    /// it starts. Empty when the containment holds whatever the host's settings.
    fn containment_notes(&self, plan: &EnvPlan) -> Vec<String> {
        let _ = plan;
        Vec::new()
    }

    /// Make (or bring up to date) the environment: sidecar first, then the services in the
    /// plan's order, each ready before the next. Idempotent.
    fn up<'a>(
        &'a self,
        plan: &'a EnvPlan,
        progress: &'a dyn Progress,
    ) -> BoxFuture<'a, Result<UpReport, RuntimeError>>;

    /// The state of an environment; an unknown one is empty, not an error.
    fn status<'a>(&'a self, env: &'a EnvId) -> BoxFuture<'a, Result<EnvStatus, RuntimeError>>;

    /// What one service (or every service) wrote; with `follow`, keeps streaming.
    fn logs<'a>(
        &'a self,
        env: &'a EnvId,
        service: Option<&'a str>,
        follow: bool,
        tail: Option<usize>,
    ) -> BoxFuture<'a, Result<LineStream<'a>, RuntimeError>>;

    /// Remove everything this runtime made for the environment, by label, going on past
    /// failures, telling `progress` what it is removing. Removing an environment that does not
    /// exist is not an error.
    fn down<'a>(
        &'a self,
        env: &'a EnvId,
        progress: &'a dyn Progress,
    ) -> BoxFuture<'a, Result<DownReport, RuntimeError>>;

    /// Everything this runtime made for the environment, found by label.
    fn inventory<'a>(
        &'a self,
        env: &'a EnvId,
    ) -> BoxFuture<'a, Result<Vec<OwnedObject>, RuntimeError>>;

    /// Every environment this runtime holds (on its Docker daemon, on its cluster), by id.
    fn list(&self) -> BoxFuture<'_, Result<Vec<EnvSummary>, RuntimeError>>;

    /// How to reach the sidecar's admin API.
    fn admin<'a>(&'a self, env: &'a EnvId) -> BoxFuture<'a, Result<AdminEndpoint, RuntimeError>>;

    /// Run a command inside a running service (`af exec`) attached to `io`, in a terminal when
    /// `io` has one, until its output ends; its exit status, `None` when it never ran or the
    /// runtime could not tell.
    fn exec_attached<'a>(
        &'a self,
        env: &'a EnvId,
        service: &'a str,
        argv: &'a [String],
        io: ExecIo<'a>,
    ) -> BoxFuture<'a, Result<Option<i64>, RuntimeError>>;

    /// Run a command inside a running service with no input, its output collected (tests,
    /// diagnostics).
    fn exec<'a>(
        &'a self,
        env: &'a EnvId,
        service: &'a str,
        argv: &'a [String],
    ) -> BoxFuture<'a, Result<ExecOutput, RuntimeError>> {
        Box::pin(async move {
            let (mut stdout, mut stderr) = (Vec::new(), Vec::new());
            let exit = self
                .exec_attached(
                    env,
                    service,
                    argv,
                    ExecIo::collect(&mut stdout, &mut stderr),
                )
                .await?;
            Ok(ExecOutput {
                exit,
                stdout: String::from_utf8_lossy(&stdout).into_owned(),
                stderr: String::from_utf8_lossy(&stderr).into_owned(),
            })
        })
    }

    /// Restart the sidecar in place (same configuration, same journal).
    fn restart_sidecar<'a>(&'a self, env: &'a EnvId) -> BoxFuture<'a, Result<(), RuntimeError>>;

    /// Restart one service in place (its configuration unchanged) and wait until it is ready
    /// again; a service the environment does not run is [`RuntimeError::NoService`].
    fn restart_service<'a>(
        &'a self,
        env: &'a EnvId,
        service: &'a str,
    ) -> BoxFuture<'a, Result<(), RuntimeError>>;
}
