//! What af asks the cluster about itself before it makes anything: whether it serves the
//! NetworkPolicy API, where its resolver is, and the API server's address inside the cluster.
//! Anything that differs between Kubernetes versions is asked here, never assumed.

use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr};

use k8s_openapi::api::core::v1::{Endpoints, Namespace, Node, Service};
use kube::Client;
use kube::api::Api;

use super::cluster::{is_status, refused};
use super::policies::{ClusterResolver, Families};
use crate::runtime::RuntimeError;

/// The label every namespace carries from Kubernetes 1.21 on: its own name.
pub const NAMESPACE_NAME_LABEL: &str = "kubernetes.io/metadata.name";
/// Where the cluster resolver's Service conventionally is.
const RESOLVER: (&str, &str) = ("kube-system", "kube-dns");
/// The Service every cluster has in front of its API server.
const API_SERVER: (&str, &str) = ("default", "kubernetes");

/// Refuse (AF-RUN-044) a cluster that does not serve `networking.k8s.io/v1` NetworkPolicy:
/// nothing could be contained on it.
pub async fn require_network_policy(client: &Client) -> Result<(), RuntimeError> {
    let served = match client
        .list_api_group_resources("networking.k8s.io/v1")
        .await
    {
        Ok(list) => list.resources.iter().any(|r| r.name == "networkpolicies"),
        Err(e) if is_status(&e, 404) => false,
        Err(e) => return Err(refused("list what networking.k8s.io/v1 serves")(e)),
    };
    if served {
        Ok(())
    } else {
        Err(RuntimeError::Unsupported(
            "This cluster does not serve networking.k8s.io/v1 NetworkPolicy, so no environment can be contained on it; nothing was created.".to_owned(),
        ))
    }
}

/// The cluster resolver the sidecar may ask: `AF_KUBE_RESOLVER`'s addresses when set, else
/// the pods behind `kube-system/kube-dns` when its namespace can be selected by name (1.21
/// and later), else that Service's endpoint addresses; [`ClusterResolver::Unknown`] when
/// there is none or it cannot be read.
pub async fn cluster_resolver(
    client: &Client,
    configured: Option<&[IpAddr]>,
) -> Result<ClusterResolver, RuntimeError> {
    if let Some(addrs) = configured {
        return Ok(ClusterResolver::Addresses(addrs.to_vec()));
    }
    let (namespace, name) = RESOLVER;
    let services: Api<Service> = Api::namespaced(client.clone(), namespace);
    let Some(service) = readable(services.get_opt(name).await, "read kube-system/kube-dns")? else {
        return Ok(ClusterResolver::Unknown);
    };
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let selectable = readable(namespaces.get_opt(namespace).await, "read kube-system")?
        .and_then(|ns| ns.metadata.labels)
        .is_some_and(|l| l.get(NAMESPACE_NAME_LABEL).map(String::as_str) == Some(namespace));
    let selector = service.spec.and_then(|s| s.selector).unwrap_or_default();
    if selectable && !selector.is_empty() {
        return Ok(ClusterResolver::Pods {
            namespace: BTreeMap::from([(NAMESPACE_NAME_LABEL.to_owned(), namespace.to_owned())]),
            pods: selector,
        });
    }
    let endpoints: Api<Endpoints> = Api::namespaced(client.clone(), namespace);
    let addrs: Vec<IpAddr> = readable(endpoints.get_opt(name).await, "read kube-dns endpoints")?
        .and_then(|e| e.subsets)
        .unwrap_or_default()
        .into_iter()
        .flat_map(|s| s.addresses.unwrap_or_default())
        .filter_map(|a| a.ip.parse().ok())
        .collect();
    Ok(if addrs.is_empty() {
        ClusterResolver::Unknown
    } else {
        ClusterResolver::Addresses(addrs)
    })
}

/// The cluster resolver's Service address (`kube-system/kube-dns` on port 53), if there is one
/// this user may read.
pub async fn resolver_service(client: &Client) -> Result<Option<SocketAddr>, RuntimeError> {
    let (namespace, name) = RESOLVER;
    let services: Api<Service> = Api::namespaced(client.clone(), namespace);
    Ok(
        readable(services.get_opt(name).await, "read kube-system/kube-dns")?
            .and_then(|s| s.spec)
            .and_then(|s| s.cluster_ip)
            .and_then(|ip| ip.parse::<IpAddr>().ok())
            .map(|ip| SocketAddr::new(ip, 53)),
    )
}

