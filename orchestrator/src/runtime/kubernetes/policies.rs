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
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

use af_sidecar_api::config::{Containment, ProxyListener, SmtpListener};
use ipnet::{IpNet, Ipv4Net, Ipv6Net};
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
/// What the sidecar may not reach over IPv4: "this network", RFC 1918, CGNAT, loopback,
/// link-local (the metadata endpoint and with it the node's cloud credentials), multicast and
/// the reserved block.
const NOT_PUBLIC_V4: [Ipv4Net; 8] = [
    Ipv4Net::new_assert(Ipv4Addr::new(0, 0, 0, 0), 8),
    Ipv4Net::new_assert(Ipv4Addr::new(10, 0, 0, 0), 8),
    Ipv4Net::new_assert(Ipv4Addr::new(100, 64, 0, 0), 10),
    Ipv4Net::new_assert(Ipv4Addr::new(127, 0, 0, 0), 8),
    Ipv4Net::new_assert(Ipv4Addr::new(169, 254, 0, 0), 16),
    Ipv4Net::new_assert(Ipv4Addr::new(172, 16, 0, 0), 12),
    Ipv4Net::new_assert(Ipv4Addr::new(192, 168, 0, 0), 16),
    Ipv4Net::new_assert(Ipv4Addr::new(224, 0, 0, 0), 3),
];
/// The IPv6 the sidecar may reach: global unicast, which leaves out unique local, link-local,
/// loopback and multicast ...
const GLOBAL_V6: Ipv6Net = Ipv6Net::new_assert(Ipv6Addr::new(0x2000, 0, 0, 0, 0, 0, 0, 0), 3);
/// ... but for the blocks that carry IPv4 inside (Teredo, 6to4), as the sidecar's guard refuses.
const NOT_PUBLIC_V6: [Ipv6Net; 2] = [
    Ipv6Net::new_assert(Ipv6Addr::new(0x2001, 0, 0, 0, 0, 0, 0, 0), 32),
    Ipv6Net::new_assert(Ipv6Addr::new(0x2002, 0, 0, 0, 0, 0, 0, 0), 16),
];

/// The address families the environment's policies write: those the cluster serves (IPv6
/// only when the catalogue allows it too).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Families {
    /// IPv4 blocks are written.
    pub v4: bool,
    /// IPv6 blocks are written.
    pub v6: bool,
}

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

