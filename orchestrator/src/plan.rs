//! What a runtime is asked to run: the manifest resolved against its directory, with the
//! services in the order they start. Runtime-neutral: the local and cluster runtimes read the
//! same plan.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::time::Duration;

use af_policy::egress::EgressSpec;
use af_policy::error::{Report, codes};
use af_policy::manifest::{Capability, Limits, Manifest, OnLoss, ServiceKind};
use serde::Serialize;
use sha2::{Digest, Sha256};

use crate::env_id::EnvId;
use crate::modes::ModesInput;
use crate::secret::hex;
use crate::trust;

mod env_files;

/// The readiness timeout of a service that does not set `health_timeout`.
pub const DEFAULT_HEALTH_TIMEOUT: Duration = Duration::from_secs(60);

/// One environment to run.
#[derive(Debug, Clone, Serialize)]
pub struct EnvPlan {
    /// The environment id.
    pub env: EnvId,
    /// The project's name (`name:` in the manifest).
    pub project: String,
    /// The repository the manifest is in (its root, or the manifest's directory outside one),
    /// recorded on the environment for `af ls`; `None` for a plan made without a manifest.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub repository: Option<String>,
    /// The services, in start order (dependencies first).
    pub services: Vec<ServicePlan>,
    /// The egress catalogue the sidecar enforces.
    pub egress: EgressSpec,
    /// What the answering modes work from (files the rules name, test credentials). Never
    /// serialized with the plan: it holds credentials.
    #[serde(skip)]
    pub modes: ModesInput,
    /// The certificates `egress.upstream_roots` names, as PEM, for the sidecar to trust when it
    /// opens TLS to an upstream; `None` when the manifest names none.
    #[serde(skip)]
    pub upstream_roots_pem: Option<String>,
    /// What a loss of containment while the services run does to them.
    pub on_loss: OnLoss,
}

/// What kind of process a service is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    /// Serves HTTP on its port; published on the host.
    Web,
    /// Runs continuously; not published.
    Worker,
    /// Runs on a schedule (placed as a long-running process by the local runtime).
    Cron,
}

/// One service to run.
#[derive(Debug, Clone, Serialize)]
pub struct ServicePlan {
    /// The service name: its host name inside the environment.
    pub name: String,
    /// What kind of process it is.
    pub kind: Kind,
    /// The build context, absolute.
    pub context: PathBuf,
    /// The Dockerfile, relative to the context; `None` means `Dockerfile`.
    pub dockerfile: Option<String>,
    /// A prebuilt image run instead of building the context. Left out of the digest's text
    /// when absent, so a built service keeps the digest it had.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub image: Option<String>,
    /// The entrypoint; empty means the image's own. Left out of the digest's text when empty.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub entrypoint: Vec<String>,
    /// The command (the entrypoint's arguments); empty means the image's own.
    pub command: Vec<String>,
    /// The port it listens on.
    pub port: Option<u16>,
    /// The readiness path; `None` means "the port accepts".
    pub health_path: Option<String>,
    /// How long it has to become ready.
    pub health_timeout: Duration,
    /// The manifest's own environment variables.
    pub env: BTreeMap<String, String>,
    /// Services that must be ready first.
    pub depends_on: Vec<String>,
    /// Run once, before the service starts, never retried.
    pub migrate: Vec<String>,
    /// When a cron service runs: five cron fields (`*/15 * * * *`). Left out of the digest's
    /// text when absent, so a service without one keeps the digest it had.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub schedule: Option<String>,
    /// The capabilities it keeps; every other one is dropped.
    pub capabilities: Vec<Capability>,
    /// How many copies run. Left out of the digest's text at 1, so a service that does not set
    /// it keeps the digest it had.
    #[serde(skip_serializing_if = "is_one")]
    pub replicas: u32,
    /// Each copy's CPU and memory limits. Left out of the digest's text when there are none.
    #[serde(skip_serializing_if = "Limits::is_unlimited")]
    pub resources: Limits,
}

