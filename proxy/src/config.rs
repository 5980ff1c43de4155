//! The sidecar's configuration file, written by the orchestrator (see
//! `docs/sidecar-config.md`). Parsed and checked once at start; the data path only ever sees
//! the typed, compiled [`Settings`].

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use af_policy::error::{Report, codes};
use ipnet::IpNet;
use serde::Deserialize;

use af_policy::egress::{Catalogue, EgressSpec};

/// The whole file.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// The environment id, copied into every journal record.
    pub env: String,
    /// The egress catalogue, as in `af.yaml`.
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
}

/// The environment's own network.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Inside {
    /// Subnets of the environment's internal network; the guard dials them directly.
    #[serde(default)]
    pub subnets: Vec<IpNet>,
    /// Names that are inside the environment (service names, runtime zones), for DNS.
    #[serde(default)]
    pub names: Vec<String>,
}

/// Address guard overrides.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GuardConfig {
    /// Trusted upstream networks: loopback, private, CGNAT or unique-local addresses in these
    /// CIDRs may be dialled. Empty by default; meant for tests on loopback. Never opens
    /// link-local (metadata), unspecified, multicast, broadcast or embedded-IPv4 forms.
    #[serde(default)]
    pub trusted_networks: Vec<IpNet>,
}

/// Where each listener binds; `listen: null` turns a listener off.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Listeners {
    /// Explicit proxy (absolute-form and CONNECT).
    #[serde(default = "Listeners::default_proxy")]
    pub proxy: ProxyListener,
    /// Transparent HTTP.
    #[serde(default = "Listeners::default_http")]
    pub transparent_http: TransparentHttp,
    /// Transparent TLS.
    #[serde(default = "Listeners::default_tls")]
    pub transparent_tls: TransparentTls,
    /// The environment's DNS server (af-dns), UDP and TCP.
    #[serde(default = "Listeners::default_dns")]
    pub dns: DnsListener,
}

impl Default for Listeners {
    fn default() -> Self {
        Self {
            proxy: Self::default_proxy(),
            transparent_http: Self::default_http(),
            transparent_tls: Self::default_tls(),
            dns: Self::default_dns(),
        }
    }
}

impl Listeners {
    fn default_proxy() -> ProxyListener {
        ProxyListener {
            listen: listen_3128(),
        }
    }
    fn default_http() -> TransparentHttp {
        TransparentHttp {
            listen: listen_80(),
            advertised_port: 80,
        }
    }
    fn default_tls() -> TransparentTls {
        TransparentTls {
            listen: listen_443(),
            upstream_port: 443,
        }
    }
    fn default_dns() -> DnsListener {
        DnsListener {
            listen: listen_53(),
            inside_resolver: None,
            answer_v4: None,
            answer_v6: None,
            inside_zones: Vec::new(),
            udp_sockets: 0,
            seen_capacity: None,
        }
    }
}

/// The explicit proxy listener.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProxyListener {
    /// Bind address, default `0.0.0.0:3128`.
    #[serde(default = "listen_3128")]
    pub listen: Option<SocketAddr>,
}

/// The transparent HTTP listener.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TransparentHttp {
    /// Bind address, default `0.0.0.0:80`.
    #[serde(default = "listen_80")]
    pub listen: Option<SocketAddr>,
    /// The port requests are decided and forwarded on (never taken from `Host`), default 80.
    #[serde(default = "default_port_80")]
    pub advertised_port: u16,
}

/// The transparent TLS listener.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TransparentTls {
    /// Bind address, default `0.0.0.0:443`.
    #[serde(default = "listen_443")]
    pub listen: Option<SocketAddr>,
    /// The upstream port connections are decided and tunnelled to, default 443.
    #[serde(default = "default_port_443")]
    pub upstream_port: u16,
}

