//! The egress sidecar: its configuration file (the format of `docs/sidecar-config.md` on the
//! proxy side), its container, and how the host reaches its admin API.
//!
//! The configuration holds the admin token, so it is never put in an environment variable or a
//! world-readable file: it is uploaded into the created-but-not-started container as a tar
//! entry with mode 0600. The admin API listens on the sidecar's edge address only, published on
//! 127.0.0.1 with a random port; services on the internal network cannot reach it.

use std::collections::HashMap;
use std::io::Read;
use std::net::{Ipv4Addr, SocketAddr};

use bollard::Docker;
use bollard::models::{
    ContainerCreateBody, EndpointIpamConfig, EndpointSettings, HostConfig, NetworkConnectRequest,
    NetworkingConfig, PortBinding, RestartPolicy, RestartPolicyNameEnum, VolumeCreateRequest,
};
use bollard::query_parameters::{
    CreateContainerOptionsBuilder, DownloadFromContainerOptionsBuilder,
    UploadToContainerOptionsBuilder,
};
use futures_util::StreamExt;
use ipnet::Ipv4Net;
use serde_json::{Value, json};

use super::containers;
use super::images::tar_of;
use super::labels::{Names, kind};
use crate::plan::{EnvPlan, short_digest};
use crate::runtime::{AdminEndpoint, RuntimeError};

/// Where the journal lives inside the sidecar (a volume, so it outlives the container).
pub const JOURNAL_DIR: &str = "/var/lib/af/journal";
/// Where the configuration is written inside the sidecar.
pub const CONFIG_PATH: &str = "/etc/af/sidecar.json";
/// The admin API's port inside the sidecar.
pub const ADMIN_PORT: u16 = 9901;
/// The explicit proxy port.
pub const PROXY_PORT: u16 = 3128;
/// Docker's embedded resolver, which knows the environment's service names.
pub const DOCKER_RESOLVER: &str = "127.0.0.11:53";
/// The sidecar's alias on the internal network.
pub const ALIAS: &str = "af-sidecar";

/// What the sidecar is configured with, beyond the plan.
#[derive(Debug, Clone)]
pub struct SidecarSettings {
    /// The resolver outside names are resolved against.
    pub upstream_resolver: String,
    /// Networks the guard may dial although private (tests only; empty by default).
    pub trusted_networks: Vec<String>,
    /// Extra networks the sidecar joins (tests: the simulated internet).
    pub extra_networks: Vec<String>,
}

/// The sidecar's configuration document. The digest of everything but the token decides
/// whether a running sidecar is reused.
pub fn config_document(
    plan: &EnvPlan,
    settings: &SidecarSettings,
    inside: Ipv4Net,
    inside_addr: Ipv4Addr,
    edge_addr: Ipv4Addr,
    token: &str,
) -> Value {
    let mut names: Vec<String> = plan.services.iter().map(|s| s.name.clone()).collect();
    names.push(ALIAS.to_owned());
    let mut doc = json!({
        "env": plan.env.as_str(),
        "egress": plan.egress,
        "resolver": settings.upstream_resolver,
        "inside": { "subnets": [inside.to_string()], "names": names },
        "listeners": {
            "dns": {
                "listen": "0.0.0.0:53",
                "inside_resolver": DOCKER_RESOLVER,
                "answer_v4": inside_addr.to_string(),
            },
        },
        "admin": { "listen": SocketAddr::from((edge_addr, ADMIN_PORT)).to_string(), "token": token },
    });
    if !settings.trusted_networks.is_empty() {
        doc["guard"] = json!({ "trusted_networks": settings.trusted_networks });
    }
    doc
}

/// The digest of a configuration document without its token.
pub fn digest(doc: &Value, image: &str, extra_networks: &[String]) -> String {
    let mut d = doc.clone();
    d["admin"]["token"] = Value::Null;
    let text = format!("{d}|{image}|{}", extra_networks.join(","));
    short_digest(text.as_bytes())
}

/// The document as the sidecar reads it.
fn file_bytes(doc: &Value) -> Vec<u8> {
    serde_json::to_vec_pretty(doc).unwrap_or_default()
}

/// A fresh admin token: 32 hex digits from the kernel's random source.
pub fn new_token() -> Result<String, RuntimeError> {
    let mut bytes = [0u8; 16];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut bytes))
        .map_err(|e| RuntimeError::engine("make an admin token", e))?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
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
    pub doc: &'a Value,
    /// Its digest.
    pub digest: &'a str,
}

