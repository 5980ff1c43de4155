//! The environment's networks.
//!
//! - internal: the services' network. `internal: true` (no route out) and
//!   `inhibit_ipv4` (the host takes no address on it, so the gateway address is not the host
//!   and a service listening on the host cannot be reached through it).
//! - edge: the sidecar's way out, and where its admin API listens (published on 127.0.0.1).
//! - publish: the forwarders' network, where web services are published on 127.0.0.1.
//!
//! The internal and edge subnets come from the address pool (`AF_ADDRESS_POOL`, default
//! `10.213.0.0/16`), one /24 each, so the sidecar's addresses are fixed before it starts.

use std::collections::HashMap;
use std::net::Ipv4Addr;

use bollard::Docker;
use bollard::models::{Ipam, IpamConfig, NetworkCreateRequest};
use bollard::query_parameters::ListNetworksOptionsBuilder;
use ipnet::Ipv4Net;

use super::labels::{Names, Owner, owner};
use crate::plan::short_digest;
use crate::runtime::RuntimeError;
use crate::runtime::docker_client::is_not_found;

/// The default pool environments' subnets come from.
pub const DEFAULT_POOL: &str = "10.213.0.0/16";

/// A network of the environment, as made or found.
#[derive(Debug, Clone)]
pub struct Net {
    /// Its name.
    pub name: String,
    /// Its subnet, when it has a fixed one.
    pub subnet: Option<Ipv4Net>,
}

impl Net {
    /// The address the sidecar takes on it (the subnet's second address).
    pub fn sidecar_addr(&self) -> Option<Ipv4Addr> {
        self.subnet.map(|s| nth(s, 2))
    }
}

fn nth(net: Ipv4Net, n: u32) -> Ipv4Addr {
    Ipv4Addr::from(u32::from(net.network()).saturating_add(n))
}

/// Every IPv4 subnet Docker already uses.
pub async fn used_subnets(docker: &Docker) -> Result<Vec<Ipv4Net>, RuntimeError> {
    let nets = docker
        .list_networks(None)
        .await
        .map_err(|e| RuntimeError::engine("list networks", e))?;
    Ok(nets
        .iter()
        .filter_map(|n| n.ipam.as_ref()?.config.as_ref())
        .flatten()
        .filter_map(|c| c.subnet.as_deref()?.parse::<Ipv4Net>().ok())
        .collect())
}

/// The /24s of `pool` that no Docker network overlaps, in probing order for `seed`.
pub fn free_subnets(pool: Ipv4Net, used: &[Ipv4Net], seed: &str) -> Vec<Ipv4Net> {
    let Ok(all) = pool.subnets(24.max(pool.prefix_len())) else {
        return Vec::new();
    };
    let all: Vec<Ipv4Net> = all.collect();
    if all.is_empty() {
        return Vec::new();
    }
    let start =
        usize::from_str_radix(&short_digest(seed.as_bytes())[..6], 16).unwrap_or(0) % all.len();
    (0..all.len())
        .map(|i| all[(start + i) % all.len()])
        .filter(|s| {
            !used
                .iter()
                .any(|u| u.contains(&s.network()) || s.contains(&u.network()))
        })
        .collect()
}

