//! The confinement every container of the environment is made with.
//!
//! No process in any of them can gain privileges (`no-new-privileges`). The containers the host
//! reaches (the sidecar, for its admin API, and the forwarders) also hold no capability but
//! `NET_BIND_SERVICE`, and publish their one port on 127.0.0.1 only, at a port the engine picks.

use std::collections::HashMap;

use bollard::models::{HostConfig, PortBinding};

/// A host configuration on `network` in which no process can gain privileges.
pub fn host_config(network: &str) -> HostConfig {
    HostConfig {
        network_mode: Some(network.to_owned()),
        security_opt: Some(vec!["no-new-privileges".to_owned()]),
        ..Default::default()
    }
}

/// [`host_config`] for a container the host reaches on `port` (as `"9901/tcp"`): published on
/// 127.0.0.1 at a port the engine picks, every capability dropped but `NET_BIND_SERVICE`.
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
        ..host_config(network)
    }
}