/// The DNS listener, served by af-dns: outside names answer with `answer_v4`, inside names
/// are forwarded to `inside_resolver`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DnsListener {
    /// Bind address (UDP and TCP), default `0.0.0.0:53`.
    #[serde(default = "listen_53")]
    pub listen: Option<SocketAddr>,
    /// The runtime's resolver for inside names (Docker: `127.0.0.11:53`). Required when DNS
    /// is on.
    #[serde(default)]
    pub inside_resolver: Option<SocketAddr>,
    /// The sidecar's own inside IPv4 address, the answer for every outside name. Required
    /// when DNS is on.
    #[serde(default)]
    pub answer_v4: Option<Ipv4Addr>,
    /// The sidecar's inside IPv6 address, answered for AAAA when the catalogue allows IPv6.
    #[serde(default)]
    pub answer_v6: Option<Ipv6Addr>,
    /// The runtime's own zones, forwarded like inside names (e.g. `svc.cluster.local`).
    #[serde(default)]
    pub inside_zones: Vec<String>,
    /// UDP sockets sharing the port (SO_REUSEPORT); 0 means one per core.
    #[serde(default)]
    pub udp_sockets: usize,
    /// How many (name, type) pairs are remembered as seen; default af-dns's (65 536).
    #[serde(default)]
    pub seen_capacity: Option<usize>,
}

impl DnsListener {
    /// The af-dns configuration, or `None` when DNS is off.
    fn dns_config(
        &self,
        inside: &Inside,
        allow_ipv6: bool,
    ) -> Result<Option<af_dns::DnsConfig>, Report> {
        let Some(listen) = self.listen else {
            return Ok(None);
        };
        let (Some(answer_v4), Some(upstream)) = (self.answer_v4, self.inside_resolver) else {
            return Err(refuse(
                "listeners.dns needs answer_v4 and inside_resolver when it listens.",
            )
            .with_next("Set them, or set listeners.dns.listen to null to turn DNS off."));
        };
        let mut config = af_dns::DnsConfig::new(answer_v4, inside.subnets.clone(), upstream);
        config.listen = listen;
        config.udp_sockets = self.udp_sockets;
        config.sidecar_v6 = self.answer_v6;
        // AAAA gets an answer only when IPv6 is allowed and the sidecar has an address for it.
        config.allow_ipv6 = allow_ipv6 && self.answer_v6.is_some();
        config.inside_names = inside.names.clone();
        config.inside_zones = self.inside_zones.clone();
        if let Some(capacity) = self.seen_capacity {
            config.seen_capacity = capacity;
        }
        config.validate().map_err(crate::dns::refusal)?;
        Ok(Some(config))
    }
}

// A listener missing from the file listens on its default address; `listen: null` turns it off.
fn listen_3128() -> Option<SocketAddr> {
    Some(SocketAddr::from(([0, 0, 0, 0], 3128)))
}
fn listen_80() -> Option<SocketAddr> {
    Some(SocketAddr::from(([0, 0, 0, 0], 80)))
}
fn listen_443() -> Option<SocketAddr> {
    Some(SocketAddr::from(([0, 0, 0, 0], 443)))
}
fn listen_53() -> Option<SocketAddr> {
    Some(SocketAddr::from(([0, 0, 0, 0], 53)))
}
fn default_port_80() -> u16 {
    80
}
fn default_port_443() -> u16 {
    443
}

/// The admin API.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Admin {
    /// Bind address, default `127.0.0.1:9901`.
    #[serde(default = "Admin::default_listen")]
    pub listen: SocketAddr,
    /// Bearer token required on every route but `/healthz` (at least 16 characters).
    pub token: String,
}

impl Admin {
    fn default_listen() -> SocketAddr {
        SocketAddr::from(([127, 0, 0, 1], 9901))
    }
}

/// The journal.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct JournalConfig {
    /// Directory of segment files, default `/var/lib/af/journal`.
    pub dir: PathBuf,
    /// Segment size in bytes, default 8 MiB.
    pub segment_bytes: u64,
    /// Segments kept, default 8 (so 64 MiB in all).
    pub max_segments: usize,
    /// Queue between request tasks and the writer, default 65536 records.
    pub queue: usize,
}