impl ServicePlan {
    /// A service with everything but its name, kind and context left unset.
    pub fn new(name: impl Into<String>, kind: Kind, context: impl Into<PathBuf>) -> Self {
        Self {
            name: name.into(),
            kind,
            context: context.into(),
            dockerfile: None,
            image: None,
            entrypoint: Vec::new(),
            command: Vec::new(),
            port: None,
            health_path: None,
            health_timeout: DEFAULT_HEALTH_TIMEOUT,
            env: BTreeMap::new(),
            depends_on: Vec::new(),
            migrate: Vec::new(),
            schedule: None,
            capabilities: Vec::new(),
            replicas: 1,
            resources: Limits::default(),
        }
    }

    /// A digest of everything about the service that its container is made from (the image is
    /// hashed separately by its id).
    pub fn config_digest(&self) -> String {
        let json = serde_json::to_vec(self).unwrap_or_default();
        short_digest(&json)
    }
}

impl EnvPlan {
    /// A plan whose services are put in start order, with no modes' inputs. Refuses a
    /// dependency on a service that does not exist (AF-MAN-010) and a cycle (AF-MAN-009).
    pub fn new(
        env: EnvId,
        project: impl Into<String>,
        services: Vec<ServicePlan>,
        egress: EgressSpec,
    ) -> Result<Self, Report> {
        let services = start_order(services)?;
        Ok(Self {
            env,
            project: project.into(),
            repository: None,
            services,
            egress,
            modes: ModesInput::default(),
            upstream_roots_pem: None,
            on_loss: OnLoss::default(),
        })
    }

    /// The plan of a manifest read from `manifest_path`: build contexts and the files egress
    /// rules name resolved against the manifest's directory, test credentials read from this
    /// process's environment. A file a rule names that cannot be read refuses (AF-RUN-052).
    pub fn from_manifest(
        manifest: &Manifest,
        manifest_path: &std::path::Path,
        env: EnvId,
    ) -> Result<Self, Report> {
        let dir = manifest_path
            .parent()
            .map(std::path::Path::to_path_buf)
            .unwrap_or_default();
        let dir = std::path::absolute(&dir).unwrap_or(dir);
        let services = manifest
            .services
            .iter()
            .map(|s| {
                Ok(ServicePlan {
                    name: s.name.clone(),
                    kind: match s.kind {
                        ServiceKind::Web => Kind::Web,
                        ServiceKind::Worker => Kind::Worker,
                        ServiceKind::Cron => Kind::Cron,
                    },
                    context: dir.join(&s.path),
                    dockerfile: s.dockerfile.clone(),
                    image: s.image.clone(),
                    entrypoint: s.entrypoint.clone(),
                    command: s.command.clone(),
                    port: s.port,
                    health_path: s.health_path.clone(),
                    health_timeout: s.health_timeout.map_or(DEFAULT_HEALTH_TIMEOUT, |t| {
                        Duration::from_secs(u64::from(t))
                    }),
                    env: env_files::environment(s, &dir)?,
                    depends_on: s.depends_on.clone(),
                    migrate: s.migrate.clone(),
                    schedule: s.schedule.clone(),
                    capabilities: s.capabilities.clone(),
                    replicas: s.replicas.unwrap_or(1),
                    resources: s.resources.limits(&s.name)?,
                })
            })
            .collect::<Result<_, Report>>()?;
        let mut plan = Self::new(
            env,
            manifest.name.clone(),
            services,
            manifest.egress.clone(),
        )?;
        plan.modes = ModesInput::load(&manifest.egress, &dir, |name| std::env::var(name).ok())?;
        plan.upstream_roots_pem = trust::upstream::load(&manifest.egress.upstream_roots, &dir)?;
        plan.on_loss = manifest.containment.on_loss;
        plan.repository = Some(crate::env_id::repository_root(&dir));
        Ok(plan)
    }

    /// The service of that name.
    pub fn service(&self, name: &str) -> Option<&ServicePlan> {
        self.services.iter().find(|s| s.name == name)
    }
}

