//! The rules every confined pod runs under (services, migrations, cron jobs, and the
//! containment probe, which must run under exactly these): no service account token, no
//! service links, every capability dropped, no privilege escalation, the runtime's default
//! seccomp profile, none of the host's namespaces, and `dnsPolicy: None` with one nameserver
//! and `ndots: 1`.

use std::net::IpAddr;

use af_policy::manifest::Capability;
use k8s_openapi::api::core::v1::{
    Capabilities, Container, PodDNSConfig, PodDNSConfigOption, PodSecurityContext, PodSpec,
    SeccompProfile, SecurityContext,
};

/// A confined pod's spec around `containers`, resolving through `nameserver` only.
pub fn pod_spec(containers: Vec<Container>, nameserver: IpAddr) -> PodSpec {
    PodSpec {
        containers: containers.into_iter().map(confine).collect(),
        // A pod that can reach the API server with a token could delete its own policies.
        automount_service_account_token: Some(false),
        enable_service_links: Some(false),
        host_network: Some(false),
        host_pid: Some(false),
        host_ipc: Some(false),
        dns_policy: Some("None".to_owned()),
        dns_config: Some(PodDNSConfig {
            nameservers: Some(vec![nameserver.to_string()]),
            options: Some(vec![PodDNSConfigOption {
                name: Some("ndots".to_owned()),
                value: Some("1".to_owned()),
            }]),
            searches: None,
        }),
        security_context: Some(PodSecurityContext {
            seccomp_profile: Some(SeccompProfile {
                type_: "RuntimeDefault".to_owned(),
                localhost_profile: None,
            }),
            ..PodSecurityContext::default()
        }),
        ..PodSpec::default()
    }
}

/// Give the pod's own containers (not its gate) the capabilities the manifest names, already
/// checked by `af_policy` (never `NET_RAW`, `NET_ADMIN` or `SYS_ADMIN`).
pub fn give_back(pod: &mut PodSpec, capabilities: &[Capability]) {
    if capabilities.is_empty() {
        return;
    }
    let names: Vec<String> = capabilities.iter().map(|c| c.name().to_owned()).collect();
    for container in &mut pod.containers {
        if let Some(caps) = container
            .security_context
            .as_mut()
            .and_then(|s| s.capabilities.as_mut())
        {
            caps.add = Some(names.clone());
        }
    }
}

/// `container` with every capability dropped and no way to gain privileges.
pub fn confine(container: Container) -> Container {
    Container {
        security_context: Some(SecurityContext {
            allow_privilege_escalation: Some(false),
            privileged: Some(false),
            capabilities: Some(Capabilities {
                drop: Some(vec!["ALL".to_owned()]),
                add: None,
            }),
            ..SecurityContext::default()
        }),
        ..container
    }
}
