//! The egress sidecar: its configuration file (the format of `docs/sidecar-config.md` on the
//! proxy side), its container, and how the host reaches its admin API.
//!
//! The configuration holds the environment's secrets (the admin token, the CA's private key,
//! test credentials), so it is never put in an environment variable or a file on this
//! machine: it is uploaded into the created-but-not-started container as a tar entry with
//! mode 0600, and read back from there by the next `af up` (to keep the token and the CA) and
//! by commands that reach the admin API. The admin API listens on the sidecar's edge address
//! only, published on 127.0.0.1 with a random port; services on the internal network cannot
//! reach it.

use std::collections::HashMap;
use std::fmt;
use std::io::Read;
use std::net::{Ipv4Addr, SocketAddr};
use std::time::SystemTime;

use bollard::Docker;
use bollard::models::{
    ContainerCreateBody, EndpointIpamConfig, EndpointSettings, HostConfig, NetworkConnectRequest,
    NetworkingConfig, RestartPolicy, RestartPolicyNameEnum, VolumeCreateRequest,
};
use bollard::query_parameters::DownloadFromContainerOptionsBuilder;
use futures_util::StreamExt;
use ipnet::Ipv4Net;
use serde_json::{Value, json};

use super::images::tar_of;
use super::labels::{Names, kind};
use super::{containers, hardening};
use crate::env_id::EnvId;
use crate::plan::{EnvPlan, short_digest};
use crate::runtime::{AdminEndpoint, RuntimeError};
use crate::secret::{hex, random};
use crate::trust::EnvCa;

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
/// The ports the sidecar captures SMTP mail on.
pub const SMTP_PORTS: [u16; 3] = [25, 587, 2525];
/// Leaf certificates the sidecar keeps, one per intercepted host name.
pub const LEAF_CACHE: usize = 1024;
/// Seconds the engine waits after SIGTERM before it kills the sidecar (`docker stop`, a
/// restart, a replacement). The sidecar drains on SIGTERM: open requests and tunnels get its
/// `limits.drain_timeout_ms` (5 s by default; the document leaves it so), then the journal up
/// to 2 s to commit. This must stay above both, or the kill cuts the journal short.
pub const STOP_TIMEOUT_SECS: i32 = 10;
/// The shortest admin token the sidecar accepts.
const MIN_TOKEN_LEN: usize = 16;

/// What only the sidecar holds and a later `af up` keeps: the admin token (the environment's
/// webhook secrets derive from it) and the environment CA.
#[derive(Clone)]
pub struct Secrets {
    /// The admin API's bearer token.
    pub token: String,
    /// The environment CA.
    pub ca: EnvCa,
}

impl fmt::Debug for Secrets {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Secrets")
            .field("ca", &self.ca)
            .finish_non_exhaustive()
    }
}

impl Secrets {
    /// The token and CA of `previous` (the existing sidecar's configuration), the CA only while
    /// it has at least two days left; whatever is missing is made anew.
    pub fn keep_or_make(
        previous: Option<&Value>,
        env: &EnvId,
        now: SystemTime,
    ) -> Result<Secrets, RuntimeError> {
        let token = match previous.and_then(token_of) {
            Some(token) => token.to_owned(),
            None => new_token()?,
        };
        let ca = EnvCa::keep_or_renew(previous.and_then(ca_of), env, now)?;
        Ok(Secrets { token, ca })
    }
}

/// The admin token a configuration document holds, if usable.
fn token_of(doc: &Value) -> Option<&str> {
    doc["admin"]["token"]
        .as_str()
        .filter(|t| t.len() >= MIN_TOKEN_LEN)
}

/// The CA a configuration document holds, if it reads back.
fn ca_of(doc: &Value) -> Option<EnvCa> {
    let tls = &doc["tls"];
    EnvCa::from_pem(tls["ca_cert_pem"].as_str()?, tls["ca_key_pem"].as_str()?).ok()
}

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