/// Dependencies first; otherwise the manifest's order.
fn start_order(mut services: Vec<ServicePlan>) -> Result<Vec<ServicePlan>, Report> {
    let names: BTreeSet<&str> = services.iter().map(|s| s.name.as_str()).collect();
    for s in &services {
        if let Some(missing) = s.depends_on.iter().find(|d| !names.contains(d.as_str())) {
            return Err(Report::new(
                &codes::MAN_MISSING_DEPENDENCY,
                format!(
                    "Service {} depends on {missing}, which is not a service.",
                    s.name
                ),
            ));
        }
    }
    let mut ordered: Vec<ServicePlan> = Vec::with_capacity(services.len());
    while !services.is_empty() {
        let started: BTreeSet<String> = ordered.iter().map(|s| s.name.clone()).collect();
        let Some(next) = services
            .iter()
            .position(|s| s.depends_on.iter().all(|d| started.contains(d)))
        else {
            let stuck: Vec<&str> = services.iter().map(|s| s.name.as_str()).collect();
            return Err(Report::new(
                &codes::MAN_CYCLE,
                format!(
                    "The services {} depend on each other in a cycle.",
                    stuck.join(", ")
                ),
            ));
        };
        ordered.push(services.remove(next));
    }
    Ok(ordered)
}

fn is_one(n: &u32) -> bool {
    *n == 1
}

/// The first 12 hex digits of the SHA-256 of `bytes`.
pub fn short_digest(bytes: &[u8]) -> String {
    hex(&Sha256::digest(bytes)[..6])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn svc(name: &str, deps: &[&str]) -> ServicePlan {
        let mut s = ServicePlan::new(name, Kind::Web, "/x");
        s.depends_on = deps.iter().map(|d| d.to_string()).collect();
        s
    }

    fn env() -> EnvId {
        EnvId::parse("t").expect("id")
    }

    #[test]
    fn dependencies_start_first() {
        let plan = EnvPlan::new(
            env(),
            "p",
            vec![svc("web", &["api"]), svc("api", &["db"]), svc("db", &[])],
            EgressSpec::default(),
        )
        .expect("plan");
        let order: Vec<&str> = plan.services.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(order, ["db", "api", "web"]);
    }

    #[test]
    fn cycles_and_missing_dependencies_are_refused() {
        let cycle = EnvPlan::new(
            env(),
            "p",
            vec![svc("a", &["b"]), svc("b", &["a"])],
            EgressSpec::default(),
        );
        assert_eq!(cycle.err().map(|r| r.code.code), Some("AF-MAN-009"));
        let missing = EnvPlan::new(env(), "p", vec![svc("a", &["zz"])], EgressSpec::default());
        assert_eq!(missing.err().map(|r| r.code.code), Some("AF-MAN-010"));
    }

    #[test]
    fn replicas_and_limits_are_read_from_the_manifest_and_change_the_digest_only_when_set() {
        let text = "version: 1\nname: p\nservices:\n  - name: web\n    port: 80\n    replicas: 3\n    resources:\n      cpu: 500m\n      memory: 256Mi\n  - name: bg\n    kind: worker\n";
        let path = std::path::Path::new("/repo/af.yaml");
        let manifest = Manifest::from_str(text, path).expect("manifest");
        let plan = EnvPlan::from_manifest(&manifest, path, env()).expect("plan");
        let web = plan.service("web").expect("web");
        assert_eq!(web.replicas, 3);
        assert_eq!(web.resources.cpu_millicores, Some(500));
        assert_eq!(web.resources.memory_bytes, Some(256 << 20));
        let bg = plan.service("bg").expect("bg");
        assert_eq!((bg.replicas, bg.resources), (1, Limits::default()));

        // A service that sets neither is written, and digested, as before they existed.
        let plain = ServicePlan::new("bg", Kind::Worker, "/repo");
        let text = serde_json::to_string(&plain).expect("json");
        assert!(
            !text.contains("replicas") && !text.contains("resources"),
            "{text}"
        );
        let mut scaled = plain.clone();
        scaled.replicas = 2;
        let mut limited = plain.clone();
        limited.resources.memory_bytes = Some(1 << 30);
        assert_ne!(scaled.config_digest(), plain.config_digest());
        assert_ne!(limited.config_digest(), plain.config_digest());
    }
}
