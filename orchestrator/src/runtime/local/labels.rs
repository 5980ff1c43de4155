//! Object names and labels of the local runtime, and the ownership rule: an object with one of
//! our names but without our label is somebody else's, and so is a container a kubelet made
//! for a pod of the cluster runtime's on this same daemon (it carries the pod's labels).

use std::collections::HashMap;

use crate::env_id::EnvId;
use crate::runtime::labels::{CONFIG, ENV, KIND, MANAGED, SERVICE};

/// The `dev.antifailure.kind` of each object the local runtime makes.
pub mod kind {
    /// The services' internal network.
    pub const INTERNAL: &str = "internal-network";
    /// The sidecar's edge network.
    pub const EDGE: &str = "edge-network";
    /// The forwarders' publish network.
    pub const PUBLISH: &str = "publish-network";
    /// The sidecar container.
    pub const SIDECAR: &str = "sidecar";
    /// A service container.
    pub const SERVICE: &str = "service";
    /// A forwarder publishing a web service on 127.0.0.1.
    pub const FORWARDER: &str = "forwarder";
    /// A migration container.
    pub const MIGRATE: &str = "migrate";
    /// The sidecar's journal volume.
    pub const JOURNAL: &str = "journal-volume";
}

/// The names of one environment's objects.
#[derive(Debug, Clone)]
pub struct Names {
    env: EnvId,
}

impl Names {
    /// Names for `env`.
    pub fn new(env: &EnvId) -> Self {
        Self { env: env.clone() }
    }

    /// The environment.
    pub fn env(&self) -> &EnvId {
        &self.env
    }

    /// The services' internal network.
    pub fn internal(&self) -> String {
        format!("af-{}-internal", self.env)
    }

    /// The sidecar's edge network.
    pub fn edge(&self) -> String {
        format!("af-{}-edge", self.env)
    }

    /// The forwarders' publish network.
    pub fn publish(&self) -> String {
        format!("af-{}-publish", self.env)
    }

    /// The sidecar container.
    pub fn sidecar(&self) -> String {
        format!("af-{}-sidecar", self.env)
    }

    /// The sidecar's journal volume (kept when the sidecar is replaced).
    pub fn journal(&self) -> String {
        format!("af-{}-journal", self.env)
    }

    /// A service container.
    pub fn service(&self, service: &str) -> String {
        format!("af-{}-svc-{service}", self.env)
    }

    /// A service's forwarder.
    pub fn forwarder(&self, service: &str) -> String {
        format!("af-{}-fwd-{service}", self.env)
    }

    /// A service's migration container.
    pub fn migrate(&self, service: &str) -> String {
        format!("af-{}-migrate-{service}", self.env)
    }

    /// Whether `name` is one this environment's objects could have (container or network).
    pub fn could_be_ours(&self, name: &str) -> bool {
        let name = name.trim_start_matches('/');
        let Some(rest) = name.strip_prefix(&format!("af-{}-", self.env)) else {
            return false;
        };
        matches!(
            rest,
            "internal" | "edge" | "publish" | "sidecar" | "journal"
        ) || ["svc-", "fwd-", "migrate-"]
            .iter()
            .any(|p| rest.starts_with(p))
    }

    /// The labels of an object of this environment, with the digest it was made from.
    pub fn labels(&self, kind: &str, service: &str, config: &str) -> HashMap<String, String> {
        let mut labels = HashMap::from([
            (MANAGED.to_owned(), "true".to_owned()),
            (ENV.to_owned(), self.env.to_string()),
            (SERVICE.to_owned(), service.to_owned()),
            (KIND.to_owned(), kind.to_owned()),
        ]);
        if !config.is_empty() {
            labels.insert(CONFIG.to_owned(), config.to_owned());
        }
        labels
    }

    /// The label filter that finds this environment's objects.
    pub fn filter(&self) -> HashMap<String, Vec<String>> {
        HashMap::from([(
            "label".to_owned(),
            vec![format!("{MANAGED}=true"), format!("{ENV}={}", self.env)],
        )])
    }
}

/// A label a kubelet on this Docker daemon (dockershim, cri-dockerd) puts on every container
/// it makes for a pod. A pod's sandbox carries the pod's labels, ours among them when the pod
/// is the cluster runtime's, but it is the cluster's to list and remove, never this runtime's.
const KUBELET_POD: &str = "io.kubernetes.pod.namespace";

/// Whether a container with `labels` was made by a kubelet for a pod.
pub fn made_by_kubelet(labels: Option<&HashMap<String, String>>) -> bool {
    labels.is_some_and(|l| l.contains_key(KUBELET_POD))
}

/// Who an existing object belongs to, by its labels.
#[derive(Debug, PartialEq, Eq)]
pub enum Owner {
    /// Ours, and this environment's.
    This,
    /// Ours, but another environment's (cannot happen with our names; treated as not ours).
    Other,
    /// Not made by af.
    Foreign,
}

/// Judge an object's labels against `env`.
pub fn owner(labels: Option<&HashMap<String, String>>, env: &EnvId) -> Owner {
    let Some(labels) = labels else {
        return Owner::Foreign;
    };
    if labels.get(MANAGED).map(String::as_str) != Some("true") || made_by_kubelet(Some(labels)) {
        return Owner::Foreign;
    }
    if labels.get(ENV).map(String::as_str) == Some(env.as_str()) {
        Owner::This
    } else {
        Owner::Other
    }
}

/// The config digest label of an object.
pub fn config_of(labels: Option<&HashMap<String, String>>) -> Option<&str> {
    labels.and_then(|l| l.get(CONFIG)).map(String::as_str)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_recognised_and_labels_judged() {
        let env = EnvId::parse("shop-main-abc123").expect("id");
        let names = Names::new(&env);
        assert!(names.could_be_ours("/af-shop-main-abc123-svc-web"));
        assert!(names.could_be_ours(&names.internal()));
        assert!(!names.could_be_ours("af-shop-main-abc123x-svc-web"));
        assert!(!names.could_be_ours("af-shop-main-abc123-other"));
        let labels = names.labels(kind::SERVICE, "web", "d1");
        assert_eq!(owner(Some(&labels), &env), Owner::This);
        let mut sandbox = labels.clone();
        sandbox.insert(KUBELET_POD.to_owned(), "af-shop-main-abc123".to_owned());
        assert_eq!(
            owner(Some(&sandbox), &env),
            Owner::Foreign,
            "a pod's container on this daemon is the cluster's"
        );
        assert_eq!(
            owner(Some(&labels), &EnvId::parse("x").expect("id")),
            Owner::Other
        );
        assert_eq!(owner(None, &env), Owner::Foreign);
        assert_eq!(owner(Some(&HashMap::new()), &env), Owner::Foreign);
        assert_eq!(config_of(Some(&labels)), Some("d1"));
    }
}