impl Default for JournalConfig {
    fn default() -> Self {
        Self {
            dir: PathBuf::from("/var/lib/af/journal"),
            segment_bytes: 8 * 1024 * 1024,
            max_segments: 8,
            queue: 65_536,
        }
    }
}

/// Limits and timeouts.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Limits {
    /// Client connections open at once across the data listeners, default 4096.
    pub max_connections: usize,
    /// Largest request head (start line and headers), default 64 KiB.
    pub max_header_bytes: usize,
    /// Time to receive a request head, default 10 s.
    pub header_read_timeout_ms: u64,
    /// A connection or tunnel with no traffic either way is closed after this, default 300 s.
    pub idle_timeout_ms: u64,
    /// Time to receive a TLS ClientHello, default 5 s.
    pub client_hello_timeout_ms: u64,
    /// Time to connect to an upstream, default 10 s.
    pub upstream_connect_timeout_ms: u64,
    /// Time to resolve a name, default 5 s.
    pub resolve_timeout_ms: u64,
    /// Idle pooled upstream connections kept per host, default 32.
    pub pool_max_idle_per_host: usize,
    /// Tunnel copy buffer per direction, default 64 KiB.
    pub tunnel_buffer_bytes: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_connections: 4096,
            max_header_bytes: 64 * 1024,
            header_read_timeout_ms: 10_000,
            idle_timeout_ms: 300_000,
            client_hello_timeout_ms: 5_000,
            upstream_connect_timeout_ms: 10_000,
            resolve_timeout_ms: 5_000,
            pool_max_idle_per_host: 32,
            tunnel_buffer_bytes: 64 * 1024,
        }
    }
}

/// The checked configuration the sidecar runs with.
pub struct Settings {
    /// The file as written.
    pub config: Config,
    /// The compiled catalogue.
    pub catalogue: Arc<Catalogue>,
    /// The resolver's address.
    pub resolver: SocketAddr,
    /// The DNS server's configuration, when it is on.
    pub dns: Option<af_dns::DnsConfig>,
}

fn refuse(statement: impl Into<String>) -> Report {
    Report::new(&codes::NET_CONFIG, statement)
}

impl Config {
    /// Read, parse and check the file: JSON when it ends in `.json`, YAML otherwise.
    pub fn load(path: &Path) -> Result<Settings, Report> {
        let text = std::fs::read_to_string(path).map_err(|e| {
            refuse(format!(
                "The sidecar configuration {} could not be read: {e}.",
                path.display()
            ))
            .with_next("Pass --config with the file the orchestrator wrote.")
        })?;
        let json = path
            .extension()
            .is_some_and(|e| e.eq_ignore_ascii_case("json"));
        let config = Self::parse(&text, json).map_err(|e| {
            refuse(format!(
                "The sidecar configuration {} is invalid: {e}.",
                path.display()
            ))
        })?;
        config.check()
    }

    /// Parse a document (no checks beyond the types).
    pub fn parse(text: &str, json: bool) -> Result<Config, String> {
        if json {
            serde_json::from_str(text).map_err(|e| e.to_string())
        } else {
            // The YAML reader draws a source snippet under its first line; the report keeps
            // one line (it already names line and column).
            serde_saphyr::from_str(text).map_err(|e| {
                let full = e.to_string();
                let first = full.lines().next().unwrap_or_default();
                first.trim_start_matches("error: ").to_owned()
            })
        }
    }

