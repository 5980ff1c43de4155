//! The sidecar's configuration document (`af-proxy --config FILE`, `docs/sidecar-config.md`):
//! written by the orchestrator, read and checked by the sidecar before it binds anything.
//!
//! Every section refuses keys it does not know. A key left out takes the default written on
//! its field here, and nowhere else.

mod containment;
mod limits;
mod listeners;
mod modes;

use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};

use af_policy::egress::EgressSpec;
use ipnet::IpNet;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

pub use containment::Containment;
pub use limits::{JournalConfig, Limits};
pub use listeners::{
    DnsListener, Listeners, ProxyListener, SmtpListener, TransparentHttp, TransparentTls,
};
pub use modes::{ApiKey, ModelConfig, ModesConfig};

/// The version of the document these types describe. A sidecar refuses a document of any
/// other version before reading the rest of it.
pub const VERSION: u32 = 1;

/// The whole file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(
    title = "af sidecar configuration",
    description = "The document af-proxy --config FILE reads: written by the orchestrator, checked before anything is bound."
)]
pub struct SidecarConfig {
    /// The document's version; this sidecar reads only its own.
    #[schemars(extend("const" = VERSION))]
    pub version: u32,
    /// The environment id (1-63 of `A-Za-z0-9-_`), copied into every journal record.
    pub env: String,
    /// The egress catalogue, exactly as in `af.yaml`.
    pub egress: EgressSpec,
    /// The resolver every outside name is resolved against (`IP` or `IP:PORT`, port 53).
    pub resolver: String,
    /// The environment's own network.
    #[serde(default)]
    pub inside: Inside,
    /// Address guard overrides.
    #[serde(default)]
    pub guard: GuardConfig,
    /// Where each listener binds.
    #[serde(default)]
    pub listeners: Listeners,
    /// The admin API.
    pub admin: Admin,
    /// The journal.
    #[serde(default)]
    pub journal: JournalConfig,
    /// Limits and timeouts.
    #[serde(default)]
    pub limits: Limits,
    /// TLS interception; without it, hosts that need TLS opened are refused (AF-NET-012).
    #[serde(default)]
    pub tls: Option<TlsConfig>,
    /// What the answering modes (mock, capture, synth, sandbox) work from.
    #[serde(default)]
    pub modes: ModesConfig,
    /// Containment proven while the environment runs: the watchers' report listener and the
    /// layer witnesses. Absent: off.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub containment: Option<Containment>,
}

impl SidecarConfig {
    /// A document of this [`VERSION`] with every section at its default: the fields a
    /// document must carry, and nothing else.
    pub fn new(env: String, egress: EgressSpec, resolver: String, admin: Admin) -> Self {
        Self {
            version: VERSION,
            env,
            egress,
            resolver,
            inside: Inside::default(),
            guard: GuardConfig::default(),
            listeners: Listeners::default(),
            admin,
            journal: JournalConfig::default(),
            limits: Limits::default(),
            tls: None,
            modes: ModesConfig::default(),
            containment: None,
        }
    }
}

/// Only the version of a document, read before the rest: a document of another version may
/// have keys this one does not know.
#[derive(Debug, Clone, Copy, Deserialize)]
pub struct Versioned {
    /// The version the document says it is, if it says.
    #[serde(default)]
    pub version: Option<u32>,
}

/// The environment's own network.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Inside {
    /// Subnets of the environment's internal network; the guard dials them directly.
    #[serde(default)]
    pub subnets: Vec<IpNet>,
    /// Names that are inside the environment (service names, runtime zones), for DNS and
    /// `POST /v1/deliver`; asked of the runtime's resolver.
    #[serde(default)]
    pub names: Vec<String>,
    /// Inside names with the addresses the runtime gave them (a cluster's Services), answered
    /// by the sidecar itself and never asked of any resolver; every address in `subnets`.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub hosts: BTreeMap<String, Vec<IpAddr>>,
}

/// Address guard overrides.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct GuardConfig {
    /// Trusted upstream networks: loopback, private, CGNAT or unique-local addresses in these
    /// CIDRs may be dialled. Empty by default; meant for tests on loopback. Never opens
    /// link-local (metadata), unspecified, multicast, broadcast or embedded-IPv4 forms.
    #[serde(default)]
    pub trusted_networks: Vec<IpNet>,
}

/// The admin API.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Admin {
    /// Bind address, default `127.0.0.1:9901`.
    #[serde(default = "Admin::default_listen")]
    pub listen: SocketAddr,
    /// Bearer token required on every route but `/healthz`, at least 16 characters.
    pub token: String,
}

