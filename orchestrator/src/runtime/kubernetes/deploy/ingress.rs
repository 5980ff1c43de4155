//! Preview URLs: with a `domain` placed, each web service gets an Ingress
//! (`networking.k8s.io/v1`) at `<service>-<env>.<domain>` in front of its Service, and a
//! NetworkPolicy letting the ingress controller reach it; without a domain there is neither,
//! and no URL is reported.
//!
//! The controller runs in a namespace of its own (k3s's bundled Traefik in `kube-system`,
//! ingress-nginx in `ingress-nginx`), so the default-deny keeps it out until a policy lets it
//! in. That policy is as narrow as a NetworkPolicy can say it:
//!
//! - it selects one web service's pods and opens only that service's port, one policy per
//!   web service (never the environment's other services, never the sidecar);
//! - it lets in pods that carry the controller's labels *and* live in the controller's
//!   namespace, that namespace picked by `kubernetes.io/metadata.name`, which the API server
//!   sets to the namespace's own name and nobody can change (Kubernetes 1.21 and later). A
//!   peer of pod labels under any namespace (`namespaceSelector: {}`) would let in any pod
//!   anybody labels `app.kubernetes.io/name: traefik` in a namespace of their own; a namespace
//!   selector alone would let in everything in `kube-system`.
//!
//! The defaults are the two controllers a k3s or a vanilla cluster usually has: Traefik's pods
//! (`app.kubernetes.io/name=traefik`) in `kube-system`, and ingress-nginx's controller
//! (`app.kubernetes.io/name=ingress-nginx`, `app.kubernetes.io/component=controller`) in
//! `ingress-nginx`. Any other is named with `AF_KUBE_INGRESS_FROM`
//! (`NAMESPACE/KEY=VALUE[+KEY=VALUE]`, comma-separated; it replaces the defaults), and the
//! Ingress's class with `AF_KUBE_INGRESS_CLASS` (else the cluster's default class). A
//! controller on the host network comes from its node's address, which no pod selector
//! matches: such a cluster's controller is not let in.

use std::collections::BTreeMap;

use k8s_openapi::api::networking::v1::{
    HTTPIngressPath, HTTPIngressRuleValue, Ingress, IngressBackend, IngressRule,
    IngressServiceBackend, IngressSpec, NetworkPolicy, NetworkPolicyIngressRule, NetworkPolicyPeer,
    NetworkPolicyPort, NetworkPolicySpec, ServiceBackendPort,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use super::objects::stamp;
use super::services;
use crate::plan::{Kind, ServicePlan};
use crate::runtime::RuntimeError;
use crate::runtime::kubernetes::discovery::NAMESPACE_NAME_LABEL;
use crate::runtime::kubernetes::names::{Names, kind};

/// The longest DNS label (`<service>-<env>` is one).
const MAX_LABEL: usize = 63;

/// An ingress controller's pods: their namespace and labels.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Controller {
    /// The controller's namespace.
    pub namespace: String,
    /// Labels its pods carry (all of them).
    pub pods: BTreeMap<String, String>,
}

/// How preview URLs are made.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct IngressOptions {
    /// The placement's domain; `None` makes no Ingress.
    pub domain: Option<String>,
    /// The Ingress class (`AF_KUBE_INGRESS_CLASS`); `None` means the cluster's default.
    pub class: Option<String>,
    /// The controllers let in (`AF_KUBE_INGRESS_FROM`, else [`default_controllers`]).
    pub controllers: Vec<Controller>,
}

