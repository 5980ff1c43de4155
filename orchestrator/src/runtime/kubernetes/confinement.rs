//! The rules every confined pod runs under (services, migrations, cron jobs, and the
//! containment probe, which must run under exactly these): no service account token, no
//! service links, every capability dropped, no privilege escalation, the runtime's default
//! seccomp profile, none of the host's namespaces, and `dnsPolicy: None` with one nameserver
//! and `ndots: 1`.

use std::net::IpAddr;

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

fn confine(container: Container) -> Container {
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
