//! The sidecar's configuration: the document the orchestrator writes ([`SidecarConfig`], see
//! `docs/sidecar-config.md`), read and checked once at start. The data path only ever sees the
//! typed, compiled [`Settings`].

use std::net::{IpAddr, SocketAddr};
use std::path::Path;
use std::sync::Arc;

use af_policy::egress::Catalogue;
use af_policy::error::{Report, codes};
use af_sidecar_api::config::{Admin, ApiKey, DnsListener, Inside, VERSION, Versioned};
use http::{HeaderValue, Uri};
use ipnet::IpNet;

pub use af_sidecar_api::config::SidecarConfig;
pub(crate) use af_sidecar_api::config::{Limits, ModelConfig};

/// Most data threads a configuration may ask for.
const MAX_DATA_THREADS: usize = 256;
/// Longest a record may wait for its commit.
const MAX_COMMIT_INTERVAL_MS: u64 = 1_000;

/// The checked configuration the sidecar runs with.
pub struct Settings {
    /// The file as written.
    pub config: SidecarConfig,
    /// The compiled catalogue.
    pub catalogue: Arc<Catalogue>,
    /// The resolver's address.
    pub resolver: SocketAddr,
    /// The DNS server's configuration, when it is on.
    pub dns: Option<af_dns::DnsConfig>,
}

/// Why a text is not a configuration this sidecar reads.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DocumentError {
    /// It is of another version than [`VERSION`], or says none.
    #[error("{}", match .0 {
        Some(found) => format!("is version {found}, and this sidecar reads version {VERSION}"),
        None => format!("has no version, and this sidecar reads version {VERSION}"),
    })]
    Version(Option<u32>),
    /// It does not have the document's shape: its syntax, a type, a key unknown or missing.
    #[error("is invalid: {0}")]
    Shape(String),
}

impl DocumentError {
    /// The product's code for it.
    pub fn code(&self) -> &'static af_policy::error::ErrorCode {
        match self {
            DocumentError::Version(_) => &codes::NET_CONFIG_VERSION,
            DocumentError::Shape(_) => &codes::NET_CONFIG,
        }
    }
}

/// Read, parse and check the file: JSON when it ends in `.json`, YAML otherwise. Nothing is
/// bound or written.
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
    let doc = parse(&text, json).map_err(|e| {
        Report::new(
            e.code(),
            format!("The sidecar configuration {} {e}.", path.display()),
        )
    })?;
    check(doc)
}

/// Parse a document (no checks beyond the types). Its version is read first, so a document of
/// another version is refused as that, whatever else it holds.
pub fn parse(text: &str, json: bool) -> Result<SidecarConfig, DocumentError> {
    let versioned: Versioned = read(text, json)?;
    if versioned.version != Some(VERSION) {
        return Err(DocumentError::Version(versioned.version));
    }
    read(text, json)
}

fn read<T: serde::de::DeserializeOwned>(text: &str, json: bool) -> Result<T, DocumentError> {
    if json {
        serde_json::from_str(text).map_err(|e| DocumentError::Shape(e.to_string()))
    } else {
        // The YAML reader draws a source snippet under its first line; the report keeps
        // one line (it already names line and column).
        serde_saphyr::from_str(text).map_err(|e| {
            let full = e.to_string();
            let first = full.lines().next().unwrap_or_default();
            DocumentError::Shape(first.trim_start_matches("error: ").to_owned())
        })
    }
}