    /// Check every value and compile the catalogue.
    pub fn check(self) -> Result<Settings, Report> {
        let env_ok = !self.env.is_empty()
            && self.env.len() <= 63
            && self
                .env
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
        if !env_ok {
            return Err(refuse(format!(
                "env {:?} is not an environment id (1-63 letters, digits, '-' or '_').",
                self.env
            )));
        }
        let catalogue = Catalogue::compile(&self.egress).map_err(|problems| {
            let list: Vec<String> = problems
                .iter()
                .map(|p| format!("rules[{}].{}: {}", p.rule, p.field, p.message))
                .collect();
            refuse(format!("egress does not compile: {}.", list.join("; "))).with_next(
                "Fix the egress rules named; `af net policy` checks a manifest's catalogue.",
            )
        })?;
        let resolver = parse_resolver(&self.resolver).ok_or_else(|| {
            refuse(format!(
                "resolver {:?} is not an IP address or IP:PORT.",
                self.resolver
            ))
        })?;
        if self.admin.token.len() < 16 {
            return Err(refuse("admin.token must be at least 16 characters."));
        }
        for net in &self.guard.trusted_networks {
            check_trusted(net)?;
        }
        let j = &self.journal;
        if j.segment_bytes < 64 * 1024 || j.max_segments < 2 || j.queue == 0 {
            return Err(refuse(
                "journal bounds are too small (segment_bytes >= 65536, max_segments >= 2, queue >= 1).",
            ));
        }
        let l = &self.limits;
        let positive = [
            ("max_connections", l.max_connections as u64),
            ("header_read_timeout_ms", l.header_read_timeout_ms),
            ("idle_timeout_ms", l.idle_timeout_ms),
            ("client_hello_timeout_ms", l.client_hello_timeout_ms),
            ("upstream_connect_timeout_ms", l.upstream_connect_timeout_ms),
            ("resolve_timeout_ms", l.resolve_timeout_ms),
        ];
        if let Some((name, _)) = positive.iter().find(|(_, v)| *v == 0) {
            return Err(refuse(format!("limits.{name} must be greater than 0.")));
        }
        if l.max_header_bytes < 8192 {
            return Err(refuse("limits.max_header_bytes must be at least 8192."));
        }
        if l.tunnel_buffer_bytes < 4096 {
            return Err(refuse("limits.tunnel_buffer_bytes must be at least 4096."));
        }
        let mut bound: Vec<(&str, SocketAddr)> = vec![("admin.listen", self.admin.listen)];
        let ls = &self.listeners;
        for (name, addr) in [
            ("listeners.proxy.listen", ls.proxy.listen),
            (
                "listeners.transparent_http.listen",
                ls.transparent_http.listen,
            ),
            (
                "listeners.transparent_tls.listen",
                ls.transparent_tls.listen,
            ),
        ] {
            if let Some(addr) = addr {
                if addr.port() != 0
                    && let Some((other, _)) = bound.iter().find(|(_, a)| *a == addr)
                {
                    return Err(refuse(format!("{name} and {other} both listen on {addr}.")));
                }
                bound.push((name, addr));
            }
        }
        let dns = self
            .listeners
            .dns
            .dns_config(&self.inside, catalogue.allow_ipv6())?;
        Ok(Settings {
            config: self,
            catalogue: Arc::new(catalogue),
            resolver,
            dns,
        })
    }
}

fn parse_resolver(s: &str) -> Option<SocketAddr> {
    s.parse::<SocketAddr>()
        .ok()
        .or_else(|| s.parse::<IpAddr>().ok().map(|ip| SocketAddr::new(ip, 53)))
}

// A trusted network may only widen the guard for loopback/private upstreams, never for the
// whole internet or the metadata endpoint.
fn check_trusted(net: &IpNet) -> Result<(), Report> {
    let too_wide = match net {
        IpNet::V4(n) => n.prefix_len() < 8,
        IpNet::V6(n) => n.prefix_len() < 16,
    };
    let metadata: IpAddr = IpAddr::from([169, 254, 169, 254]);
    if too_wide || net.contains(&metadata) {
        return Err(refuse(format!(
            "guard.trusted_networks entry {net} is too wide (at most /8 for IPv4, /16 for IPv6, never covering 169.254.0.0/16)."
        )));
    }
    Ok(())
}

