//! The environment's NetworkPolicies, rendered as typed objects, and applied in order (the
//! default deny first) with reuse by digest.
//!
//! Default deny both ways; services (and migrations, cron jobs, the containment probe) may
//! reach the sidecar's listeners and each other, by pod selectors only, never a namespace
//! selector, so nothing outside the namespace can match; the sidecar takes connections only
//! from the environment's pods, and reaches the outside minus link-local, RFC 1918 and CGNAT
//! (`::/0` minus `fc00::/7` and `fe80::/10`), the environment's services (webhook delivery)
//! and the cluster resolver on port 53.
//!
//! A NetworkPolicy is a request to the cluster's CNI, which may store it and enforce nothing;
//! the containment probe, which runs after these exist, is what finds out.

use std::collections::{BTreeMap, BTreeSet};
use std::net::IpAddr;

use af_sidecar_api::config::{ProxyListener, SmtpListener};
use k8s_openapi::api::networking::v1::{
    IPBlock, NetworkPolicy, NetworkPolicyEgressRule, NetworkPolicyIngressRule, NetworkPolicyPeer,
    NetworkPolicyPort, NetworkPolicySpec,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::Client;
use kube::api::{Api, DeleteParams, ListParams, PostParams};

use super::cluster::refused;
use super::names::{Names, kind, network};
use crate::plan::short_digest;
use crate::runtime::labels::{CONFIG, NETWORK};
use crate::runtime::{Action, Progress, RuntimeError};

/// The sidecar's transparent HTTP and TLS listeners.
const TRANSPARENT_PORTS: [u16; 2] = [80, 443];
/// DNS, served by the sidecar to the services and asked of the cluster resolver by the sidecar.
const DNS_PORT: u16 = 53;
/// What the sidecar may not reach over IPv4: RFC 1918, CGNAT, link-local (the metadata
/// endpoint and with it the node's cloud credentials).
const EXCEPT_V4: [&str; 5] = [
    "10.0.0.0/8",
    "172.16.0.0/12",
    "192.168.0.0/16",
    "100.64.0.0/10",
    "169.254.0.0/16",
];
/// What the sidecar may not reach over IPv6: unique local and link-local.
const EXCEPT_V6: [&str; 2] = ["fc00::/7", "fe80::/10"];

/// Where the sidecar asks the cluster's own names (the services' names on a cluster).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ClusterResolver {
    /// The resolver's pods, in the namespace those labels select (kube-dns in kube-system).
    Pods {
        /// Labels of the resolver's namespace.
        namespace: BTreeMap<String, String>,
        /// Labels of the resolver's pods.
        pods: BTreeMap<String, String>,
    },
    /// The resolver's exact addresses.
    Addresses(Vec<IpAddr>),
    /// None was found: the sidecar reaches no cluster resolver.
    Unknown,
}