impl IngressOptions {
    /// The options for `domain`, with the knobs read through `var`.
    pub fn from_vars(
        domain: Option<String>,
        var: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Self, RuntimeError> {
        let controllers = match var("AF_KUBE_INGRESS_FROM") {
            Some(list) => parse_controllers(&list)?,
            None => default_controllers(),
        };
        Ok(Self {
            domain,
            class: var("AF_KUBE_INGRESS_CLASS"),
            controllers,
        })
    }
}

/// Traefik in `kube-system` (k3s) and ingress-nginx's controller in `ingress-nginx`.
pub fn default_controllers() -> Vec<Controller> {
    let labels = |pairs: &[(&str, &str)]| {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    };
    vec![
        Controller {
            namespace: "kube-system".to_owned(),
            pods: labels(&[("app.kubernetes.io/name", "traefik")]),
        },
        Controller {
            namespace: "ingress-nginx".to_owned(),
            pods: labels(&[
                ("app.kubernetes.io/name", "ingress-nginx"),
                ("app.kubernetes.io/component", "controller"),
            ]),
        },
    ]
}

/// `traefik/app.kubernetes.io/name=traefik,ingress-nginx/a=b+c=d`.
fn parse_controllers(list: &str) -> Result<Vec<Controller>, RuntimeError> {
    let bad = |entry: &str| {
        RuntimeError::Unsupported(format!(
            "AF_KUBE_INGRESS_FROM {entry:?} is not NAMESPACE/KEY=VALUE[+KEY=VALUE], e.g. traefik/app.kubernetes.io/name=traefik."
        ))
    };
    list.split(',')
        .map(str::trim)
        .filter(|e| !e.is_empty())
        .map(|entry| {
            let (namespace, labels) = entry.split_once('/').ok_or_else(|| bad(entry))?;
            let pods = labels
                .split('+')
                .map(|pair| {
                    pair.split_once('=')
                        .filter(|(k, v)| !k.is_empty() && !v.is_empty())
                        .map(|(k, v)| (k.to_owned(), v.to_owned()))
                        .ok_or_else(|| bad(entry))
                })
                .collect::<Result<BTreeMap<_, _>, _>>()?;
            if namespace.is_empty() {
                return Err(bad(entry));
            }
            Ok(Controller {
                namespace: namespace.to_owned(),
                pods,
            })
        })
        .collect()
}

/// The service's host under `domain`: `<service>-<env>.<domain>`.
pub fn host(names: &Names, service: &str, domain: &str) -> String {
    format!("{service}-{}.{domain}", names.env())
}

/// Why the services of `services` cannot get a host under `domain`, if one cannot.
pub fn unsupported<'a>(
    names: &Names,
    services: impl IntoIterator<Item = &'a ServicePlan>,
    domain: &str,
) -> Option<String> {
    let long: Vec<&str> = services
        .into_iter()
        .filter(|s| published(s))
        .filter(|s| {
            let host = host(names, &s.name, domain);
            host.split('.').next().map_or(0, str::len) > MAX_LABEL || host.len() > 253
        })
        .map(|s| s.name.as_str())
        .collect();
    (!long.is_empty()).then(|| {
        format!(
            "The preview host of {} (<service>-{}.{domain}) is longer than a DNS name allows; nothing was created. Shorten the service's name or the domain.",
            long.join(", "),
            names.env()
        )
    })
}

/// A web service with a port, which gets an Ingress when there is a domain.
pub fn published(service: &ServicePlan) -> bool {
    service.kind == Kind::Web && service.port.is_some()
}

/// The URL the service's Ingress answers at.
pub fn url(names: &Names, service: &str, domain: &str) -> String {
    format!("http://{}/", host(names, service, domain))
}

/// The name of the policy letting the controller in to `service`.
pub fn policy_name(service: &str) -> String {
    format!("af-ingress-{service}")
}

/// The Ingress of a published `service`.
pub fn ingress(names: &Names, service: &ServicePlan, options: &IngressOptions) -> Option<Ingress> {
    let domain = options.domain.as_deref()?;
    let port = service.port.filter(|_| published(service))?;
    Some(stamp(Ingress {
        metadata: services::meta(names, &service.name, kind::INGRESS, &service.name),
        spec: Some(IngressSpec {
            ingress_class_name: options.class.clone(),
            rules: Some(vec![IngressRule {
                host: Some(host(names, &service.name, domain)),
                http: Some(HTTPIngressRuleValue {
                    paths: vec![HTTPIngressPath {
                        path: Some("/".to_owned()),
                        path_type: "Prefix".to_owned(),
                        backend: IngressBackend {
                            service: Some(IngressServiceBackend {
                                name: service.name.clone(),
                                port: Some(ServiceBackendPort {
                                    number: Some(i32::from(port)),
                                    name: None,
                                }),
                            }),
                            resource: None,
                        },
                    }],
                }),
            }]),
            ..IngressSpec::default()
        }),
        status: None,
    }))
}

