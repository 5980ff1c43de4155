//! Service containers, their migrations and their forwarders.
//!
//! A service sits on the internal network only, under its name as alias, with the sidecar as
//! its only DNS server and its proxy in the proxy variables ([`environment`]). Before it
//! starts, the CA files are written into it (`/etc/af/ca-bundle.pem`, `/etc/af/ca.pem`) and its
//! variables point at them; each system store its image has (read from the created container)
//! is rewritten as that store plus the environment CA; the environment's webhook secrets are
//! in its variables too. A web service is published on
//! 127.0.0.1 by a forwarder: a container on the internal and publish networks that relays one
//! port to that one service and dials nothing else, so it is not a route out.

use std::collections::HashMap;
use std::net::Ipv4Addr;

use bollard::Docker;
use bollard::models::{ContainerCreateBody, EndpointSettings, HostConfig, NetworkingConfig};
use futures_util::StreamExt;

use super::labels::{Names, kind};
use super::sidecar::connect;
use super::{containers, hardening};
use crate::plan::{EnvPlan, ServicePlan};
use crate::runtime::RuntimeError;
use crate::runtime::images::{self, FORWARD_BINARY, tar_of};
use crate::runtime::service_env::{Provisions, environment};
use crate::trust::store;
use crate::trust::{self, TrustFiles};

/// How a service container (or its migration) is made.
pub struct Spec<'a> {
    /// The plan.
    pub plan: &'a EnvPlan,
    /// The service.
    pub service: &'a ServicePlan,
    /// The service's image id.
    pub image: &'a str,
    /// The internal network.
    pub internal: &'a str,
    /// The sidecar's inside address.
    pub sidecar: Ipv4Addr,
    /// What every service is given.
    pub provisions: Provisions<'a>,
    /// The config digest label.
    pub digest: &'a str,
}

fn body(
    spec: &Spec<'_>,
    object_kind: &str,
    command: &[String],
    alias: bool,
) -> ContainerCreateBody {
    let s = spec.service;
    let host_config = HostConfig {
        dns: Some(vec![spec.sidecar.to_string()]),
        dns_search: Some(Vec::new()),
        ..hardening::service_host_config(
            spec.internal,
            hardening::ServiceConfinement {
                capabilities: &s.capabilities,
                ipv6: spec.plan.egress.allow_ipv6,
                limits: s.resources,
            },
        )
    };
    let endpoint = EndpointSettings {
        aliases: alias.then(|| vec![s.name.clone()]),
        ..Default::default()
    };
    ContainerCreateBody {
        hostname: Some(s.name.clone()),
        image: Some(spec.image.to_owned()),
        entrypoint: (!s.entrypoint.is_empty()).then(|| s.entrypoint.clone()),
        cmd: (!command.is_empty()).then(|| command.to_vec()),
        env: Some(environment(spec.plan, s, spec.sidecar, spec.provisions)),
        labels: Some(Names::new(&spec.plan.env).labels(object_kind, &s.name, spec.digest)),
        host_config: Some(host_config),
        networking_config: Some(NetworkingConfig {
            endpoints_config: Some(HashMap::from([(spec.internal.to_owned(), endpoint)])),
        }),
        ..Default::default()
    }
}

/// Create and start the service container.
pub async fn create(docker: &Docker, spec: &Spec<'_>) -> Result<(), RuntimeError> {
    let name = Names::new(&spec.plan.env).service(&spec.service.name);
    let body = body(spec, kind::SERVICE, &spec.service.command, true);
    create_and_start(docker, &name, body, spec.provisions.trust).await
}

/// Run the service's migration once, in its image and environment; never retried. A failed
/// migration's container is kept so its output can be read; a finished one is removed.
pub async fn migrate(docker: &Docker, spec: &Spec<'_>) -> Result<(), RuntimeError> {
    let names = Names::new(&spec.plan.env);
    let name = names.migrate(&spec.service.name);
    containers::remove(docker, &name).await?;
    let body = body(spec, kind::MIGRATE, &spec.service.migrate, false);
    create_and_start(docker, &name, body, spec.provisions.trust).await?;
    let mut wait = docker.wait_container(&name, None);
    let status = match wait.next().await {
        Some(Ok(r)) => r.status_code,
        // A non-zero exit arrives as an error carrying the code.
        Some(Err(bollard::errors::Error::DockerContainerWaitError { code, .. })) => code,
        Some(Err(e)) => return Err(RuntimeError::engine(format!("wait for {name}"), e)),
        None => -1,
    };
    if status != 0 {
        let tail = containers::tail(docker, &name, 20).await;
        return Err(RuntimeError::Migration {
            service: spec.service.name.clone(),
            status,
            tail,
        });
    }
    containers::remove(docker, &name).await
}