/// The environment's five policies, in the order they are applied.
pub fn render(names: &Names, resolver: &ClusterResolver) -> Vec<NetworkPolicy> {
    let services = pods(network::SERVICE);
    let sidecar = pods(network::SIDECAR);
    let sidecar_ports = sidecar_ports();
    let mut sidecar_egress = vec![
        NetworkPolicyEgressRule {
            to: Some(vec![
                outside("0.0.0.0/0", &EXCEPT_V4),
                outside("::/0", &EXCEPT_V6),
            ]),
            ports: None,
        },
        NetworkPolicyEgressRule {
            to: Some(vec![services.clone()]),
            ports: None,
        },
    ];
    if let Some(peers) = resolver_peers(resolver) {
        sidecar_egress.push(NetworkPolicyEgressRule {
            to: Some(peers),
            ports: Some(dns_ports()),
        });
    }
    vec![
        policy(
            names,
            "af-default-deny",
            NetworkPolicySpec {
                pod_selector: Some(LabelSelector::default()),
                policy_types: Some(vec!["Ingress".to_owned(), "Egress".to_owned()]),
                ..NetworkPolicySpec::default()
            },
        ),
        policy(
            names,
            "af-services-egress",
            NetworkPolicySpec {
                pod_selector: services.pod_selector.clone(),
                policy_types: Some(vec!["Egress".to_owned()]),
                egress: Some(vec![
                    NetworkPolicyEgressRule {
                        to: Some(vec![sidecar.clone()]),
                        ports: Some(sidecar_ports.clone()),
                    },
                    NetworkPolicyEgressRule {
                        to: Some(vec![services.clone()]),
                        ports: None,
                    },
                ]),
                ..NetworkPolicySpec::default()
            },
        ),
        policy(
            names,
            "af-services-ingress",
            NetworkPolicySpec {
                pod_selector: services.pod_selector.clone(),
                policy_types: Some(vec!["Ingress".to_owned()]),
                ingress: Some(vec![NetworkPolicyIngressRule {
                    from: Some(vec![services.clone(), sidecar.clone()]),
                    ports: None,
                }]),
                ..NetworkPolicySpec::default()
            },
        ),
        policy(
            names,
            "af-sidecar-ingress",
            NetworkPolicySpec {
                pod_selector: sidecar.pod_selector.clone(),
                policy_types: Some(vec!["Ingress".to_owned()]),
                ingress: Some(vec![NetworkPolicyIngressRule {
                    // Every pod of this namespace, and only those.
                    from: Some(vec![NetworkPolicyPeer {
                        pod_selector: Some(LabelSelector::default()),
                        ..NetworkPolicyPeer::default()
                    }]),
                    ports: Some(sidecar_ports),
                }]),
                ..NetworkPolicySpec::default()
            },
        ),
        policy(
            names,
            "af-sidecar-egress",
            NetworkPolicySpec {
                pod_selector: sidecar.pod_selector,
                policy_types: Some(vec!["Egress".to_owned()]),
                egress: Some(sidecar_egress),
                ..NetworkPolicySpec::default()
            },
        ),
    ]
}

/// Create what is missing, replace what changed (by the digest label), keep what is the same,
/// and delete our policies that are no longer rendered. Returns what was done to each.
pub async fn apply(
    client: &Client,
    names: &Names,
    wanted: &[NetworkPolicy],
    progress: &dyn Progress,
) -> Result<Vec<(String, Action)>, RuntimeError> {
    let namespace = names.namespace();
    let api: Api<NetworkPolicy> = Api::namespaced(client.clone(), namespace);
    let mut done = Vec::with_capacity(wanted.len());
    for policy in wanted {
        let name = policy.metadata.name.clone().unwrap_or_default();
        let found = api.get_opt(&name).await.map_err(refused(format!(
            "read network policy {name} in {namespace}"
        )))?;
        let action = match found {
            None => {
                api.create(&PostParams::default(), policy)
                    .await
                    .map_err(refused(format!(
                        "create network policy {name} in {namespace}"
                    )))?;
                Action::Created
            }
            Some(existing) if digest_of(&existing) == digest_of(policy) => Action::Reused,
            Some(existing) => {
                let mut replacement = policy.clone();
                replacement.metadata.resource_version = existing.metadata.resource_version;
                api.replace(&name, &PostParams::default(), &replacement)
                    .await
                    .map_err(refused(format!(
                        "replace network policy {name} in {namespace}"
                    )))?;
                Action::Replaced
            }
        };
        done.push((name, action));
    }
    let keep: BTreeSet<&str> = done.iter().map(|(n, _)| n.as_str()).collect();
    let ours = api
        .list(&ListParams::default().labels(&names.selector_of(kind::POLICY)))
        .await
        .map_err(refused(format!("list the network policies of {namespace}")))?;
    for stale in ours.items {
        let name = stale.metadata.name.unwrap_or_default();
        if !keep.contains(name.as_str()) {
            progress.step(&format!("removing network policy {name}"));
            api.delete(&name, &DeleteParams::default())
                .await
                .map_err(refused(format!(
                    "delete network policy {name} in {namespace}"
                )))?;
        }
    }
    Ok(done)
}