/// Create, configure and start the sidecar container.
pub async fn create(docker: &Docker, names: &Names, c: Create<'_>) -> Result<(), RuntimeError> {
    let name = names.sidecar();
    let journal = ensure_journal_volume(docker, names).await?;
    let admin_port = format!("{ADMIN_PORT}/tcp");
    let host_config = HostConfig {
        network_mode: Some(c.internal.0.to_owned()),
        binds: Some(vec![format!("{journal}:{JOURNAL_DIR}")]),
        port_bindings: Some(HashMap::from([(
            admin_port.clone(),
            Some(vec![PortBinding {
                host_ip: Some("127.0.0.1".to_owned()),
                host_port: Some(String::new()),
            }]),
        )])),
        restart_policy: Some(RestartPolicy {
            name: Some(RestartPolicyNameEnum::UNLESS_STOPPED),
            maximum_retry_count: None,
        }),
        cap_drop: Some(vec!["ALL".to_owned()]),
        cap_add: Some(vec!["NET_BIND_SERVICE".to_owned()]),
        security_opt: Some(vec!["no-new-privileges".to_owned()]),
        ..Default::default()
    };
    let body = ContainerCreateBody {
        image: Some(c.image.to_owned()),
        cmd: Some(vec!["--config".to_owned(), CONFIG_PATH.to_owned()]),
        labels: Some(names.labels(kind::SIDECAR, "sidecar", c.digest)),
        exposed_ports: Some(vec![admin_port]),
        host_config: Some(host_config),
        networking_config: Some(NetworkingConfig {
            endpoints_config: Some(HashMap::from([(
                c.internal.0.to_owned(),
                endpoint(c.internal.1, &[ALIAS]),
            )])),
        }),
        ..Default::default()
    };
    let options = CreateContainerOptionsBuilder::default().name(&name).build();
    docker
        .create_container(Some(options), body)
        .await
        .map_err(|e| RuntimeError::engine(format!("create container {name}"), e))?;
    // The engine takes one network at create time on older API versions: join the rest now,
    // before the sidecar starts.
    connect(docker, c.edge.0, &name, Some(c.edge.1)).await?;
    for extra in c.extra_networks {
        connect(docker, extra, &name, None).await?;
    }
    let archive = tar_of(&[("etc/af/sidecar.json", &file_bytes(c.doc), 0o600)])
        .map_err(|e| RuntimeError::engine("pack the sidecar configuration", e))?;
    let options = UploadToContainerOptionsBuilder::default().path("/").build();
    docker
        .upload_to_container(&name, Some(options), bollard::body_full(archive.into()))
        .await
        .map_err(|e| RuntimeError::engine(format!("write the configuration into {name}"), e))?;
    docker
        .start_container(&name, None)
        .await
        .map_err(|e| RuntimeError::engine(format!("start container {name}"), e))?;
    Ok(())
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
        Err(e) if super::client::is_not_found(&e) => {
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
    let port = found.host_port(ADMIN_PORT).ok_or_else(|| {
        RuntimeError::AdminUnreachable(format!("the sidecar {name} publishes no admin port"))
    })?;
    let token = read_token(docker, &name).await?;
    Ok(AdminEndpoint {
        addr: SocketAddr::from(([127, 0, 0, 1], port)),
        token,
    })
}

async fn read_token(docker: &Docker, container: &str) -> Result<String, RuntimeError> {
    let options = DownloadFromContainerOptionsBuilder::default()
        .path(CONFIG_PATH)
        .build();
    let mut stream = docker.download_from_container(container, Some(options));
    let mut archive = Vec::new();
    while let Some(chunk) = stream.next().await {
        let chunk = chunk.map_err(|e| {
            RuntimeError::AdminUnreachable(format!(
                "the sidecar's configuration could not be read: {e}"
            ))
        })?;
        archive.extend_from_slice(&chunk);
    }
    let mut tar = tar::Archive::new(archive.as_slice());
    let unreadable = |e: std::io::Error| {
        RuntimeError::AdminUnreachable(format!(
            "the sidecar's configuration could not be read: {e}"
        ))
    };
    let mut text = String::new();
    if let Some(entry) = tar.entries().map_err(unreadable)?.next() {
        entry
            .map_err(unreadable)?
            .read_to_string(&mut text)
            .map_err(unreadable)?;
    }
    let doc: Value = serde_json::from_str(&text).map_err(|e| {
        RuntimeError::AdminUnreachable(format!("the sidecar's configuration is not JSON: {e}"))
    })?;
    doc["admin"]["token"]
        .as_str()
        .map(str::to_owned)
        .ok_or_else(|| {
            RuntimeError::AdminUnreachable(
                "the sidecar's configuration has no admin token".to_owned(),
            )
        })
}
