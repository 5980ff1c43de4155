//! The names and labels of one environment's objects on a cluster, and the ownership rule: a
//! namespace with the environment's name but without our label is somebody else's.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Namespace;

use crate::env_id::EnvId;
use crate::runtime::labels::{ENV, KIND, MANAGED};

/// The namespace prefix when the placement names none.
pub const DEFAULT_PREFIX: &str = "af-";

/// The `dev.antifailure.kind` of each object the Kubernetes runtime makes.
pub mod kind {
    /// The environment's namespace.
    pub const NAMESPACE: &str = "namespace";
    /// One of its NetworkPolicies.
    pub const POLICY: &str = "network-policy";
    /// The containment probe's pod.
    pub const PROBE: &str = "probe";
    /// The sidecar's Deployment, its pods, its Service and its configuration Secret.
    pub const SIDECAR: &str = "sidecar";
    /// A service's Deployment, its pods and its Service.
    pub const SERVICE: &str = "service";
    /// The environment CA files every service mounts.
    pub const TRUST: &str = "trust";
    /// A service's system CA stores with the environment CA appended, mounted over its image's.
    pub const STORE: &str = "system-store";
    /// The image pull secret ([`super::PULL_SECRET`]).
    pub const PULL_SECRET: &str = "pull-secret";
    /// A service's migration Job and its pod.
    pub const MIGRATION: &str = "migration";
    /// A cron service's CronJob, its Jobs and their pods.
    pub const CRON: &str = "cron";
    /// A web service's Ingress and the NetworkPolicy letting the ingress controller in (not
    /// `network-policy`: those are the environment's own five, applied and pruned together).
    pub const INGRESS: &str = "ingress";
    /// The Secret of the secret variables every service gets.
    pub const SERVICE_ENV: &str = "service-env";
}

/// The ConfigMap of `service`'s system CA stores ([`kind::STORE`]).
pub fn system_store(service: &str) -> String {
    format!("af-store-{service}")
}

/// The sidecar's objects: its Deployment and Service.
pub const SIDECAR: &str = "af-sidecar";
/// The Secret holding the sidecar's configuration document (the CA key only there).
pub const SIDECAR_CONFIG: &str = "af-sidecar-config";
/// The document's key in [`SIDECAR_CONFIG`].
pub const SIDECAR_CONFIG_KEY: &str = "sidecar.json";
/// The sidecar journal's PersistentVolumeClaim, on a cluster with a default StorageClass.
pub const JOURNAL_CLAIM: &str = "af-sidecar-journal";
/// The Secret of the variables every service gets that are secret (the webhook secrets).
pub const SERVICE_ENV: &str = "af-service-env";
/// The ConfigMap of the CA files the services mount at `/etc/af`.
pub const TRUST: &str = "af-trust";
/// The image pull secret of a registry the nodes pull from with credentials.
pub const PULL_SECRET: &str = "af-registry";

/// The values of `dev.antifailure.network`: which rules a pod is under.
pub mod network {
    /// Services, migrations, cron jobs and the containment probe: the sidecar and each other.
    pub const SERVICE: &str = "service";
    /// The sidecar: the outside, minus private and link-local ranges.
    pub const SIDECAR: &str = "sidecar";
}

/// The names of one environment's objects.
#[derive(Debug, Clone)]
pub struct Names {
    env: EnvId,
    namespace: String,
}

impl Names {
    /// Names for `env` under `prefix` (already checked by placement to begin a DNS label; an
    /// id is at most 30 characters, so the namespace is one label).
    pub fn new(prefix: &str, env: &EnvId) -> Self {
        Self {
            env: env.clone(),
            namespace: format!("{prefix}{env}"),
        }
    }

    /// The environment.
    pub fn env(&self) -> &EnvId {
        &self.env
    }

    /// The environment's namespace.
    pub fn namespace(&self) -> &str {
        &self.namespace
    }

    /// `service`'s fully qualified name in the cluster's default domain
    /// (`worker.af-pr-42.svc.cluster.local`).
    pub fn cluster_name(&self, service: &str) -> String {
        format!("{service}.{}.svc.cluster.local", self.namespace)
    }

    /// The labels of an object of `kind`, set in the call that creates it.
    pub fn labels(&self, kind: &str) -> BTreeMap<String, String> {
        BTreeMap::from([
            (MANAGED.to_owned(), "true".to_owned()),
            (ENV.to_owned(), self.env.to_string()),
            (KIND.to_owned(), kind.to_owned()),
        ])
    }

    /// The label selector of this environment's objects.
    pub fn selector(&self) -> String {
        format!("{MANAGED}=true,{ENV}={}", self.env)
    }

    /// The label selector of this environment's objects of `kind`.
    pub fn selector_of(&self, kind: &str) -> String {
        format!("{},{KIND}={kind}", self.selector())
    }
}

/// Whose a namespace with the environment's name is.
#[derive(Debug, PartialEq, Eq)]
pub enum Owner {
    /// There is none.
    Absent,
    /// This environment's: made by af with its labels.
    Ours,
    /// Somebody else's: without our label, or af's for another environment.
    Foreign,
}

/// Whose `found` is.
pub fn owner(found: Option<&Namespace>, names: &Names) -> Owner {
    let Some(ns) = found else {
        return Owner::Absent;
    };
    let labels = ns.metadata.labels.as_ref();
    let label = |key: &str| labels.and_then(|l| l.get(key)).map(String::as_str);
    if label(MANAGED) == Some("true") && label(ENV) == Some(names.env.as_str()) {
        Owner::Ours
    } else {
        Owner::Foreign
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    use super::*;

    fn ns(labels: &[(&str, &str)]) -> Namespace {
        Namespace {
            metadata: ObjectMeta {
                name: Some("af-pr-42".to_owned()),
                labels: Some(
                    labels
                        .iter()
                        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                        .collect(),
                ),
                ..ObjectMeta::default()
            },
            ..Namespace::default()
        }
    }

    #[test]
    fn a_namespace_is_ours_only_with_the_managed_label_and_this_environment() {
        let names = Names::new(DEFAULT_PREFIX, &EnvId::parse("pr-42").expect("id"));
        assert_eq!(names.namespace(), "af-pr-42");
        assert_eq!(owner(None, &names), Owner::Absent);
        assert_eq!(
            owner(Some(&ns(&[(MANAGED, "true"), (ENV, "pr-42")])), &names),
            Owner::Ours
        );
        for foreign in [
            ns(&[]),
            ns(&[(ENV, "pr-42")]),
            ns(&[(MANAGED, "false"), (ENV, "pr-42")]),
            ns(&[(MANAGED, "true"), (ENV, "pr-7")]),
        ] {
            assert_eq!(owner(Some(&foreign), &names), Owner::Foreign);
        }
    }
}