/// Create the container, write the CA files into it (and the CA into each system store its
/// image has), then start it (so no process of it runs without them).
async fn create_and_start(
    docker: &Docker,
    name: &str,
    body: ContainerCreateBody,
    trust: &TrustFiles,
) -> Result<(), RuntimeError> {
    containers::create(docker, name, body).await?;
    let found = images::stores_in(docker, name).await?;
    let stores = store::replacements(found, &trust.ca_pem);
    containers::upload(docker, name, ca_archive(trust, &stores)?, "the CA files").await?;
    containers::start(docker, name).await
}

/// The CA files, and each system store with the CA appended, as a tar archive to unpack at
/// `/`.
fn ca_archive(trust: &TrustFiles, stores: &[(&str, String)]) -> Result<Vec<u8>, RuntimeError> {
    let mut files = vec![
        (
            relative(trust::BUNDLE_PATH),
            trust.bundle_pem.as_bytes(),
            0o644,
        ),
        (relative(trust::CA_PATH), trust.ca_pem.as_bytes(), 0o644),
    ];
    files.extend(
        stores
            .iter()
            .map(|(path, pem)| (relative(path), pem.as_bytes(), 0o644)),
    );
    tar_of(&files).map_err(|e| RuntimeError::engine("pack the CA files", e))
}

/// An absolute path as a tar entry under `/`.
fn relative(path: &str) -> &str {
    path.trim_start_matches('/')
}

/// How a forwarder is made.
pub struct Forwarder<'a> {
    /// The sidecar image (it carries the forwarder binary).
    pub image: &'a str,
    /// The service.
    pub service: &'a str,
    /// The service's port.
    pub port: u16,
    /// The service's inside address.
    pub target: &'a str,
    /// The internal network.
    pub internal: &'a str,
    /// The publish network.
    pub publish: &'a str,
    /// The config digest label.
    pub digest: &'a str,
}

/// Create and start a forwarder publishing `service` on 127.0.0.1 (random port).
pub async fn forwarder(
    docker: &Docker,
    names: &Names,
    f: &Forwarder<'_>,
) -> Result<(), RuntimeError> {
    let name = names.forwarder(f.service);
    let port_key = format!("{}/tcp", f.port);
    let host_config = hardening::published_host_config(f.publish, &port_key);
    let body = ContainerCreateBody {
        image: Some(f.image.to_owned()),
        entrypoint: Some(vec![format!("/{FORWARD_BINARY}")]),
        cmd: Some(vec![
            "--listen".to_owned(),
            format!("0.0.0.0:{}", f.port),
            "--to".to_owned(),
            format!("{}:{}", f.target, f.port),
        ]),
        labels: Some(names.labels(kind::FORWARDER, f.service, f.digest)),
        exposed_ports: Some(vec![port_key]),
        host_config: Some(host_config),
        ..Default::default()
    };
    containers::create(docker, &name, body).await?;
    connect(docker, f.internal, &name, None).await?;
    containers::start(docker, &name).await
}

#[cfg(test)]
mod tests {
    use af_policy::egress::EgressSpec;

    use super::*;
    use crate::env_id::EnvId;
    use crate::plan::Kind;
    use crate::trust::EnvCa;
    use crate::webhook::WebhookSecrets;

    #[test]
    fn a_service_and_its_migration_are_held_to_the_same_limits() {
        let env = EnvId::parse("t").expect("id");
        let mut web = ServicePlan::new("web", Kind::Web, "/src/web");
        web.port = Some(8080);
        web.migrate = vec!["./migrate".to_owned()];
        web.resources.cpu_millicores = Some(250);
        web.resources.memory_bytes = Some(128 << 20);
        let plan = EnvPlan::new(env.clone(), "p", vec![web], EgressSpec::default()).expect("plan");
        let ca = EnvCa::generate(&env, std::time::SystemTime::now()).expect("a CA");
        let trust = TrustFiles::new("", &ca);
        let webhooks = WebhookSecrets::derive("0123456789abcdef0123456789abcdef");
        let spec = Spec {
            plan: &plan,
            service: &plan.services[0],
            image: "sha256:0123",
            internal: "af-t-internal",
            sidecar: Ipv4Addr::new(10, 213, 0, 2),
            provisions: Provisions {
                trust: &trust,
                webhooks: &webhooks,
            },
            digest: "d1g3st",
        };
        for (what, made) in [
            (
                "service",
                body(&spec, kind::SERVICE, &spec.service.command, true),
            ),
            (
                "migration",
                body(&spec, kind::MIGRATE, &spec.service.migrate, false),
            ),
        ] {
            let host = made.host_config.expect("host config");
            assert_eq!(host.nano_cpus, Some(250_000_000), "{what}");
            assert_eq!(host.memory, Some(128 << 20), "{what}");
            assert_eq!(host.memory_swap, Some(128 << 20), "{what}");
            assert_eq!(
                host.cap_drop,
                Some(vec!["ALL".to_owned()]),
                "{what} still confined"
            );
        }
    }
}