/// The environment's five policies, in the order they are applied. `api_server`: the API
/// server's addresses (its Service's and its own) the sidecar's pod may reach, for the
/// containment keeper in it; empty, none.
pub fn render(
    names: &Names,
    resolver: &ClusterResolver,
    families: Families,
    api_server: &[SocketAddr],
) -> Vec<NetworkPolicy> {
    let services = pods(network::SERVICE);
    let sidecar = pods(network::SIDECAR);
    let sidecar_ports = sidecar_ports();
    let outside = public_blocks(families);
    let mut sidecar_egress = Vec::with_capacity(3);
    if !outside.is_empty() {
        sidecar_egress.push(NetworkPolicyEgressRule {
            to: Some(outside.iter().map(|net| block(*net)).collect()),
            ports: None,
        });
    }
    sidecar_egress.push(NetworkPolicyEgressRule {
        to: Some(vec![services.clone()]),
        ports: None,
    });
    if let Some(peers) = resolver_peers(resolver) {
        sidecar_egress.push(NetworkPolicyEgressRule {
            to: Some(peers),
            ports: Some(dns_ports()),
        });
    }
    // Each address on its own port, so no address is open on another's.
    let served = |addr: &&SocketAddr| {
        if addr.is_ipv4() {
            families.v4
        } else {
            families.v6
        }
    };
    sidecar_egress.extend(
        api_server
            .iter()
            .filter(served)
            .map(|addr| NetworkPolicyEgressRule {
                to: Some(vec![block(IpNet::from(addr.ip()))]),
                ports: Some(vec![tcp_or_udp("TCP", addr.port())]),
            }),
    );
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

/// The public addresses of `families`, as disjoint blocks in address order: none is a `/0`.
pub fn public_blocks(families: Families) -> Vec<IpNet> {
    let mut blocks = Vec::new();
    if families.v4 {
        let all = Ipv4Net::new_assert(Ipv4Addr::UNSPECIFIED, 0);
        let not_public = NOT_PUBLIC_V4.map(IpNet::V4);
        blocks.extend(subtract(IpNet::V4(all), &not_public));
    }
    if families.v6 {
        let not_public = NOT_PUBLIC_V6.map(IpNet::V6);
        blocks.extend(subtract(IpNet::V6(GLOBAL_V6), &not_public));
    }
    blocks
}

/// `net` minus every block of `except`, as disjoint blocks covering exactly the rest.
fn subtract(net: IpNet, except: &[IpNet]) -> Vec<IpNet> {
    // Two CIDR blocks overlap only when one contains the other.
    if except.iter().any(|e| e.contains(&net)) {
        return Vec::new();
    }
    if !except.iter().any(|e| net.contains(e)) {
        return vec![net];
    }
    // An exception lies strictly inside `net`, so `net` is wider than one address and splits.
    net.subnets(net.prefix_len() + 1)
        .into_iter()
        .flatten()
        .flat_map(|half| subtract(half, except))
        .collect()
}

fn block(net: IpNet) -> NetworkPolicyPeer {
    NetworkPolicyPeer {
        ip_block: Some(IPBlock {
            cidr: net.to_string(),
            except: None,
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
        ClusterResolver::Addresses(addrs) if !addrs.is_empty() => {
            Some(addrs.iter().map(|ip| block(IpNet::from(*ip))).collect())
        }
        ClusterResolver::Addresses(_) | ClusterResolver::Unknown => None,
    }
}

/// A transport protocol of a listener.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transport {
    /// TCP.
    Tcp,
    /// UDP.
    Udp,
}

/// The sidecar's ports a service may reach through these policies: its listeners, the
/// containment watchers' report listener, and the fence witness (which only the pod's own
/// fence refuses, [`fence_allows`]).
pub fn policy_allows() -> Vec<(Transport, u16)> {
    let mut ports = sidecar_listeners();
    ports.extend([
        (Transport::Tcp, Containment::REPORT_PORT),
        (Transport::Tcp, Containment::FENCE_WITNESS_PORT),
    ]);
    ports
}

/// The sidecar's ports a service pod's own fence lets out: its listeners, the report listener,
/// and the policy witness (which only these policies refuse, [`policy_allows`]). Each layer
/// refuses one witness the other allows, so a watcher tells which layer it lost.
pub fn fence_allows() -> Vec<(Transport, u16)> {
    let mut ports = sidecar_listeners();
    ports.extend([
        (Transport::Tcp, Containment::REPORT_PORT),
        (Transport::Tcp, Containment::POLICY_WITNESS_PORT),
    ]);
    ports
}

/// The sidecar's listeners a service may reach: explicit proxy, transparent HTTP and TLS,
/// SMTP, and DNS over UDP and TCP. Both layers allow them.
pub fn sidecar_listeners() -> Vec<(Transport, u16)> {
    let mut listeners: Vec<(Transport, u16)> = [ProxyListener::DEFAULT_PORT]
        .into_iter()
        .chain(TRANSPARENT_PORTS)
        .chain(SmtpListener::DEFAULT_PORTS)
        .map(|port| (Transport::Tcp, port))
        .collect();
    listeners.extend([(Transport::Udp, DNS_PORT), (Transport::Tcp, DNS_PORT)]);
    listeners
}

fn sidecar_ports() -> Vec<NetworkPolicyPort> {
    policy_allows()
        .into_iter()
        .map(|(transport, port)| match transport {
            Transport::Tcp => tcp_or_udp("TCP", port),
            Transport::Udp => tcp_or_udp("UDP", port),
        })
        .collect()
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::env_id::EnvId;
    use crate::runtime::kubernetes::names::DEFAULT_PREFIX;

    const IPV4: Families = Families {
        v4: true,
        v6: false,
    };
    const IPV6: Families = Families {
        v4: false,
        v6: true,
    };
    const DUAL: Families = Families { v4: true, v6: true };

    fn rendered(families: Families) -> Vec<NetworkPolicy> {
        let names = Names::new(DEFAULT_PREFIX, &EnvId::parse("pr-42").expect("id"));
        let resolver = ClusterResolver::Addresses(vec!["10.96.0.10".parse().expect("ip")]);
        render(&names, &resolver, families, &API_SERVER)
    }

    /// The API server's Service address and its own, as the keeper reaches them.
    const API_SERVER: [SocketAddr; 2] = [
        SocketAddr::new(IpAddr::V4(Ipv4Addr::new(10, 96, 0, 1)), 443),
        SocketAddr::new(IpAddr::V4(Ipv4Addr::new(10, 250, 0, 1)), 6443),
    ];

    /// Every ipBlock, endPort and port of `policies`.
    fn blocks(policies: &[NetworkPolicy]) -> Vec<IPBlock> {
        let specs = policies.iter().filter_map(|p| p.spec.as_ref());
        let egress = specs.clone().flat_map(|s| s.egress.iter().flatten());
        let ingress = specs.flat_map(|s| s.ingress.iter().flatten());
        egress
            .flat_map(|r| r.to.iter().flatten())
            .chain(ingress.flat_map(|r| r.from.iter().flatten()))
            .filter_map(|peer| peer.ip_block.clone())
            .collect()
    }

    fn ports(policies: &[NetworkPolicy]) -> Vec<NetworkPolicyPort> {
        let specs = policies.iter().filter_map(|p| p.spec.as_ref());
        let egress = specs.clone().flat_map(|s| s.egress.iter().flatten());
        let ingress = specs.flat_map(|s| s.ingress.iter().flatten());
        egress
            .flat_map(|r| r.ports.iter().flatten())
            .chain(ingress.flat_map(|r| r.ports.iter().flatten()))
            .cloned()
            .collect()
    }

    // The guide's list of constructs some enforcer reads other than written
    // (docs/kubernetes-runtime.md, "Enforcers"), one test each.

    #[test]
    fn no_block_is_a_slash_zero() {
        for families in [IPV4, IPV6, DUAL] {
            let all = blocks(&rendered(families));
            assert!(!all.is_empty(), "the sidecar reaches the outside");
            for block in all {
                let net: IpNet = block.cidr.parse().expect("a CIDR");
                assert_ne!(net.prefix_len(), 0, "{}", block.cidr);
            }
        }
    }

    #[test]
    fn no_block_has_an_except() {
        for families in [IPV4, IPV6, DUAL] {
            for block in blocks(&rendered(families)) {
                assert_eq!(block.except, None, "{}", block.cidr);
            }
        }
    }

    #[test]
    fn an_ipv4_cluster_gets_no_ipv6_block_and_an_ipv6_one_no_ipv4_block() {
        let v6 = |b: &IPBlock| b.cidr.contains(':');
        assert!(!blocks(&rendered(IPV4)).iter().any(v6));
        let only_v6 = blocks(&rendered(IPV6));
        // The resolver's own address is the one IPv4 block, written as found.
        assert_eq!(only_v6.iter().filter(|b| !v6(b)).count(), 1);
        assert!(blocks(&rendered(DUAL)).iter().any(v6));
    }

    #[test]
    fn no_port_is_named_or_a_range() {
        for port in ports(&rendered(DUAL)) {
            assert_eq!(port.end_port, None);
            assert!(matches!(port.port, Some(IntOrString::Int(_))), "{port:?}");
        }
    }

    #[test]
    fn no_peer_mixes_a_block_with_a_selector() {
        for policy in rendered(DUAL) {
            let spec = policy.spec.expect("spec");
            let peers = spec
                .egress
                .iter()
                .flatten()
                .flat_map(|r| r.to.iter().flatten())
                .chain(
                    spec.ingress
                        .iter()
                        .flatten()
                        .flat_map(|r| r.from.iter().flatten()),
                );
            for peer in peers {
                let selects = peer.pod_selector.is_some() || peer.namespace_selector.is_some();
                assert!(!(selects && peer.ip_block.is_some()), "{peer:?}");
            }
        }
    }

    fn reaches(nets: &[IpNet], ip: &str) -> bool {
        let ip: IpAddr = ip.parse().expect("ip");
        nets.iter().any(|n| n.contains(&ip))
    }

    #[test]
    fn the_public_blocks_cover_the_public_addresses_and_nothing_else() {
        let nets = public_blocks(DUAL);
        for public in [
            "1.1.1.1",
            "8.8.8.8",
            "198.51.100.7",
            "203.0.113.200",
            "2606:4700::1111",
        ] {
            assert!(reaches(&nets, public), "{public}");
        }
        for private in [
            "0.1.2.3",
            "10.0.0.1",
            "100.64.0.1",
            "127.0.0.1",
            "169.254.169.254",
            "172.16.5.4",
            "192.168.1.1",
            "224.0.0.251",
            "255.255.255.255",
            "::1",
            "::ffff:10.0.0.1",
            "fe80::1",
            "fd00::1",
            "ff02::1",
            "2001::1",
            "2002:a00:1::1",
        ] {
            assert!(!reaches(&nets, private), "{private}");
        }
        // Disjoint, and few enough to read.
        for (i, a) in nets.iter().enumerate() {
            for b in &nets[i + 1..] {
                assert!(!a.contains(b) && !b.contains(a), "{a} and {b}");
            }
        }
        assert!(nets.len() < 100, "{}", nets.len());
    }

    #[test]
    fn each_layer_refuses_the_witness_the_other_allows_and_both_let_reports_through() {
        let tcp = |port| (Transport::Tcp, port);
        let (policy, fence) = (policy_allows(), fence_allows());
        for both in sidecar_listeners()
            .into_iter()
            .chain([tcp(Containment::REPORT_PORT)])
        {
            assert!(policy.contains(&both) && fence.contains(&both), "{both:?}");
        }
        assert!(fence.contains(&tcp(Containment::POLICY_WITNESS_PORT)));
        assert!(!policy.contains(&tcp(Containment::POLICY_WITNESS_PORT)));
        assert!(policy.contains(&tcp(Containment::FENCE_WITNESS_PORT)));
        assert!(!fence.contains(&tcp(Containment::FENCE_WITNESS_PORT)));
    }
}
