//! The egress sidecar on Docker: where its configuration document
//! ([`crate::runtime::sidecar_doc`]) goes, its container, and how the host reaches its admin
//! API.
//!
//! The document holds the environment's secrets, so it is never put in an environment
//! variable or a file on this machine: it is uploaded into the created-but-not-started
//! container as a tar entry with mode 0600, and read back from there by the next `af up` (to
//! keep the token and the CA) and by commands that reach the admin API. The admin API listens
//! on the sidecar's edge address only, published on 127.0.0.1 with a random port; services on
//! the internal network cannot reach it.

use std::collections::HashMap;
use std::io::Read;
use std::net::{Ipv4Addr, SocketAddr};

use af_sidecar_api::config::{Admin, JournalConfig, SidecarConfig};
use bollard::Docker;
use bollard::models::{
    ContainerCreateBody, EndpointIpamConfig, EndpointSettings, HostConfig, NetworkConnectRequest,
    NetworkingConfig, RestartPolicy, RestartPolicyNameEnum, VolumeCreateRequest,
};
use bollard::query_parameters::DownloadFromContainerOptionsBuilder;
use futures_util::StreamExt;
use ipnet::IpNet;

use super::labels::{Names, kind};
use super::{containers, hardening};
use crate::runtime::images::tar_of;
use crate::runtime::sidecar_doc::{self, ALIAS, Kept};
use crate::runtime::{AdminEndpoint, RuntimeError, docker_client};

/// Where the configuration is written inside the sidecar.
pub const CONFIG_PATH: &str = "/etc/af/sidecar.json";
/// Docker's embedded resolver, which knows the environment's service names.
pub const DOCKER_RESOLVER: SocketAddr = SocketAddr::V4(std::net::SocketAddrV4::new(
    Ipv4Addr::new(127, 0, 0, 11),
    53,
));

/// What the sidecar is configured with, beyond the plan.
#[derive(Debug, Clone)]
pub struct SidecarSettings {
    /// The resolver outside names are resolved against.
    pub upstream_resolver: String,
    /// Networks the guard may dial although private (tests only; empty by default).
    pub trusted_networks: Vec<IpNet>,
    /// Extra networks the sidecar joins (tests: the simulated internet).
    pub extra_networks: Vec<String>,
}

/// The digest of the sidecar: its document (less the secrets), image, extra networks and
/// confinement. A running sidecar with the same digest is reused.
pub fn digest(doc: &SidecarConfig, image: &str, extra_networks: &[String]) -> String {
    let runtime = format!(
        "{image}|{}|{}",
        extra_networks.join(","),
        hardening::REVISION
    );
    sidecar_doc::digest(doc, &runtime)
}