/// The sidecar's configuration document. Its [`digest`] (everything but the token and the CA's
/// key) decides whether a running sidecar is reused.
pub fn config_document(
    plan: &EnvPlan,
    settings: &SidecarSettings,
    inside: Ipv4Net,
    inside_addr: Ipv4Addr,
    edge_addr: Ipv4Addr,
    secrets: &Secrets,
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
            "smtp": {
                "listen": SMTP_PORTS.map(|port| SocketAddr::from(([0, 0, 0, 0], port)).to_string()),
            },
        },
        "admin": {
            "listen": SocketAddr::from((edge_addr, ADMIN_PORT)).to_string(),
            "token": secrets.token,
        },
        "tls": {
            "ca_cert_pem": secrets.ca.cert_pem(),
            "ca_key_pem": secrets.ca.key_pem(),
            "leaf_cache": LEAF_CACHE,
        },
        "modes": {
            "packs": plan.modes.packs,
            "openapi": plan.modes.openapi,
            "credentials": plan.modes.credentials.0,
        },
    });
    if let Some(model) = &plan.modes.model {
        doc["modes"]["model"] = json!(model);
    }
    if !settings.trusted_networks.is_empty() {
        doc["guard"] = json!({ "trusted_networks": settings.trusted_networks });
    }
    doc
}

/// The digest of a configuration document without its token and the CA's key (the CA is
/// still in it through its certificate).
pub fn digest(doc: &Value, image: &str, extra_networks: &[String]) -> String {
    let mut d = doc.clone();
    d["admin"]["token"] = Value::Null;
    d["tls"]["ca_key_pem"] = Value::Null;
    let text = format!(
        "{d}|{image}|{}|{}",
        extra_networks.join(","),
        hardening::REVISION
    );
    short_digest(text.as_bytes())
}

/// The document as the sidecar reads it.
fn file_bytes(doc: &Value) -> Vec<u8> {
    serde_json::to_vec_pretty(doc).unwrap_or_default()
}

/// A fresh admin token: 32 hex digits from the kernel's random source.
pub fn new_token() -> Result<String, RuntimeError> {
    random::<16>()
        .map(|bytes| hex(&bytes))
        .map_err(|e| RuntimeError::engine("make an admin token", e))
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
        binds: Some(vec![format!("{journal}:{JOURNAL_DIR}")]),
        restart_policy: Some(RestartPolicy {
            name: Some(RestartPolicyNameEnum::UNLESS_STOPPED),
            maximum_retry_count: None,
        }),
        ..hardening::published_host_config(c.internal.0, &admin_port)
    };
    let body = ContainerCreateBody {
        image: Some(c.image.to_owned()),
        cmd: Some(vec!["--config".to_owned(), CONFIG_PATH.to_owned()]),
        labels: Some(names.labels(kind::SIDECAR, "sidecar", c.digest)),
        exposed_ports: Some(vec![admin_port]),
        stop_timeout: Some(STOP_TIMEOUT_SECS.into()),
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
    let archive = tar_of(&[("etc/af/sidecar.json", &file_bytes(c.doc), 0o600)])
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
    let doc = read_config(docker, &name).await?.ok_or_else(|| {
        RuntimeError::AdminUnreachable(format!("the sidecar {name} has no readable configuration"))
    })?;
    let token = token_of(&doc).map(str::to_owned).ok_or_else(|| {
        RuntimeError::AdminUnreachable("the sidecar's configuration has no admin token".to_owned())
    })?;
    Ok(AdminEndpoint {
        addr: SocketAddr::from(([127, 0, 0, 1], port)),
        token,
    })
}

/// The configuration document inside a sidecar container (running or not).
///
/// `None` when the container holds no configuration or one that is not JSON (it is then
/// replaced); a Docker failure is an error, so a hiccup never silently replaces the
/// environment's token and CA.
pub async fn read_config(docker: &Docker, container: &str) -> Result<Option<Value>, RuntimeError> {
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
    let mut text = String::new();
    if let Some(entry) = tar.entries().map_err(unreadable)?.next() {
        entry
            .map_err(unreadable)?
            .read_to_string(&mut text)
            .map_err(unreadable)?;
    }
    Ok(serde_json::from_str(&text).ok())
}

#[cfg(test)]
mod tests {
    use af_policy::egress::{EgressSpec, Mode, RuleSpec};

    use super::*;
    use crate::modes::Credentials;

    fn plan() -> EnvPlan {
        let mut mock = RuleSpec::new("api.stripe.com", Mode::Mock);
        mock.fixtures = Some("mocks/stripe.yaml".to_owned());
        let egress = EgressSpec {
            rules: vec![mock],
            ..EgressSpec::default()
        };
        let mut plan = EnvPlan::new(
            EnvId::parse("shop-1").expect("id"),
            "shop",
            Vec::new(),
            egress,
        )
        .expect("plan");
        plan.modes
            .packs
            .insert("mocks/stripe.yaml".to_owned(), json!({"routes": []}));
        plan.modes.credentials =
            Credentials([("STRIPE_TEST_KEY".to_owned(), "sk_test_1".to_owned())].into());
        plan
    }