fn policy(names: &Names, name: &str, spec: NetworkPolicySpec) -> NetworkPolicy {
    let mut labels = names.labels(kind::POLICY);
    let digest = serde_json::to_vec(&spec).map_or_else(|_| String::new(), |b| short_digest(&b));
    labels.insert(CONFIG.to_owned(), digest);
    NetworkPolicy {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            namespace: Some(names.namespace().to_owned()),
            labels: Some(labels),
            ..ObjectMeta::default()
        },
        spec: Some(spec),
    }
}

fn digest_of(policy: &NetworkPolicy) -> Option<&String> {
    policy.metadata.labels.as_ref().and_then(|l| l.get(CONFIG))
}

/// Pods of this namespace under the `network` rules (a pod selector alone never reaches
/// outside the policy's own namespace).
fn pods(network: &str) -> NetworkPolicyPeer {
    NetworkPolicyPeer {
        pod_selector: Some(LabelSelector {
            match_labels: Some(BTreeMap::from([(NETWORK.to_owned(), network.to_owned())])),
            ..LabelSelector::default()
        }),
        ..NetworkPolicyPeer::default()
    }
}

fn outside(cidr: &str, except: &[&str]) -> NetworkPolicyPeer {
    NetworkPolicyPeer {
        ip_block: Some(IPBlock {
            cidr: cidr.to_owned(),
            except: Some(except.iter().map(|c| (*c).to_owned()).collect()),
        }),
        ..NetworkPolicyPeer::default()
    }
}

fn resolver_peers(resolver: &ClusterResolver) -> Option<Vec<NetworkPolicyPeer>> {
    match resolver {
        ClusterResolver::Pods { namespace, pods } => Some(vec![NetworkPolicyPeer {
            namespace_selector: Some(LabelSelector {
                match_labels: Some(namespace.clone()),
                ..LabelSelector::default()
            }),
            pod_selector: Some(LabelSelector {
                match_labels: Some(pods.clone()),
                ..LabelSelector::default()
            }),
            ..NetworkPolicyPeer::default()
        }]),
        ClusterResolver::Addresses(addrs) if !addrs.is_empty() => Some(
            addrs
                .iter()
                .map(|ip| NetworkPolicyPeer {
                    ip_block: Some(IPBlock {
                        cidr: match ip {
                            IpAddr::V4(v4) => format!("{v4}/32"),
                            IpAddr::V6(v6) => format!("{v6}/128"),
                        },
                        except: None,
                    }),
                    ..NetworkPolicyPeer::default()
                })
                .collect(),
        ),
        ClusterResolver::Addresses(_) | ClusterResolver::Unknown => None,
    }
}

/// The sidecar's listeners a service may reach: explicit proxy, transparent HTTP and TLS,
/// SMTP, and DNS over UDP and TCP.
fn sidecar_ports() -> Vec<NetworkPolicyPort> {
    let mut ports: Vec<NetworkPolicyPort> = [ProxyListener::DEFAULT_PORT]
        .into_iter()
        .chain(TRANSPARENT_PORTS)
        .chain(SmtpListener::DEFAULT_PORTS)
        .map(|port| tcp_or_udp("TCP", port))
        .collect();
    ports.extend(dns_ports());
    ports
}

fn dns_ports() -> Vec<NetworkPolicyPort> {
    vec![tcp_or_udp("UDP", DNS_PORT), tcp_or_udp("TCP", DNS_PORT)]
}

fn tcp_or_udp(protocol: &str, port: u16) -> NetworkPolicyPort {
    NetworkPolicyPort {
        port: Some(IntOrString::Int(i32::from(port))),
        protocol: Some(protocol.to_owned()),
        end_port: None,
    }
}