/// Everything needed to create the sidecar container.
pub struct Create<'a> {
    /// The sidecar image.
    pub image: &'a str,
    /// The internal network and the sidecar's address on it.
    pub internal: (&'a str, Ipv4Addr),
    /// The edge network and the sidecar's address on it.
    pub edge: (&'a str, Ipv4Addr),
    /// Extra networks to join.
    pub extra_networks: &'a [String],
    /// The configuration document.
    pub doc: &'a SidecarConfig,
    /// Its digest.
    pub digest: &'a str,
    /// Where the environment comes from ([`crate::runtime::labels::origin`]), as labels.
    pub origin: &'a [(String, String)],
}

/// Create, configure and start the sidecar container.
pub async fn create(docker: &Docker, names: &Names, c: Create<'_>) -> Result<(), RuntimeError> {
    let name = names.sidecar();
    let journal = ensure_journal_volume(docker, names).await?;
    let admin_port = format!("{}/tcp", Admin::DEFAULT_PORT);
    let host_config = HostConfig {
        binds: Some(vec![format!("{journal}:{}", JournalConfig::DEFAULT_DIR)]),
        restart_policy: Some(RestartPolicy {
            name: Some(RestartPolicyNameEnum::UNLESS_STOPPED),
            maximum_retry_count: None,
        }),
        ..hardening::published_host_config(c.internal.0, &admin_port)
    };
    let body = ContainerCreateBody {
        image: Some(c.image.to_owned()),
        cmd: Some(vec!["--config".to_owned(), CONFIG_PATH.to_owned()]),
        labels: Some(
            names
                .labels(kind::SIDECAR, "sidecar", c.digest)
                .into_iter()
                .chain(c.origin.iter().cloned())
                .collect(),
        ),
        exposed_ports: Some(vec![admin_port]),
        stop_timeout: Some(sidecar_doc::STOP_TIMEOUT_SECS.into()),
        host_config: Some(host_config),
        networking_config: Some(NetworkingConfig {
            endpoints_config: Some(HashMap::from([(
                c.internal.0.to_owned(),
                endpoint(c.internal.1, &[ALIAS]),
            )])),
        }),
        ..Default::default()
    };
    containers::create(docker, &name, body).await?;
    // The engine takes one network at create time on older API versions: join the rest now,
    // before the sidecar starts.
    connect(docker, c.edge.0, &name, Some(c.edge.1)).await?;
    for extra in c.extra_networks {
        connect(docker, extra, &name, None).await?;
    }
    let file = sidecar_doc::file_bytes(c.doc);
    let archive = tar_of(&[(CONFIG_PATH.trim_start_matches('/'), &file, 0o600)])
        .map_err(|e| RuntimeError::engine("pack the sidecar configuration", e))?;
    containers::upload(docker, &name, archive, "the configuration").await?;
    containers::start(docker, &name).await
}

/// The journal volume: ours reused, somebody else's refused, otherwise created.
async fn ensure_journal_volume(docker: &Docker, names: &Names) -> Result<String, RuntimeError> {
    let name = names.journal();
    match docker.inspect_volume(&name).await {
        Ok(v) => {
            if super::labels::owner(Some(&v.labels), names.env()) != super::labels::Owner::This {
                return Err(RuntimeError::NotOurs {
                    class: "volume",
                    name,
                });
            }
            Ok(name)
        }
        Err(e) if docker_client::is_not_found(&e) => {
            docker
                .create_volume(VolumeCreateRequest {
                    name: Some(name.clone()),
                    labels: Some(names.labels(kind::JOURNAL, "sidecar", "")),
                    ..Default::default()
                })
                .await
                .map_err(|e| RuntimeError::engine(format!("create volume {name}"), e))?;
            Ok(name)
        }
        Err(e) => Err(RuntimeError::engine(format!("inspect volume {name}"), e)),
    }
}

/// The journal volume's name if it exists and is not ours.
pub async fn foreign_volume(docker: &Docker, names: &Names) -> Option<String> {
    let name = names.journal();
    let v = docker.inspect_volume(&name).await.ok()?;
    (super::labels::owner(Some(&v.labels), names.env()) != super::labels::Owner::This)
        .then_some(name)
}

/// An endpoint with a fixed address and aliases.
pub fn endpoint(addr: Ipv4Addr, aliases: &[&str]) -> EndpointSettings {
    EndpointSettings {
        ipam_config: Some(EndpointIpamConfig {
            ipv4_address: Some(addr.to_string()),
            ..Default::default()
        }),
        aliases: Some(aliases.iter().map(|a| (*a).to_owned()).collect()),
        ..Default::default()
    }
}

/// Join `container` to `network` (with a fixed address when given).
pub async fn connect(
    docker: &Docker,
    network: &str,
    container: &str,
    addr: Option<Ipv4Addr>,
) -> Result<(), RuntimeError> {
    let endpoint_config = addr.map(|a| endpoint(a, &[]));
    docker
        .connect_network(
            network,
            NetworkConnectRequest {
                container: container.to_owned(),
                endpoint_config,
            },
        )
        .await
        .map_err(|e| RuntimeError::engine(format!("connect {container} to {network}"), e))
}

/// The admin API of a running sidecar: its published port and the token from its file.
pub async fn admin(docker: &Docker, names: &Names) -> Result<AdminEndpoint, RuntimeError> {
    let name = names.sidecar();
    let Some(found) = containers::find(docker, names, &name).await? else {
        return Err(RuntimeError::NoEnvironment(names.env().to_string()));
    };
    if !found.running() {
        return Err(RuntimeError::AdminUnreachable(format!(
            "the sidecar {name} is {}",
            found.state()
        )));
    }
    let port = found.host_port(Admin::DEFAULT_PORT).ok_or_else(|| {
        RuntimeError::AdminUnreachable(format!("the sidecar {name} publishes no admin port"))
    })?;
    let kept = read_config(docker, &name).await?.ok_or_else(|| {
        RuntimeError::AdminUnreachable(format!("the sidecar {name} has no readable configuration"))
    })?;
    let token = kept.token().map(str::to_owned).ok_or_else(|| {
        RuntimeError::AdminUnreachable("the sidecar's configuration has no admin token".to_owned())
    })?;
    Ok(AdminEndpoint::direct(
        SocketAddr::from(([127, 0, 0, 1], port)),
        token,
    ))
}

/// What the configuration document inside a sidecar container (running or not) keeps.
///
/// `None` when the container holds no configuration or one that is not a document (it is then
/// replaced); a Docker failure is an error, so a hiccup never silently replaces the
/// environment's token and CA.
pub async fn read_config(docker: &Docker, container: &str) -> Result<Option<Kept>, RuntimeError> {
    let options = DownloadFromContainerOptionsBuilder::default()
        .path(CONFIG_PATH)
        .build();
    let mut stream = docker.download_from_container(container, Some(options));
    let mut archive = Vec::new();
    while let Some(chunk) = stream.next().await {
        let chunk = match chunk {
            Ok(chunk) => chunk,
            Err(bollard::errors::Error::DockerResponseServerError {
                status_code: 404, ..
            }) => return Ok(None),
            Err(e) => {
                return Err(RuntimeError::AdminUnreachable(format!(
                    "the sidecar's configuration could not be read: {e}"
                )));
            }
        };
        archive.extend_from_slice(&chunk);
    }
    let mut tar = tar::Archive::new(archive.as_slice());
    let unreadable = |e: std::io::Error| {
        RuntimeError::AdminUnreachable(format!(
            "the sidecar's configuration could not be read: {e}"
        ))
    };
    let mut file = Vec::new();
    if let Some(entry) = tar.entries().map_err(unreadable)?.next() {
        entry
            .map_err(unreadable)?
            .read_to_end(&mut file)
            .map_err(unreadable)?;
    }
    Ok(Kept::read(&file))
}