    fn settings() -> SidecarSettings {
        SidecarSettings {
            upstream_resolver: DOCKER_RESOLVER.to_owned(),
            trusted_networks: Vec::new(),
            extra_networks: Vec::new(),
        }
    }

    fn doc(plan: &EnvPlan, secrets: &Secrets) -> Value {
        let inside: Ipv4Net = "10.213.0.0/24".parse().expect("net");
        config_document(
            plan,
            &settings(),
            inside,
            Ipv4Addr::new(10, 213, 0, 2),
            Ipv4Addr::new(10, 213, 1, 2),
            secrets,
        )
    }

    fn secrets(plan: &EnvPlan) -> Secrets {
        Secrets::keep_or_make(None, &plan.env, SystemTime::now()).expect("secrets")
    }

    #[test]
    fn the_document_carries_the_ca_the_modes_inputs_and_the_smtp_listener() {
        let plan = plan();
        let s = secrets(&plan);
        let d = doc(&plan, &s);
        assert_eq!(d["tls"]["ca_cert_pem"], s.ca.cert_pem());
        assert_eq!(d["tls"]["ca_key_pem"], s.ca.key_pem());
        assert_eq!(d["tls"]["leaf_cache"], 1024);
        assert_eq!(
            d["modes"]["packs"]["mocks/stripe.yaml"],
            json!({"routes": []})
        );
        assert_eq!(d["modes"]["openapi"], json!({}));
        assert_eq!(d["modes"]["credentials"]["STRIPE_TEST_KEY"], "sk_test_1");
        assert_eq!(
            d["listeners"]["smtp"]["listen"],
            json!(["0.0.0.0:25", "0.0.0.0:587", "0.0.0.0:2525"])
        );
        assert_eq!(d["listeners"]["dns"]["answer_v4"], "10.213.0.2");
        assert_eq!(d["admin"]["token"], s.token.as_str());
        assert_eq!(d["egress"]["rules"][0]["fixtures"], "mocks/stripe.yaml");
    }

    #[test]
    fn a_second_up_keeps_the_token_and_ca_so_the_digest_is_unchanged() {
        let plan = plan();
        let first = secrets(&plan);
        let written = doc(&plan, &first);
        let kept =
            Secrets::keep_or_make(Some(&written), &plan.env, SystemTime::now()).expect("kept");
        assert_eq!(kept.token, first.token);
        assert_eq!(kept.ca, first.ca);
        let again = doc(&plan, &kept);
        assert_eq!(digest(&again, "img", &[]), digest(&written, "img", &[]));
    }

    #[test]
    fn the_digest_ignores_the_secrets_but_not_the_ca_or_the_inputs() {
        let plan = plan();
        let a = secrets(&plan);
        let b = Secrets {
            token: "another-token-0123456789".to_owned(),
            ca: a.ca.clone(),
        };
        let base = digest(&doc(&plan, &a), "img", &[]);
        assert_eq!(base, digest(&doc(&plan, &b), "img", &[]), "token");
        let renewed = secrets(&plan);
        assert_ne!(base, digest(&doc(&plan, &renewed), "img", &[]), "a new CA");
        let mut changed = plan.clone();
        changed
            .modes
            .credentials
            .0
            .insert("STRIPE_TEST_KEY".to_owned(), "sk_test_2".to_owned());
        assert_ne!(
            base,
            digest(&doc(&changed, &a), "img", &[]),
            "a new credential"
        );
    }

    #[test]
    fn an_expiring_or_unreadable_stored_ca_is_replaced_and_the_token_kept() {
        let plan = plan();
        let now = SystemTime::now();
        let old = Secrets {
            token: "kept-token-0123456789abcdef".to_owned(),
            ca: EnvCa::generate(
                &plan.env,
                now - std::time::Duration::from_secs(6 * 24 * 3600),
            )
            .expect("old CA"),
        };
        let written = doc(&plan, &old);
        let next = Secrets::keep_or_make(Some(&written), &plan.env, now).expect("renewed");
        assert_eq!(next.token, old.token);
        assert_ne!(next.ca, old.ca);
        assert!(next.ca.is_fresh(now));

        let mut broken = written.clone();
        broken["tls"]["ca_key_pem"] = json!("garbage");
        broken["admin"]["token"] = json!("short");
        let fresh = Secrets::keep_or_make(Some(&broken), &plan.env, now).expect("fresh");
        assert_ne!(fresh.token, "short");
        assert_eq!(fresh.token.len(), 32);
        assert!(!format!("{fresh:?}").contains(&fresh.token));
    }
}