/// The API server's addresses as a pod sees them: the `default/kubernetes` Service's cluster
/// addresses (both families on a dual-stack cluster) on its port; empty if it cannot be read.
pub async fn api_server(client: &Client) -> Result<Vec<SocketAddr>, RuntimeError> {
    let (namespace, name) = API_SERVER;
    let services: Api<Service> = Api::namespaced(client.clone(), namespace);
    let Some(spec) =
        readable(services.get_opt(name).await, "read default/kubernetes")?.and_then(|s| s.spec)
    else {
        return Ok(Vec::new());
    };
    let port = spec
        .ports
        .as_ref()
        .and_then(|p| p.first())
        .and_then(|p| u16::try_from(p.port).ok())
        .unwrap_or(443);
    let mut ips = spec.cluster_ips.unwrap_or_default();
    if ips.is_empty() {
        ips.extend(spec.cluster_ip);
    }
    Ok(ips
        .iter()
        .filter_map(|ip| ip.parse::<IpAddr>().ok())
        .map(|ip| SocketAddr::new(ip, port))
        .collect())
}

/// The API server's own addresses behind its Service (`default/kubernetes`'s endpoints, where
/// a pod's connection lands once the Service address is translated): what a policy letting a
/// pod reach the API server must name. Empty if they cannot be read.
pub async fn api_server_endpoints(client: &Client) -> Result<Vec<SocketAddr>, RuntimeError> {
    let (namespace, name) = API_SERVER;
    let endpoints: Api<Endpoints> = Api::namespaced(client.clone(), namespace);
    let found = readable(
        endpoints.get_opt(name).await,
        "read default/kubernetes's endpoints",
    )?;
    Ok(found
        .and_then(|e| e.subsets)
        .unwrap_or_default()
        .iter()
        .flat_map(|subset| {
            let ports: Vec<u16> = subset
                .ports
                .iter()
                .flatten()
                .filter_map(|p| u16::try_from(p.port).ok())
                .collect();
            subset
                .addresses
                .iter()
                .flatten()
                .filter_map(|a| a.ip.parse::<IpAddr>().ok())
                .flat_map(move |ip| {
                    ports
                        .clone()
                        .into_iter()
                        .map(move |port| SocketAddr::new(ip, port))
                })
                .collect::<Vec<_>>()
        })
        .collect())
}

/// The address families the cluster serves: those of the `default/kubernetes` Service
/// (`ipFamilies`, else its cluster addresses) and of the nodes' pod ranges where this user may
/// read nodes. IPv4 alone when none of these can be read.
pub async fn address_families(client: &Client) -> Result<Families, RuntimeError> {
    let (namespace, name) = API_SERVER;
    let services: Api<Service> = Api::namespaced(client.clone(), namespace);
    let mut found = Families {
        v4: false,
        v6: false,
    };
    let mut note = |family: Option<bool>| match family {
        Some(true) => found.v6 = true,
        Some(false) => found.v4 = true,
        None => {}
    };
    if let Some(spec) =
        readable(services.get_opt(name).await, "read default/kubernetes")?.and_then(|s| s.spec)
    {
        for family in spec.ip_families.iter().flatten() {
            note(match family.as_str() {
                "IPv4" => Some(false),
                "IPv6" => Some(true),
                _ => None,
            });
        }
        for ip in spec.cluster_ips.iter().flatten().chain(&spec.cluster_ip) {
            note(ip.parse::<IpAddr>().ok().map(|ip| ip.is_ipv6()));
        }
    }
    let nodes: Api<Node> = Api::all(client.clone());
    match nodes.list(&Default::default()).await {
        Ok(list) => {
            for spec in list.items.into_iter().filter_map(|n| n.spec) {
                for cidr in spec.pod_cidrs.iter().flatten().chain(&spec.pod_cidr) {
                    note(
                        cidr.parse::<ipnet::IpNet>()
                            .ok()
                            .map(|n| matches!(n, ipnet::IpNet::V6(_))),
                    );
                }
            }
        }
        Err(e) if is_status(&e, 403) => {}
        Err(e) => return Err(refused("list the cluster's nodes")(e)),
    }
    if !found.v4 && !found.v6 {
        found.v4 = true;
    }
    Ok(found)
}

/// A read that may be forbidden to a namespace-scoped user: forbidden reads as not there.
fn readable<T>(
    result: Result<Option<T>, kube::Error>,
    what: &str,
) -> Result<Option<T>, RuntimeError> {
    match result {
        Ok(found) => Ok(found),
        Err(e) if is_status(&e, 403) => Ok(None),
        Err(e) => Err(refused(what)(e)),
    }
}