/// Check every value of a document and compile it: the catalogue, the resolver, the DNS server's
/// configuration.
pub fn check(doc: SidecarConfig) -> Result<Settings, Report> {
    if doc.version != VERSION {
        return Err(Report::new(
            &codes::NET_CONFIG_VERSION,
            format!(
                "The sidecar configuration {}.",
                DocumentError::Version(Some(doc.version))
            ),
        ));
    }
    let env_ok = !doc.env.is_empty()
        && doc.env.len() <= 63
        && doc
            .env
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
    if !env_ok {
        return Err(refuse(format!(
            "env {:?} is not an environment id (1-63 letters, digits, '-' or '_').",
            doc.env
        )));
    }
    let catalogue = Catalogue::compile(&doc.egress).map_err(|problems| {
        let list: Vec<String> = problems
            .iter()
            .map(|p| format!("rules[{}].{}: {}", p.rule, p.field, p.message))
            .collect();
        refuse(format!("egress does not compile: {}.", list.join("; ")))
            .with_next("Fix the egress rules named; `af net policy` checks a manifest's catalogue.")
    })?;
    let resolver = parse_resolver(&doc.resolver).ok_or_else(|| {
        refuse(format!(
            "resolver {:?} is not an IP address or IP:PORT.",
            doc.resolver
        ))
    })?;
    if doc.admin.token.len() < Admin::MIN_TOKEN_LEN {
        return Err(refuse("admin.token must be at least 16 characters."));
    }
    if let Some(c) = &doc.containment {
        if c.token.len() < Admin::MIN_TOKEN_LEN {
            return Err(refuse("containment.token must be at least 16 characters."));
        }
        if c.token == doc.admin.token {
            return Err(refuse(
                "containment.token must differ from admin.token: the watchers hold it, and it must open nothing else.",
            ));
        }
        if c.max_watchers == 0 {
            return Err(refuse("containment.max_watchers must be at least 1."));
        }
    }
    for net in &doc.guard.trusted_networks {
        check_trusted(net)?;
    }
    if let Some(model) = &doc.modes.model {
        check_model(model)?;
    }
    let j = &doc.journal;
    if j.segment_bytes < 64 * 1024 || j.max_segments < 2 || j.queue == 0 {
        return Err(refuse(
            "journal bounds are too small (segment_bytes >= 65536, max_segments >= 2, queue >= 1).",
        ));
    }
    if j.commit_interval_ms > MAX_COMMIT_INTERVAL_MS {
        return Err(refuse(format!(
            "journal.commit_interval_ms must be at most {MAX_COMMIT_INTERVAL_MS}."
        )));
    }
    let l = &doc.limits;
    let positive = [
        ("max_connections", l.max_connections as u64),
        ("header_read_timeout_ms", l.header_read_timeout_ms),
        ("idle_timeout_ms", l.idle_timeout_ms),
        ("client_hello_timeout_ms", l.client_hello_timeout_ms),
        ("upstream_connect_timeout_ms", l.upstream_connect_timeout_ms),
        ("resolve_timeout_ms", l.resolve_timeout_ms),
        ("dial_timeout_ms", l.dial_timeout_ms),
        (
            "max_upstream_connections",
            l.max_upstream_connections as u64,
        ),
    ];
    if let Some((name, _)) = positive.iter().find(|(_, v)| *v == 0) {
        return Err(refuse(format!("limits.{name} must be greater than 0.")));
    }
    if l.max_header_bytes < 8192 {
        return Err(refuse("limits.max_header_bytes must be at least 8192."));
    }
    if !(8..=10_000).contains(&l.max_headers) {
        return Err(refuse("limits.max_headers must be from 8 to 10000."));
    }
    if l.tunnel_buffer_bytes < 4096 {
        return Err(refuse("limits.tunnel_buffer_bytes must be at least 4096."));
    }
    if l.data_threads > MAX_DATA_THREADS {
        return Err(refuse(format!(
            "limits.data_threads must be at most {MAX_DATA_THREADS} (0: one per core)."
        )));
    }
    let m = &doc.modes;
    if m.mock_body_bytes == 0
        || m.capture_body_bytes == 0
        || m.buffered_body_bytes < m.mock_body_bytes.max(m.capture_body_bytes)
    {
        return Err(refuse(
            "modes.mock_body_bytes and modes.capture_body_bytes must be greater than 0, and modes.buffered_body_bytes at least the larger of them.",
        ));
    }
    // A sandbox credential is sent upstream for real: a live one must never be configured.
    if let Some((name, hit)) = doc.modes.credentials.iter().find_map(|(name, value)| {
        crate::decide::tripwire::scan_body(value.as_bytes()).map(|h| (name, h))
    }) {
        return Err(refuse(format!(
            "modes.credentials.{name} holds {}, and sandbox mode only forwards test credentials.",
            hit.what
        ))
        .with_next(format!("Set {name} to the provider's test key.")));
    }
    let mut bound: Vec<(&str, SocketAddr)> = vec![("admin.listen", doc.admin.listen)];
    let ls = &doc.listeners;
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
    let dns = dns_config(&doc.listeners.dns, &doc.inside, catalogue.allow_ipv6())?;
    Ok(Settings {
        config: doc,
        catalogue: Arc::new(catalogue),
        resolver,
        dns,
    })
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

/// The chat-completions URL of `model`, checked: `http` or `https`, a host, no credentials or
/// query.
pub(crate) fn model_endpoint(model: &ModelConfig) -> Result<Uri, Report> {
    let base = model.base_url.trim_end_matches('/');
    // The URL is not echoed: a mistaken one may hold credentials.
    let bad = |why: &str| {
        refuse(format!("modes.model.base_url {why}."))
            .with_next("Give the API's base URL, e.g. https://api.openai.com/v1.")
    };
    let uri: Uri = format!("{base}/chat/completions")
        .parse()
        .map_err(|e| bad(&format!("is not a URL: {e}")))?;
    if !matches!(uri.scheme_str(), Some("http" | "https")) {
        return Err(bad("must start with http:// or https://"));
    }
    match uri.authority() {
        None => return Err(bad("names no host")),
        Some(a) if a.as_str().contains('@') => {
            return Err(bad("must not hold credentials (api_key carries the key)"));
        }
        Some(_) => {}
    }
    if uri.query().is_some() {
        return Err(bad("must not have a query"));
    }
    Ok(uri)
}

/// `Bearer <key>` as a header value marked sensitive, or `None` if the key is empty or not
/// a valid header value.
pub(crate) fn model_authorization(key: &ApiKey) -> Option<HeaderValue> {
    if key.expose().is_empty() {
        return None;
    }
    let mut value = HeaderValue::from_str(&format!("Bearer {}", key.expose())).ok()?;
    value.set_sensitive(true);
    Some(value)
}

/// Check every field of the model synth may ask.
fn check_model(model: &ModelConfig) -> Result<(), Report> {
    model_endpoint(model)?;
    if model_authorization(&model.api_key).is_none() {
        return Err(refuse(
            "modes.model.api_key must be a non-empty header value (printable ASCII).",
        ));
    }
    if model.model.trim().is_empty() {
        return Err(refuse("modes.model.model must name a model."));
    }
    if model.timeout_ms == 0 || model.cache_entries == 0 {
        return Err(refuse(
            "modes.model.timeout_ms and modes.model.cache_entries must be greater than 0.",
        ));
    }
    Ok(())
}

/// The af-dns configuration of `section`, or `None` when DNS is off.
fn dns_config(
    section: &DnsListener,
    inside: &Inside,
    allow_ipv6: bool,
) -> Result<Option<af_dns::DnsConfig>, Report> {
    let Some(listen) = section.listen else {
        return Ok(None);
    };
    let (Some(answer_v4), Some(upstream)) = (section.answer_v4, section.inside_resolver) else {
        return Err(
            refuse("listeners.dns needs answer_v4 and inside_resolver when it listens.")
                .with_next("Set them, or set listeners.dns.listen to null to turn DNS off."),
        );
    };
    let mut config = af_dns::DnsConfig::new(answer_v4, inside.subnets.clone(), upstream);
    config.listen = listen;
    config.udp_sockets = section.udp_sockets;
    config.sidecar_v6 = section.answer_v6;
    // AAAA gets an answer only when IPv6 is allowed and the sidecar has an address for it.
    config.allow_ipv6 = allow_ipv6 && section.answer_v6.is_some();
    config.inside_names = inside.names.clone();
    config.inside_hosts = inside.hosts.clone();
    config.inside_zones = section.inside_zones.clone();
    config.forward_unlisted_single_labels = section.forward_unlisted_short_names;
    config.sightings_per_second = section.sightings_per_second.get();
    config.tcp_idle_secs = section.tcp_idle_secs.get();
    config.seen_capacity = section.seen_capacity;
    config.validate().map_err(crate::dns::refusal)?;
    Ok(Some(config))
}

fn refuse(statement: impl Into<String>) -> Report {
    Report::new(&codes::NET_CONFIG, statement)
}

#[cfg(test)]
mod tests {
    use super::*;

    const MINIMAL: &str = r#"
version: 1
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
        let s = check(parse(MINIMAL, false).expect("parses")).expect("checks");
        assert_eq!(s.resolver, "127.0.0.1:5353".parse().expect("addr"));
        assert_eq!(s.config.limits.max_connections, 4096);
        assert_eq!(s.config.journal.max_segments, 8);
        assert_eq!(s.config.listeners.transparent_http.advertised_port, 80);
        assert_eq!(s.config.admin.listen.port(), 9901);
        assert!(s.config.guard.trusted_networks.is_empty());
        assert_eq!(
            s.config.listeners.proxy.listen,
            Some(SocketAddr::from(([0, 0, 0, 0], 3128)))
        );
        assert_eq!(
            s.dns.map(|d| d.listen),
            Some(SocketAddr::from(([0, 0, 0, 0], 53)))
        );
    }

    #[test]
    fn a_listener_is_off_only_when_its_listen_is_null() {
        let text = MINIMAL.replace("  dns:\n", "  dns:\n    listen: null\n");
        let s = check(parse(&text, false).expect("parses")).expect("checks");
        assert!(s.dns.is_none());
        let text = MINIMAL.replace("    answer_v4: 198.51.100.2\n", "");
        let err = check(parse(&text, false).expect("parses")).err();
        assert!(err.is_some_and(|e| e.statement.contains("answer_v4")));
    }

    #[test]
    fn json_is_accepted_and_unknown_keys_are_refused() {
        let json = r#"{"version":1,"env":"e","resolver":"127.0.0.1","egress":{},"admin":{"token":"0123456789abcdef"},"listeners":{"dns":{"listen":null}}}"#;
        let s = check(parse(json, true).expect("parses")).expect("checks");
        assert_eq!(s.resolver.port(), 53);
        let bad = r#"{"version":1,"env":"e","resolver":"127.0.0.1","egress":{},"admin":{"token":"0123456789abcdef"},"extra":1}"#;
        assert!(parse(bad, true).is_err());
    }

    #[test]
    fn an_egress_catalogue_that_does_not_compile_is_refused() {
        let text = MINIMAL.replace("mode: allow", "mode: allow\n      rate_limit: lots");
        let err = check(parse(&text, false).expect("parses")).err();
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
            r#"{"version":1,"env":"e","resolver":"127.0.0.1:53","egress":{"default":"allow"},"admin":{"token":"0123456789abcdef"},"listeners":{"dns":{"listen":null}}}"#,
        )
        .expect("write");
        let s = load(&json).expect("loads");
        assert_eq!(s.config.env, "e");
        let yaml = dir.join("sidecar.yaml");
        std::fs::write(&yaml, "version: 1\nenv: e\nlimits:\n  max_connections: [\n")
            .expect("write");
        let err = load(&yaml).err().expect("refused");
        assert_eq!(err.code.code, "AF-NET-001");
        assert!(err.statement.contains("line"), "{err}");
        assert!(!err.statement.contains('\n'), "{err}");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_model_takes_defaults_and_bad_values_are_refused_without_the_key() {
        let with = |model: &str| {
            check(parse(&format!("{MINIMAL}modes:\n  model:\n{model}"), false).expect("parses"))
        };
        let good =
            "    base_url: https://llm.example/v1/\n    api_key: sk-secret-42\n    model: m\n";
        let s = with(good).expect("checks");
        let model = s.config.modes.model.expect("configured");
        assert_eq!((model.timeout_ms, model.cache_entries), (10_000, 1024));
        assert_eq!(
            model_endpoint(&model).expect("a URL").to_string(),
            "https://llm.example/v1/chat/completions"
        );
        assert!(!format!("{model:?}").contains("sk-secret-42"));
        let bad = [
            (
                good.replace("https://llm.example/v1/", "ftp://llm.example"),
                "http:// or https://",
            ),
            (
                good.replace("https://", "https://user:sk-secret-42@"),
                "credentials",
            ),
            (good.replace("/v1/", "/v1?x=1"), "query"),
            (
                good.replace("api_key: sk-secret-42", "api_key: \"\""),
                "api_key",
            ),
            (good.replace("model: m", "model: \" \""), "name a model"),
            (format!("{good}    cache_entries: 0\n"), "cache_entries"),
            (format!("{good}    timeout_ms: 0\n"), "timeout_ms"),
        ];
        for (model, expected) in bad {
            let err = with(&model).err().expect("refused");
            assert_eq!(err.code.code, "AF-NET-001");
            assert!(err.statement.contains(expected), "{err}");
            assert!(!err.to_string().contains("sk-secret-42"), "{err}");
        }
    }

    #[test]
    fn header_fields_are_bounded_and_undecided_records_budgeted_by_default() {
        let s = check(parse(MINIMAL, false).expect("parses")).expect("checks");
        assert_eq!(s.config.limits.max_headers, 100);
        assert_eq!(s.config.journal.undecided_per_second.get(), 50);
        for bad in [7, 10_001] {
            let text = format!("{MINIMAL}limits:\n  max_headers: {bad}\n");
            let err = check(parse(&text, false).expect("parses")).err();
            assert!(
                err.is_some_and(|e| e.statement.contains("limits.max_headers")),
                "{bad}"
            );
        }
        let text = format!("{MINIMAL}journal:\n  undecided_per_second: 0\n");
        assert!(parse(&text, false).is_err(), "0 is not a budget");
    }

    #[test]
    fn journal_commits_are_paced_by_default_and_the_pace_is_bounded() {
        let s = check(parse(MINIMAL, false).expect("parses")).expect("checks");
        assert_eq!(s.config.journal.commit_interval_ms, 2);
        let text = format!("{MINIMAL}journal:\n  commit_interval_ms: 0\n");
        assert!(check(parse(&text, false).expect("parses")).is_ok());
        let text = format!("{MINIMAL}journal:\n  commit_interval_ms: 1001\n");
        let err = check(parse(&text, false).expect("parses")).err();
        assert!(err.is_some_and(|e| e.statement.contains("journal.commit_interval_ms")));
    }

    #[test]
    fn data_threads_default_to_the_cores_and_are_bounded() {
        let s = check(parse(MINIMAL, false).expect("parses")).expect("checks");
        assert_eq!(s.config.limits.data_threads, 0, "one per core");
        let text = format!("{MINIMAL}limits:\n  data_threads: 2\n");
        assert!(check(parse(&text, false).expect("parses")).is_ok());
        let text = format!(
            "{MINIMAL}limits:\n  data_threads: {}\n",
            MAX_DATA_THREADS + 1
        );
        let err = check(parse(&text, false).expect("parses")).err();
        assert!(err.is_some_and(|e| e.statement.contains("limits.data_threads")));
    }

    #[test]
    fn body_budgets_that_could_never_hold_a_body_are_refused() {
        let text =
            format!("{MINIMAL}modes:\n  mock_body_bytes: 2048\n  buffered_body_bytes: 1024\n");
        let err = check(parse(&text, false).expect("parses")).err();
        assert!(err.is_some_and(|e| e.statement.contains("buffered_body_bytes")));
        let text = format!(
            "{MINIMAL}modes:\n  mock_body_bytes: 2048\n  capture_body_bytes: 1024\n  buffered_body_bytes: 4096\n"
        );
        assert!(check(parse(&text, false).expect("parses")).is_ok());
    }

    #[test]
    fn a_live_looking_sandbox_credential_is_refused() {
        let text = format!(
            "{MINIMAL}modes:\n  credentials:\n    STRIPE_KEY: sk_live_51AbCdEfGhIjKlMnOp\n"
        );
        let err = check(parse(&text, false).expect("parses")).err();
        let err = err.expect("refused");
        assert!(err.statement.contains("STRIPE_KEY"), "{err}");
        assert!(!err.statement.contains("51AbCd"), "{err}");
    }

    #[test]
    fn wide_trusted_networks_are_refused() {
        for net in ["0.0.0.0/0", "169.254.0.0/16", "128.0.0.0/1", "::/0"] {
            let text = format!("{MINIMAL}guard:\n  trusted_networks: [\"{net}\"]\n");
            let err = check(parse(&text, false).expect("parses")).err();
            assert!(err.is_some_and(|e| e.code.code == "AF-NET-001"), "{net}");
        }
    }

    #[test]
    fn a_document_of_another_version_or_none_is_refused_as_that() {
        let dir = std::env::temp_dir().join(format!("af-proxy-version-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("temp dir");
        let path = dir.join("sidecar.yaml");
        let newer = MINIMAL.replace("version: 1", "version: 2\nnew_section: {}");
        let unversioned = MINIMAL.replace("version: 1\n", "");
        for (text, says) in [(newer, "is version 2"), (unversioned, "has no version")] {
            assert!(matches!(
                parse(&text, false),
                Err(DocumentError::Version(_))
            ));
            std::fs::write(&path, &text).expect("write");
            let err = load(&path).err().expect("refused");
            assert_eq!(err.code.code, "AF-NET-007", "{err}");
            assert!(err.statement.contains(says), "{err}");
            assert!(err.statement.contains("reads version 1"), "{err}");
        }
        let mut doc = parse(MINIMAL, false).expect("parses");
        doc.version = 3;
        let err = check(doc).err().expect("refused");
        assert_eq!(err.code.code, "AF-NET-007", "{err}");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
