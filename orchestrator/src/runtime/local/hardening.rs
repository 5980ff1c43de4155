//! The confinement every container of the environment is made with.
//!
//! None of it rests on the host's settings: each part is a property of the container itself.
//!
//! - No process in any container can gain privileges (`no-new-privileges`).
//! - Services and their migrations hold no capability but those the manifest names (never
//!   `NET_RAW`, so no raw or packet socket: a service cannot build a frame that skips its
//!   routes), and have IPv6 off in their network namespace unless the catalogue allows IPv6
//!   (so no link-local address reaches the host's bridge, and no IPv6 packet of theirs can be
//!   routed on by a host that forwards IPv6). They are held to the manifest's `resources`, as
//!   on a cluster: CPU as nano-cores, memory with no swap beyond it (a pod has none either).
//! - The containers the host reaches (the sidecar, for its admin API, and the forwarders) hold
//!   no capability but `NET_BIND_SERVICE`, do not forward packets in their own namespaces, and
//!   publish their one port on 127.0.0.1 only, at a port the engine picks.

use std::collections::HashMap;

use af_policy::manifest::{Capability, Limits};
use bollard::models::{HostConfig, PortBinding};

/// Bumped whenever this confinement changes: it is part of every container's digest, so the
/// next `af up` replaces containers made under an older one.
pub const REVISION: &str = "2";

/// The sysctls that keep a container from routing packets between its networks.
const NO_FORWARDING: [(&str, &str); 3] = [
    ("net.ipv4.ip_forward", "0"),
    ("net.ipv6.conf.all.forwarding", "0"),
    ("net.ipv6.conf.default.forwarding", "0"),
];

/// The sysctls that turn IPv6 off on every interface of a container, present and future.
const NO_IPV6: [(&str, &str); 2] = [
    ("net.ipv6.conf.all.disable_ipv6", "1"),
    ("net.ipv6.conf.default.disable_ipv6", "1"),
];

/// How a service (or its migration) is confined.
#[derive(Debug, Clone, Copy)]
pub struct ServiceConfinement<'a> {
    /// The capabilities the manifest gives back (already checked by `af_policy`).
    pub capabilities: &'a [Capability],
    /// Whether the catalogue allows IPv6 (`egress.allow_ipv6`); IPv6 is off otherwise.
    pub ipv6: bool,
    /// The manifest's CPU and memory limits.
    pub limits: Limits,
}

/// A service's host configuration on `network`: every capability dropped but those named,
/// no privilege gain, IPv6 off unless allowed, its limits.
pub fn service_host_config(network: &str, confinement: ServiceConfinement<'_>) -> HostConfig {
    let sysctls = (!confinement.ipv6).then(|| sysctls(&NO_IPV6));
    let memory = confinement.limits.memory_bytes.map(docker_quantity);
    HostConfig {
        nano_cpus: confinement
            .limits
            .cpu_millicores
            .map(|m| docker_quantity(m.saturating_mul(1_000_000))),
        memory,
        // Swap is what exceeds `memory` here: none, so the limit is the whole of it.
        memory_swap: memory,
        cap_drop: Some(vec!["ALL".to_owned()]),
        cap_add: Some(
            confinement
                .capabilities
                .iter()
                .map(|c| c.name().to_owned())
                .collect(),
        ),
        sysctls,
        ..base(network)
    }
}

/// The host configuration of a container the host reaches on `port` (as `"9901/tcp"`):
/// published on 127.0.0.1 at a port the engine picks, every capability dropped but
/// `NET_BIND_SERVICE`, no forwarding in its namespace.
pub fn published_host_config(network: &str, port: &str) -> HostConfig {
    HostConfig {
        port_bindings: Some(HashMap::from([(
            port.to_owned(),
            Some(vec![PortBinding {
                host_ip: Some("127.0.0.1".to_owned()),
                host_port: Some(String::new()),
            }]),
        )])),
        cap_drop: Some(vec!["ALL".to_owned()]),
        cap_add: Some(vec!["NET_BIND_SERVICE".to_owned()]),
        sysctls: Some(sysctls(&NO_FORWARDING)),
        ..base(network)
    }
}