impl Limits {
    /// A timeout in milliseconds as a duration.
    pub fn ms(v: u64) -> Duration {
        Duration::from_millis(v)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MINIMAL: &str = r#"
env: env-1
resolver: 127.0.0.1:5353
egress:
  default: block
  rules:
    - host: api.allowed.test
      mode: allow
admin:
  token: 0123456789abcdef0123
inside:
  subnets: ["198.51.100.0/24"]
listeners:
  dns:
    answer_v4: 198.51.100.2
    inside_resolver: 127.0.0.11:53
"#;

    #[test]
    fn minimal_yaml_takes_every_default() {
        let s = Config::parse(MINIMAL, false)
            .expect("parses")
            .check()
            .expect("checks");
        assert_eq!(s.resolver, "127.0.0.1:5353".parse().expect("addr"));
        assert_eq!(s.config.limits.max_connections, 4096);
        assert_eq!(s.config.journal.max_segments, 8);
        assert_eq!(s.config.listeners.transparent_http.advertised_port, 80);
        assert_eq!(s.config.admin.listen.port(), 9901);
        assert!(s.config.guard.trusted_networks.is_empty());
        assert_eq!(s.config.listeners.proxy.listen, listen_3128());
        assert_eq!(s.dns.map(|d| d.listen), listen_53());
    }

    #[test]
    fn a_listener_is_off_only_when_its_listen_is_null() {
        let text = MINIMAL.replace("  dns:\n", "  dns:\n    listen: null\n");
        let s = Config::parse(&text, false)
            .expect("parses")
            .check()
            .expect("checks");
        assert!(s.dns.is_none());
        let text = MINIMAL.replace("    answer_v4: 198.51.100.2\n", "");
        let err = Config::parse(&text, false).expect("parses").check().err();
        assert!(err.is_some_and(|e| e.statement.contains("answer_v4")));
    }

    #[test]
    fn json_is_accepted_and_unknown_keys_are_refused() {
        let json = r#"{"env":"e","resolver":"127.0.0.1","egress":{},"admin":{"token":"0123456789abcdef"},"listeners":{"dns":{"listen":null}}}"#;
        let s = Config::parse(json, true)
            .expect("parses")
            .check()
            .expect("checks");
        assert_eq!(s.resolver.port(), 53);
        let bad = r#"{"env":"e","resolver":"127.0.0.1","egress":{},"admin":{"token":"0123456789abcdef"},"extra":1}"#;
        assert!(Config::parse(bad, true).is_err());
    }

    #[test]
    fn an_egress_catalogue_that_does_not_compile_is_refused() {
        let text = MINIMAL.replace("mode: allow", "mode: allow\n      rate_limit: lots");
        let err = Config::parse(&text, false).expect("parses").check().err();
        let err = err.expect("refused");
        assert_eq!(err.code.code, "AF-NET-001");
        assert!(err.statement.contains("egress does not compile"), "{err}");
        assert!(err.statement.contains("rules[0].rate_limit"), "{err}");
    }

    #[test]
    fn a_json_file_is_read_as_json_and_a_yaml_error_names_its_line() {
        let dir = std::env::temp_dir().join(format!("af-proxy-config-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("temp dir");
        let json = dir.join("sidecar.json");
        std::fs::write(
            &json,
            r#"{"env":"e","resolver":"127.0.0.1:53","egress":{"default":"allow"},"admin":{"token":"0123456789abcdef"}}"#,
        )
        .expect("write");
        let s = Config::load(&json).expect("loads");
        assert_eq!(s.config.env, "e");
        let yaml = dir.join("sidecar.yaml");
        std::fs::write(&yaml, "env: e\nlimits:\n  max_connections: [\n").expect("write");
        let err = Config::load(&yaml).err().expect("refused");
        assert_eq!(err.code.code, "AF-NET-001");
        assert!(err.statement.contains("line"), "{err}");
        assert!(!err.statement.contains('\n'), "{err}");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn wide_trusted_networks_are_refused() {
        for net in ["0.0.0.0/0", "169.254.0.0/16", "128.0.0.0/1", "::/0"] {
            let text = format!("{MINIMAL}guard:\n  trusted_networks: [\"{net}\"]\n");
            let err = Config::parse(&text, false).expect("parses").check().err();
            assert!(err.is_some_and(|e| e.code.code == "AF-NET-001"), "{net}");
        }
    }
}