/// Ensure a network exists: reuse ours, refuse somebody else's, otherwise create it. With
/// `fixed`, the subnet is taken from the pool.
pub async fn ensure(
    docker: &Docker,
    names: &Names,
    name: &str,
    net_kind: &str,
    internal: bool,
    fixed: Option<Ipv4Net>,
    used: &mut Vec<Ipv4Net>,
) -> Result<Net, RuntimeError> {
    if let Some(existing) = inspect(docker, names, name).await? {
        return Ok(existing);
    }
    let mut candidates = match fixed {
        Some(pool) => free_subnets(pool, used, name),
        None => Vec::new(),
    };
    if fixed.is_some() && candidates.is_empty() {
        return Err(RuntimeError::engine(
            format!("create network {name}"),
            "the address pool has no free /24 left (set AF_ADDRESS_POOL or run `af doctor`)",
        ));
    }
    loop {
        let subnet = if fixed.is_some() {
            Some(candidates.remove(0))
        } else {
            None
        };
        let mut options = HashMap::new();
        if internal {
            options.insert(
                "com.docker.network.bridge.inhibit_ipv4".to_owned(),
                "true".to_owned(),
            );
        }
        let ipam = subnet.map(|s| Ipam {
            driver: Some("default".to_owned()),
            config: Some(vec![IpamConfig {
                subnet: Some(s.to_string()),
                gateway: Some(nth(s, 1).to_string()),
                // Dynamic addresses from the upper half; the sidecar's fixed one stays free.
                ip_range: Ipv4Net::new(nth(s, 128), 25).ok().map(|r| r.to_string()),
                auxiliary_addresses: None,
            }]),
            options: None,
        });
        let request = NetworkCreateRequest {
            name: name.to_owned(),
            driver: Some("bridge".to_owned()),
            internal: Some(internal),
            ipam,
            options: Some(options),
            labels: Some(names.labels(net_kind, "", "")),
            ..Default::default()
        };
        match docker.create_network(request).await {
            Ok(_) => {
                if let Some(s) = subnet {
                    used.push(s);
                }
                return Ok(Net {
                    name: name.to_owned(),
                    subnet,
                });
            }
            // Another process took the subnet between listing and creating: try the next.
            Err(e)
                if subnet.is_some()
                    && !candidates.is_empty()
                    && e.to_string().contains("overlap") =>
            {
                if let Some(s) = subnet {
                    used.push(s);
                }
            }
            Err(e) => return Err(RuntimeError::engine(format!("create network {name}"), e)),
        }
    }
}

/// Our network of that name, `None` if absent, `NotOurs` if somebody else's.
pub async fn inspect(
    docker: &Docker,
    names: &Names,
    name: &str,
) -> Result<Option<Net>, RuntimeError> {
    match docker.inspect_network(name, None).await {
        Ok(net) => {
            if owner(net.labels.as_ref(), names.env()) != Owner::This {
                return Err(RuntimeError::NotOurs {
                    class: "network",
                    name: name.to_owned(),
                });
            }
            let subnet = net
                .ipam
                .as_ref()
                .and_then(|i| i.config.as_ref())
                .and_then(|c| c.first())
                .and_then(|c| c.subnet.as_deref())
                .and_then(|s| s.parse().ok());
            Ok(Some(Net {
                name: name.to_owned(),
                subnet,
            }))
        }
        Err(e) if is_not_found(&e) => Ok(None),
        Err(e) => Err(RuntimeError::engine(format!("inspect network {name}"), e)),
    }
}

/// Names of every network carrying the environment's labels.
pub async fn owned(docker: &Docker, names: &Names) -> Result<Vec<(String, String)>, RuntimeError> {
    let options = ListNetworksOptionsBuilder::default()
        .filters(&names.filter())
        .build();
    let nets = docker
        .list_networks(Some(options))
        .await
        .map_err(|e| RuntimeError::engine("list networks", e))?;
    Ok(nets
        .into_iter()
        .filter_map(|n| {
            let k = n
                .labels
                .as_ref()
                .and_then(|l| l.get(crate::runtime::labels::KIND))
                .cloned()
                .unwrap_or_default();
            Some((n.name?, k))
        })
        .collect())
}

/// Networks named like this environment's but not carrying its label.
pub async fn foreign(docker: &Docker, names: &Names) -> Result<Vec<String>, RuntimeError> {
    let mut found = Vec::new();
    for name in [names.internal(), names.edge(), names.publish()] {
        if let Err(RuntimeError::NotOurs { name, .. }) = inspect(docker, names, &name).await {
            found.push(name);
        }
    }
    Ok(found)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn free_subnets_skip_overlaps_and_start_at_the_seed() {
        let pool: Ipv4Net = "10.213.0.0/16".parse().expect("net");
        let used: Vec<Ipv4Net> = vec![
            "10.213.0.0/20".parse().expect("net"),
            "10.0.0.0/8".parse().expect("net"),
        ];
        assert!(free_subnets(pool, &used, "a").is_empty());
        let used: Vec<Ipv4Net> = vec!["10.213.0.0/20".parse().expect("net")];
        let free = free_subnets(pool, &used, "a");
        assert_eq!(free.len(), 256 - 16);
        assert!(
            free.iter()
                .all(|s| s.prefix_len() == 24 && !used[0].contains(&s.network()))
        );
        assert_eq!(free_subnets(pool, &used, "a"), free, "stable for a seed");
    }
}
