//! The confinement every container of the environment is made with.
//!
//! None of it rests on the host's settings: each part is a property of the container itself.
//!
//! - No process in any container can gain privileges (`no-new-privileges`).
//! - Services and their migrations hold no capability but those the manifest names (never
//!   `NET_RAW`, so no raw or packet socket: a service cannot build a frame that skips its
//!   routes), and have IPv6 off in their network namespace unless the catalogue allows IPv6
//!   (so no link-local address reaches the host's bridge, and no IPv6 packet of theirs can be
//!   routed on by a host that forwards IPv6).
//! - The containers the host reaches (the sidecar, for its admin API, and the forwarders) hold
//!   no capability but `NET_BIND_SERVICE`, do not forward packets in their own namespaces, and
//!   publish their one port on 127.0.0.1 only, at a port the engine picks.

use std::collections::HashMap;

use af_policy::manifest::Capability;
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
}

/// A service's host configuration on `network`: every capability dropped but those named,
/// no privilege gain, IPv6 off unless allowed.
pub fn service_host_config(network: &str, confinement: ServiceConfinement<'_>) -> HostConfig {
    let sysctls = (!confinement.ipv6).then(|| sysctls(&NO_IPV6));
    HostConfig {
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
    }

    #[test]
    fn a_service_keeps_ipv6_only_when_the_catalogue_allows_it() {
        let c = service_host_config(
            "net",
            ServiceConfinement {
                capabilities: &[],
                ipv6: true,
            },
        );
        assert_eq!(c.sysctls, None);
        assert_eq!(c.cap_add, Some(Vec::new()), "still no capability at all");
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