impl Admin {
    /// The admin API's port when `listen` is not given.
    pub const DEFAULT_PORT: u16 = 9901;
    /// The shortest token the sidecar accepts.
    pub const MIN_TOKEN_LEN: usize = 16;

    fn default_listen() -> SocketAddr {
        SocketAddr::from((Ipv4Addr::LOCALHOST, Self::DEFAULT_PORT))
    }
}

/// TLS interception: the environment's CA and the leaf cache.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TlsConfig {
    /// The environment CA's certificate (PEM), generated by the orchestrator.
    pub ca_cert_pem: String,
    /// The environment CA's private key (PKCS#8 PEM, ECDSA P-256). It never leaves this file.
    pub ca_key_pem: String,
    /// Leaf certificates kept (one per host name), default 1024; the least recently used is
    /// evicted and counted.
    #[serde(default = "TlsConfig::default_leaf_cache")]
    pub leaf_cache: usize,
    /// Extra roots (PEM) trusted for upstream certificates besides the built-in web roots:
    /// `af` fills it from the files `af.yaml`'s `egress.upstream_roots` names (an upstream
    /// with a private CA); tests give their test CA here.
    #[serde(default)]
    pub extra_upstream_roots_pem: Option<String>,
}

impl TlsConfig {
    /// Interception with the environment CA `ca_cert_pem` / `ca_key_pem` and every default.
    pub fn new(ca_cert_pem: String, ca_key_pem: String) -> Self {
        Self {
            ca_cert_pem,
            ca_key_pem,
            leaf_cache: Self::default_leaf_cache(),
            extra_upstream_roots_pem: None,
        }
    }

    fn default_leaf_cache() -> usize {
        1024
    }
}

/// The JSON Schema of the document, as `docs/sidecar.schema.json` holds it.
pub fn json_schema() -> serde_json::Value {
    schemars::schema_for!(SidecarConfig).to_value()
}

/// `n` as a non-zero default (a zero is a compile error in the `const` it is used in).
const fn non_zero_u32(n: u32) -> std::num::NonZeroU32 {
    match std::num::NonZeroU32::new(n) {
        Some(n) => n,
        None => panic!("a default of zero"),
    }
}

/// `n` as a non-zero default, as [`non_zero_u32`].
const fn non_zero_u64(n: u64) -> std::num::NonZeroU64 {
    match std::num::NonZeroU64::new(n) {
        Some(n) => n,
        None => panic!("a default of zero"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn minimal() -> SidecarConfig {
        SidecarConfig::new(
            "env-1".to_owned(),
            EgressSpec::default(),
            "127.0.0.1:5353".to_owned(),
            Admin {
                listen: SocketAddr::from(([127, 0, 0, 1], 9901)),
                token: "0123456789abcdef0123".to_owned(),
            },
        )
    }

    #[test]
    fn a_written_document_reads_back_the_same() {
        let mut doc = minimal();
        doc.tls = Some(TlsConfig::new("cert".to_owned(), "key".to_owned()));
        doc.listeners.dns.answer_v4 = Some(Ipv4Addr::new(198, 51, 100, 2));
        let text = serde_json::to_string(&doc).expect("serializes");
        let read: SidecarConfig = serde_json::from_str(&text).expect("reads back");
        assert_eq!(read, doc);
    }

    #[test]
    fn a_left_out_key_takes_the_same_default_as_a_new_document() {
        let text = r#"{"version":1,"env":"env-1","egress":{},"resolver":"127.0.0.1:5353","admin":{"token":"0123456789abcdef0123"}}"#;
        let read: SidecarConfig = serde_json::from_str(text).expect("parses");
        assert_eq!(read, minimal());
        let tls: TlsConfig =
            serde_json::from_str(r#"{"ca_cert_pem":"cert","ca_key_pem":"key"}"#).expect("tls");
        assert_eq!(tls, TlsConfig::new("cert".to_owned(), "key".to_owned()));
    }

    #[test]
    fn the_version_is_read_alone_whatever_else_the_document_holds() {
        let v: Versioned = serde_json::from_str(r#"{"version":7,"unknown":{"x":1}}"#).expect("v");
        assert_eq!(v.version, Some(7));
        let none: Versioned = serde_json::from_str(r#"{"env":"e"}"#).expect("none");
        assert_eq!(none.version, None);
    }
}
