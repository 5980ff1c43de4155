//! The typed manifest: what `af.yaml` says, once it has been validated.
//!
//! These types are the single description of the file: the JSON Schema, the unknown-key and
//! type checks and deserialization are all derived from them.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::capability::Capability;
use crate::egress::EgressSpec;
use crate::placement::Runtime;

/// The only manifest version this build reads.
pub const MANIFEST_VERSION: u32 = 1;

/// A repository's `af.yaml`: its services, what they may send out, and where they run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(
    title = "af.yaml",
    description = "The af manifest: services, egress catalogue and runtime of one repository."
)]
pub struct Manifest {
    /// The manifest format version. Always 1.
    pub version: u32,
    /// The project's name: a DNS label, used in environment and object names.
    pub name: String,
    /// The services that make up an environment, started in dependency order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub services: Vec<Service>,
    /// What services may send out of the environment, and how each request is answered.
    #[serde(default, skip_serializing_if = "is_default")]
    pub egress: EgressSpec,
    /// Where environments run: the provider, its targets and the placement requirements.
    #[serde(default, skip_serializing_if = "is_default")]
    pub runtime: Runtime,
    /// What happens while an environment runs and its containment is found lost.
    #[serde(default, skip_serializing_if = "is_default")]
    pub containment: ContainmentSpec,
}

/// The `containment:` section: containment is proven before any service runs, and on a cluster
/// proven again every few seconds while they run.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ContainmentSpec {
    /// What happens to the services when a watcher finds containment lost while they run:
    /// `stop` (the default) or `keep`.
    #[serde(default, skip_serializing_if = "is_default")]
    pub on_loss: OnLoss,
}

/// What a loss of containment does to the running services.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum OnLoss {
    /// Stop them: every service Deployment scaled to zero, every cron service suspended, each
    /// marked with why; `af up` starts them again once the probe proves containment anew.
    #[default]
    Stop,
    /// Keep them running, and say so wherever the loss is shown.
    Keep,
}

/// One service of an environment.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Service {
    /// The service's name: a DNS label, also its host name inside the environment.
    pub name: String,
    /// The build context, relative to the manifest's directory. Missing means the directory
    /// itself.
    #[serde(
        default = "default_context",
        skip_serializing_if = "is_default_context"
    )]
    pub path: String,
    /// The Dockerfile, relative to the build context. Missing means `Dockerfile`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dockerfile: Option<String>,
    /// A prebuilt image to run instead of building one, e.g. `postgres:16` or
    /// `registry.example.com/team/db@sha256:…`: taken from this machine's Docker daemon, or
    /// pulled with the user's Docker credentials. A service names an image or a build context
    /// and Dockerfile, not both. It runs confined exactly as a built one does.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image: Option<String>,
    /// The executable to run instead of the image's entrypoint, as a list. Missing means the
    /// image's own.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub entrypoint: Vec<String>,
    /// The command to run, as a list of arguments: the image's command is replaced, its
    /// entrypoint kept (as Compose's `command` does). Missing means the image's own.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub command: Vec<String>,
    /// What kind of process this is: `web` (serves a port), `worker` or `cron`.
    #[serde(default, skip_serializing_if = "is_default")]
    pub kind: ServiceKind,
    /// For a cron service, when it runs: five cron fields, e.g. `*/15 * * * *`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schedule: Option<String>,
    /// The port the service listens on. A web service needs one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub port: Option<u16>,
    /// The HTTP path that answers when the service is ready, e.g. `/healthz`. Missing means the
    /// service is ready when its port accepts connections.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub health_path: Option<String>,
    /// Seconds the service has to become ready before `af up` gives up on it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 3600))]
    pub health_timeout: Option<u32>,
    /// Environment variables set in the service, by name.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub env: BTreeMap<String, String>,
    /// Files of `NAME=value` lines (as Compose's `env_file` and Docker's `--env-file` read
    /// them), relative to the manifest's directory, read by `af up`; `env` wins over them,
    /// and a later file over an earlier one. Their values stay out of af.yaml.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub env_file: Vec<String>,
    /// How many copies of the service run. Missing means 1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 64))]
    pub replicas: Option<u32>,
    /// CPU and memory limits of each copy.
    #[serde(default, skip_serializing_if = "is_default")]
    pub resources: Resources,
    /// Services that must be ready before this one starts.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub depends_on: Vec<String>,
    /// A command run once in the service's image before the service starts, as a list of
    /// arguments. It is never retried: if it fails, the service is not started.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub migrate: Vec<String>,
    /// Linux capabilities the service needs, by name (`CHOWN`, `SETUID`, ...). A service runs
    /// with every other one dropped; `NET_RAW`, `NET_ADMIN`, `SYS_ADMIN` and those that act on
    /// the host are refused.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub capabilities: Vec<Capability>,
}

/// What kind of process a service is.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum ServiceKind {
    /// Serves HTTP on its port; gets an ingress when the runtime has a domain.
    #[default]
    Web,
    /// Runs continuously and serves no port to the outside.
    Worker,
    /// Runs to completion on its `schedule`.
    Cron,
}

/// Resource limits of one copy of a service, in the orchestrators' usual notation.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Resources {
    /// CPU limit: cores (`1`, `0.5`) or millicores (`500m`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu: Option<String>,
    /// Memory limit: bytes with an optional unit (`512Mi`, `1Gi`, `256M`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory: Option<String>,
}

fn default_context() -> String {
    ".".to_owned()
}

fn is_default_context(path: &str) -> bool {
    path == "."
}

fn is_default<T: Default + PartialEq>(value: &T) -> bool {
    *value == T::default()
}