/// On `network`, no process can gain privileges.
fn base(network: &str) -> HostConfig {
    HostConfig {
        network_mode: Some(network.to_owned()),
        security_opt: Some(vec!["no-new-privileges".to_owned()]),
        ..Default::default()
    }
}

/// A quantity as Docker holds it (`af_policy` bounds every limit within it).
fn docker_quantity(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

fn sysctls(pairs: &[(&str, &str)]) -> HashMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_service_keeps_only_the_capabilities_it_names_and_has_no_ipv6() {
        let caps = [Capability::Chown, Capability::Setuid];
        let c = service_host_config(
            "net",
            ServiceConfinement {
                capabilities: &caps,
                ipv6: false,
                limits: Limits::default(),
            },
        );
        assert_eq!(c.cap_drop, Some(vec!["ALL".to_owned()]));
        assert_eq!(
            c.cap_add,
            Some(vec!["CHOWN".to_owned(), "SETUID".to_owned()])
        );
        assert_eq!(c.security_opt, Some(vec!["no-new-privileges".to_owned()]));
        let sysctls = c.sysctls.unwrap_or_default();
        assert_eq!(sysctls["net.ipv6.conf.all.disable_ipv6"], "1");
        assert_eq!(sysctls["net.ipv6.conf.default.disable_ipv6"], "1");
        assert_eq!(c.port_bindings, None, "a service is never published itself");
        assert_eq!((c.memory, c.memory_swap, c.nano_cpus), (None, None, None));
    }

    #[test]
    fn a_service_keeps_ipv6_only_when_the_catalogue_allows_it() {
        let c = service_host_config(
            "net",
            ServiceConfinement {
                capabilities: &[],
                ipv6: true,
                limits: Limits::default(),
            },
        );
        assert_eq!(c.sysctls, None);
        assert_eq!(c.cap_add, Some(Vec::new()), "still no capability at all");
    }

    #[test]
    fn a_service_is_held_to_its_limits_with_no_swap_beyond_them() {
        let c = service_host_config(
            "net",
            ServiceConfinement {
                capabilities: &[],
                ipv6: false,
                limits: Limits {
                    cpu_millicores: Some(500),
                    memory_bytes: Some(256 << 20),
                },
            },
        );
        assert_eq!(c.nano_cpus, Some(500_000_000), "half a core");
        assert_eq!(c.memory, Some(256 << 20));
        assert_eq!(c.memory_swap, Some(256 << 20), "no swap on top");
        let cpu_only = service_host_config(
            "net",
            ServiceConfinement {
                capabilities: &[],
                ipv6: false,
                limits: Limits {
                    cpu_millicores: Some(2000),
                    memory_bytes: None,
                },
            },
        );
        assert_eq!(cpu_only.nano_cpus, Some(2_000_000_000));
        assert_eq!((cpu_only.memory, cpu_only.memory_swap), (None, None));
    }

    #[test]
    fn a_published_container_forwards_nothing_and_binds_loopback_only() {
        let c = published_host_config("edge", "9901/tcp");
        let sysctls = c.sysctls.unwrap_or_default();
        assert_eq!(sysctls["net.ipv4.ip_forward"], "0");
        assert_eq!(sysctls["net.ipv6.conf.all.forwarding"], "0");
        assert_eq!(c.cap_add, Some(vec!["NET_BIND_SERVICE".to_owned()]));
        let binding = &c.port_bindings.unwrap_or_default()["9901/tcp"];
        assert_eq!(
            binding.as_ref().and_then(|b| b[0].host_ip.as_deref()),
            Some("127.0.0.1")
        );
    }
}