/// The policy letting the controllers in to a published `service`'s pods on its port only.
pub fn policy(
    names: &Names,
    service: &ServicePlan,
    options: &IngressOptions,
) -> Option<NetworkPolicy> {
    options.domain.as_ref()?;
    let port = service.port.filter(|_| published(service))?;
    let from = options
        .controllers
        .iter()
        .map(|c| NetworkPolicyPeer {
            namespace_selector: Some(LabelSelector {
                match_labels: Some(BTreeMap::from([(
                    NAMESPACE_NAME_LABEL.to_owned(),
                    c.namespace.clone(),
                )])),
                ..LabelSelector::default()
            }),
            pod_selector: Some(LabelSelector {
                match_labels: Some(c.pods.clone()),
                ..LabelSelector::default()
            }),
            ip_block: None,
        })
        .collect();
    Some(stamp(NetworkPolicy {
        metadata: services::meta(
            names,
            &policy_name(&service.name),
            kind::INGRESS,
            &service.name,
        ),
        spec: Some(NetworkPolicySpec {
            pod_selector: Some(LabelSelector {
                match_labels: Some(services::pod_labels(names, &service.name)),
                ..LabelSelector::default()
            }),
            policy_types: Some(vec!["Ingress".to_owned()]),
            ingress: Some(vec![NetworkPolicyIngressRule {
                from: Some(from),
                ports: Some(vec![NetworkPolicyPort {
                    protocol: Some("TCP".to_owned()),
                    port: Some(IntOrString::Int(i32::from(port))),
                    end_port: None,
                }]),
            }]),
            egress: None,
        }),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::env_id::EnvId;
    use crate::runtime::kubernetes::names::DEFAULT_PREFIX;

    #[test]
    fn the_controllers_knob_replaces_the_defaults_and_refuses_what_it_cannot_read() {
        let vars = |value: &'static str| {
            move |k: &str| (k == "AF_KUBE_INGRESS_FROM").then(|| value.to_owned())
        };
        let options = IngressOptions::from_vars(
            Some("preview.test".to_owned()),
            &vars("traefik/app.kubernetes.io/name=traefik, edge/app=proxy+tier=front"),
        )
        .expect("read");
        assert_eq!(options.controllers.len(), 2);
        assert_eq!(options.controllers[0].namespace, "traefik");
        assert_eq!(
            options.controllers[1].pods,
            BTreeMap::from([
                ("app".to_owned(), "proxy".to_owned()),
                ("tier".to_owned(), "front".to_owned())
            ])
        );
        for bad in ["traefik", "/a=b", "ns/a", "ns/a=b+=c"] {
            assert!(
                IngressOptions::from_vars(None, &vars(bad)).is_err(),
                "{bad}"
            );
        }
        let defaults = IngressOptions::from_vars(None, &|_| None).expect("defaults");
        assert_eq!(defaults.controllers, default_controllers());
    }

    #[test]
    fn only_a_web_service_with_a_port_gets_an_ingress_and_only_with_a_domain() {
        let names = Names::new(DEFAULT_PREFIX, &EnvId::parse("pr-42").expect("id"));
        let mut web = ServicePlan::new("web", Kind::Web, "/x");
        web.port = Some(8080);
        let mut worker = ServicePlan::new("worker", Kind::Worker, "/x");
        worker.port = Some(9000);
        let with = IngressOptions {
            domain: Some("preview.test".to_owned()),
            ..IngressOptions::default()
        };
        assert!(ingress(&names, &web, &with).is_some());
        assert!(policy(&names, &web, &with).is_some());
        assert!(ingress(&names, &worker, &with).is_none());
        assert!(policy(&names, &worker, &with).is_none());
        let without = IngressOptions::default();
        assert!(ingress(&names, &web, &without).is_none());
        assert!(policy(&names, &web, &without).is_none());
        assert_eq!(
            url(&names, "web", "preview.test"),
            "http://web-pr-42.preview.test/"
        );
        let long = ServicePlan {
            port: Some(80),
            ..ServicePlan::new("a".repeat(60), Kind::Web, "/x")
        };
        assert!(unsupported(&names, [&web], "preview.test").is_none());
        let refused = unsupported(&names, [&web, &long], "preview.test").expect("refused");
        assert!(refused.contains(&"a".repeat(60)), "{refused}");
    }
}
