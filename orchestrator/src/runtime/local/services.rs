//! Service containers, their migrations and their forwarders.
//!
//! A service sits on the internal network only, under its name as alias, with the sidecar as
//! its only DNS server and its proxy in the proxy variables. Before it starts, the CA files are
//! written into it (`/etc/af/ca-bundle.pem`, `/etc/af/ca.pem`) and its variables point at them;
//! the environment's webhook secrets are in its variables too. A web service is published on
//! 127.0.0.1 by a forwarder: a container on the internal and publish networks that relays one
//! port to that one service and dials nothing else, so it is not a route out.

use std::collections::HashMap;
use std::net::Ipv4Addr;

use bollard::Docker;
use bollard::models::{ContainerCreateBody, EndpointSettings, HostConfig, NetworkingConfig};
use futures_util::StreamExt;

use super::images::{FORWARD_BINARY, tar_of};
use super::labels::{Names, kind};
use super::sidecar::{PROXY_PORT, connect};
use super::{containers, hardening};
use crate::plan::{EnvPlan, ServicePlan, short_digest};
use crate::runtime::RuntimeError;
use crate::trust::{self, TrustFiles};
use crate::webhook::WebhookSecrets;

/// What every service of the environment is given besides its own configuration.
#[derive(Debug, Clone, Copy)]
pub struct Provisions<'a> {
    /// The CA files.
    pub trust: &'a TrustFiles,
    /// The webhook secrets.
    pub webhooks: &'a WebhookSecrets,
}

impl Provisions<'_> {
    /// A digest of what the services are given: a service given something else is replaced.
    pub fn digest(&self) -> String {
        short_digest(format!("{}|{}", self.trust.digest(), self.webhooks.digest()).as_bytes())
    }
}

/// The environment variables of a service, in order: proxy, identity, CA files, webhook
/// secrets, port, then the manifest's (which may override any of them).
pub fn environment(
    plan: &EnvPlan,
    service: &ServicePlan,
    sidecar: Ipv4Addr,
    provisions: Provisions<'_>,
) -> Vec<String> {
    let proxy = format!("http://{sidecar}:{PROXY_PORT}");
    let mut no_proxy = vec![
        "localhost".to_owned(),
        "127.0.0.1".to_owned(),
        "::1".to_owned(),
    ];
    no_proxy.extend(plan.services.iter().map(|s| s.name.clone()));
    let no_proxy = no_proxy.join(",");
    let mut env = vec![
        format!("HTTP_PROXY={proxy}"),
        format!("HTTPS_PROXY={proxy}"),
        format!("http_proxy={proxy}"),
        format!("https_proxy={proxy}"),
        format!("NO_PROXY={no_proxy}"),
        format!("no_proxy={no_proxy}"),
        format!("AF_ENV_ID={}", plan.env),
        format!("AF_SERVICE={}", service.name),
    ];
    env.extend(trust::variables());
    env.extend(provisions.webhooks.variables());
    if let Some(port) = service.port {
        env.push(format!("PORT={port}"));
    }
    env.extend(service.env.iter().map(|(k, v)| format!("{k}={v}")));
    env
}

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

/// Create the container, write the CA files into it, then start it (so no process of it runs
/// without them).
async fn create_and_start(
    docker: &Docker,
    name: &str,
    body: ContainerCreateBody,
    trust: &TrustFiles,
) -> Result<(), RuntimeError> {
    containers::create(docker, name, body).await?;
    containers::upload(docker, name, ca_archive(trust)?, "the CA files").await?;
    containers::start(docker, name).await
}

/// The CA files as a tar archive to unpack at `/`.
fn ca_archive(trust: &TrustFiles) -> Result<Vec<u8>, RuntimeError> {
    tar_of(&[
        (
            relative(trust::BUNDLE_PATH),
            trust.bundle_pem.as_bytes(),
            0o644,
        ),
        (relative(trust::CA_PATH), trust.ca_pem.as_bytes(), 0o644),
    ])
    .map_err(|e| RuntimeError::engine("pack the CA files", e))
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
    use std::time::SystemTime;

    use af_policy::egress::EgressSpec;

    use super::*;
    use crate::env_id::EnvId;
    use crate::plan::Kind;
    use crate::trust::EnvCa;

    #[test]
    fn a_service_gets_proxy_identity_ca_and_webhook_variables_before_its_own() {
        let env = EnvId::parse("shop-1").expect("id");
        let mut web = ServicePlan::new("web", Kind::Web, "/x");
        web.port = Some(8080);
        web.env
            .insert("SSL_CERT_FILE".to_owned(), "/mine.pem".to_owned());
        let plan =
            EnvPlan::new(env.clone(), "shop", vec![web], EgressSpec::default()).expect("plan");
        let ca = EnvCa::generate(&env, SystemTime::now()).expect("CA");
        let trust = TrustFiles::new("", &ca);
        let webhooks = WebhookSecrets::derive("0123456789abcdef0123");
        let provisions = Provisions {
            trust: &trust,
            webhooks: &webhooks,
        };
        let vars = environment(
            &plan,
            &plan.services[0],
            Ipv4Addr::new(10, 0, 0, 2),
            provisions,
        );
        let position = |prefix: &str| {
            vars.iter()
                .position(|v| v.starts_with(prefix))
                .unwrap_or_else(|| panic!("{prefix}: {vars:?}"))
        };
        for name in trust::BUNDLE_VARIABLES {
            assert!(
                vars.contains(&format!("{name}=/etc/af/ca-bundle.pem")),
                "{name}"
            );
        }
        assert!(vars.contains(&"AF_CA_CERT=/etc/af/ca.pem".to_owned()));
        assert!(vars.contains(&format!(
            "STRIPE_WEBHOOK_SECRET={}",
            webhooks.get(crate::webhook::Provider::Stripe)
        )));
        assert!(position("HTTP_PROXY=") < position("SSL_CERT_FILE=/etc/af"));
        assert!(position("AF_CA_CERT=") < position("SVIX_WEBHOOK_SECRET="));
        assert!(
            position("SSL_CERT_FILE=/etc/af") < position("SSL_CERT_FILE=/mine.pem"),
            "the manifest's own value comes last, so it wins"
        );
        let other = WebhookSecrets::derive("another-token-456789");
        let changed = Provisions {
            trust: &trust,
            webhooks: &other,
        };
        assert_ne!(provisions.digest(), changed.digest());
    }
}
