//! af-proxy: the sidecar itself, from its static release build.
//!
//! The configuration follows `docs/sidecar-config.md`: egress default allow,
//! loopback as a trusted upstream network (the address guard refuses
//! loopback otherwise), the explicit proxy listener on a free port, the
//! transparent and SMTP listeners off, the journal in the temporary
//! directory. The journal stays on: it is part of what every request costs.
//!
//! Interception is configured in every run: a fresh environment CA in `tls`,
//! the upstream's certificate as the one extra upstream root, and one rule
//! for the upstream's HTTPS address (host and port, so no other scenario's
//! traffic matches it) that needs TLS opened: `allow` limited to `paths: [/]`
//! (each request decided, then forwarded over verified, pooled TLS), or, for
//! the `af-proxy (mock)` twin, `mock` from a one-route pack answering the
//! same body as the upstream.

use std::collections::BTreeMap;
use std::net::{Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use af_fixtures::cargo::{self, Linkage};
use af_sidecar_api::config::{
    Admin, DnsListener, ModesConfig, ProxyListener, SidecarConfig, SmtpListener, TlsConfig,
    TransparentHttp, TransparentTls,
};
use af_sidecar_api::{EgressSpec, Mode, RuleSpec};
use ipnet::{IpNet, Ipv4Net};
use serde_json::json;

use super::ca::EnvironmentCa;
use super::{Endpoint, Env, Ready, Running, Support, System};
use crate::error::{BenchError, Result};
use crate::scenarios::Scenario;
use crate::upstream::{self, SMALL_PATH};

/// The fixture pack the mock twin answers from, as a rule's `fixtures` names it.
const MOCK_PACK: &str = "bench-pack.yaml";

/// What af-proxy does with a request inside an intercepted connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Answering {
    /// Decide it, then forward it to the upstream over verified TLS.
    Forward,
    /// Answer it locally from a fixture pack (mock mode); nothing is forwarded.
    Mock,
}

/// The admin API's bearer token in every configuration the harness writes.
pub(crate) const ADMIN_TOKEN: &str = "af-bench-admin-token-0123";

/// A change laid over the harness's configuration before it is written.
type Tune = Arc<dyn Fn(&mut SidecarConfig) + Send + Sync>;

/// af-proxy, started from `binary`.
pub(crate) struct AfProxy {
    binary: PathBuf,
    /// The name in the table.
    name: String,
    /// Whether to turn on the DNS listener (af-dns inside af-proxy).
    dns: bool,
    answering: Answering,
    /// Applied to the harness's configuration last (the soak's larger limits).
    tune: Option<Tune>,
    /// Its data threads, when not the harness's (0: as deployed, one per core).
    threads: Option<u32>,
    /// Measured only in the scenarios where threads are compared.
    scaled: bool,
}

impl AfProxy {
    /// af-proxy from an already built binary.
    pub(crate) fn new(binary: PathBuf, dns: bool) -> Self {
        Self {
            binary,
            name: "af-proxy".to_owned(),
            dns,
            answering: Answering::Forward,
            tune: None,
            threads: None,
            scaled: false,
        }
    }

    /// `binary`, built with the `alloc-count` feature, in the same configuration:
    /// `af-proxy (allocs)`, whose `/metrics` counts its allocations and the heap it holds.
    pub(crate) fn counting(&self, binary: PathBuf) -> Self {
        Self {
            binary,
            name: "af-proxy (allocs)".to_owned(),
            tune: self.tune.clone(),
            ..Self::new(PathBuf::new(), self.dns)
        }
    }

    /// `binary`, built from the older revision `rev`, in the same configuration:
    /// `af-proxy@REV`, measured beside this one (`--compare`).
    /// It runs as deployed (its configuration names no data threads: a revision from before
    /// them reads it).
    pub(crate) fn older(&self, binary: PathBuf, rev: &str) -> Self {
        Self {
            binary,
            name: format!("af-proxy@{rev}"),
            tune: self.tune.clone(),
            threads: Some(0),
            ..Self::new(PathBuf::new(), self.dns)
        }
    }

    /// The same sidecar with `tune` applied to its configuration after the harness's own
    /// settings (`|c| c.limits.max_connections = 30_000`).
    pub(crate) fn with_settings(
        mut self,
        tune: impl Fn(&mut SidecarConfig) + Send + Sync + 'static,
    ) -> Self {
        self.tune = Some(Arc::new(tune));
        self
    }

    /// The same binary answering the intercepted host in mock mode: `af-proxy (mock)`,
    /// measured in the intercepted-HTTPS scenario only.
    pub(crate) fn mocking(&self) -> Self {
        Self {
            binary: self.binary.clone(),
            name: "af-proxy (mock)".to_owned(),
            dns: false,
            answering: Answering::Mock,
            tune: self.tune.clone(),
            threads: None,
            scaled: false,
        }
    }

    /// The same sidecar with `threads` data threads: `af-proxy (N threads)`, measured in the
    /// scenarios where threads are compared.
    pub(crate) fn threaded(&self, threads: u32) -> Self {
        Self {
            binary: self.binary.clone(),
            name: super::threaded_name("af-proxy", threads),
            dns: false,
            answering: Answering::Forward,
            tune: self.tune.clone(),
            threads: Some(threads),
            scaled: true,
        }
    }

    /// Copies `binary` into `dir` as `name` and returns the copy's path.
    pub(crate) fn pin(binary: &Path, dir: &Path, name: &str) -> Result<PathBuf> {
        let copy = dir.join(name);
        std::fs::copy(binary, &copy)
            .map_err(|e| BenchError::io(format!("copy {}", binary.display()), e))?;
        Ok(copy)
    }

    /// Builds the static release binary of the workspace at `root` exactly as the Docker
    /// images do, with `features` of af-proxy's on (none for the images), and returns where
    /// it landed.
    pub(crate) fn build(root: &Path, features: &[&str]) -> Result<PathBuf> {
        let features = features.join(",");
        let mut args = vec!["-p", "af-proxy"];
        if !features.is_empty() {
            args.extend(["--features", &features]);
        }
        super::cargo_build(root, Linkage::Static, &args)?;
        Ok(cargo::static_release_dir(root).join("af-proxy"))
    }
}

impl System for AfProxy {
    fn name(&self) -> &str {
        &self.name
    }

    fn support(&self, scenario: Scenario) -> Support {
        if self.scaled && !super::SCALED.contains(&scenario) {
            return Support::No;
        }
        match (self.answering, scenario) {
            (Answering::Mock, Scenario::InterceptedHttps) => Support::Yes,
            (Answering::Mock, _) => Support::No,
            (Answering::Forward, Scenario::Dns) if !self.dns => {
                Support::Pending("DNS listener off (--no-af-dns)".into())
            }
            (Answering::Forward, _) => Support::Yes,
        }
    }

    fn missing(&self) -> Option<String> {
        (!self.binary.is_file()).then(|| format!("{} not built", self.binary.display()))
    }

    fn start(&self, env: &Env) -> Result<Running> {
        let dir = super::config_dir()?;
        let port = super::free_port()?;
        let admin = super::free_port()?;
        let dns = super::free_port()?;
        let journal = dir.path().join("journal");
        let ca = EnvironmentCa::generate()?;
        let upstream_cert = std::fs::read_to_string(&env.upstream_cert)
            .map_err(|e| BenchError::io(format!("read {}", env.upstream_cert.display()), e))?;
        let loopback = |port: u16| SocketAddr::from((Ipv4Addr::LOCALHOST, port));
        let egress = EgressSpec {
            default: Some(Mode::Allow),
            rules: vec![self.intercepted_rule(env)],
            ..EgressSpec::default()
        };
        let admin = loopback(admin);
        // The resolver is never asked: every request names 127.0.0.1.
        let mut config = SidecarConfig::new(
            "bench".to_owned(),
            egress,
            "127.0.0.1:9".to_owned(),
            Admin {
                listen: admin,
                token: ADMIN_TOKEN.to_owned(),
            },
        );
        config.guard.trusted_networks = vec![IpNet::V4(Ipv4Net::new_assert(
            Ipv4Addr::new(127, 0, 0, 0),
            8,
        ))];
        config.inside.subnets = vec![IpNet::V4(Ipv4Net::new_assert(
            Ipv4Addr::new(10, 254, 0, 0),
            16,
        ))];
        let ls = &mut config.listeners;
        ls.proxy = ProxyListener {
            listen: Some(loopback(port)),
        };
        ls.transparent_http = TransparentHttp {
            listen: None,
            ..TransparentHttp::default()
        };
        ls.transparent_tls = TransparentTls {
            listen: None,
            ..TransparentTls::default()
        };
        // DNS as the sidecar serves it: every outside name answers the
        // sidecar's address; the runtime resolver (for inside names) is never asked.
        ls.dns = if self.dns {
            DnsListener {
                listen: Some(loopback(dns)),
                answer_v4: Some(env.dns_answer),
                inside_resolver: Some(loopback(9)),
                ..DnsListener::default()
            }
        } else {
            DnsListener {
                listen: None,
                ..DnsListener::default()
            }
        };
        ls.smtp = SmtpListener {
            listen: Vec::new(),
            ..SmtpListener::default()
        };
        config.journal.dir = journal;
        config.limits.max_connections = 20000;
        config.limits.data_threads = self.threads.unwrap_or(env.threads) as usize;
        config.tls = Some(TlsConfig {
            extra_upstream_roots_pem: Some(upstream_cert),
            ..TlsConfig::new(ca.cert_pem.clone(), ca.key_pem.clone())
        });
        config.modes = self.modes();
        if let Some(tune) = &self.tune {
            tune(&mut config);
        }
        let text = serde_json::to_string(&config)
            .map_err(|e| BenchError::io("serialize the af-proxy configuration", e.into()))?;
        let path = super::write_config(dir.path(), "af-proxy.json", &text)?;
        let ca_cert = super::write_config(dir.path(), "environment-ca.pem", &ca.cert_pem)?;
        let mut cmd = Command::new(&self.binary);
        cmd.arg("--config").arg(&path).env("AF_PROXY_LOG", "warn");
        let (ready, endpoint) = (Ready::Tcp, Endpoint::Proxy(([127, 0, 0, 1], port).into()));
        let mut running = super::launch(&self.name, cmd, dir, port, ready, endpoint)?;
        running.ca_cert = Some(ca_cert);
        running.admin = Some(admin);
        if self.dns {
            let addr = ([127, 0, 0, 1], dns).into();
            let timeout = super::ready_timeout();
            let deadline = Instant::now() + timeout;
            while !crate::load::dnsperf::probe(addr) {
                if Instant::now() > deadline {
                    return Err(BenchError::NotReady {
                        system: "af-proxy (dns)".into(),
                        port: dns,
                        secs: timeout.as_secs(),
                        detail: String::new(),
                    });
                }
                std::thread::sleep(Duration::from_millis(50));
            }
            running.dns = Some(addr);
        }
        Ok(running)
    }
}

impl AfProxy {
    /// The rule that makes the upstream's HTTPS address intercepted.
    fn intercepted_rule(&self, env: &Env) -> RuleSpec {
        let host = env.upstream_https.to_string();
        match self.answering {
            Answering::Forward => RuleSpec {
                paths: vec!["/".to_owned()],
                ..RuleSpec::new(host, Mode::Allow)
            },
            Answering::Mock => RuleSpec {
                fixtures: Some(MOCK_PACK.to_owned()),
                ..RuleSpec::new(host, Mode::Mock)
            },
        }
    }

    /// The `modes` section: for the mock twin, a pack with one route answering the
    /// upstream's small body, byte for byte.
    fn modes(&self) -> ModesConfig {
        match self.answering {
            Answering::Forward => ModesConfig::default(),
            Answering::Mock => {
                let pack = json!({
                    "name": "bench",
                    "routes": [{ "method": "GET", "path": SMALL_PATH, "text": upstream::small_body() }],
                });
                ModesConfig {
                    packs: BTreeMap::from([(MOCK_PACK.to_owned(), pack)]),
                    ..ModesConfig::default()
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::net::Ipv4Addr;

    use super::*;

    fn env() -> Env {
        Env {
            dns_answer: Ipv4Addr::new(127, 0, 0, 2),
            upstream_http: ([127, 0, 0, 1], 8080).into(),
            upstream_https: ([127, 0, 0, 1], 8443).into(),
            upstream_bulk: ([127, 0, 0, 1], 8081).into(),
            upstream_cert: PathBuf::from("/nonexistent/upstream-cert.pem"),
            threads: 1,
        }
    }

    #[test]
    fn the_intercepted_rule_names_exactly_the_upstreams_https_address() {
        let forward = AfProxy::new(PathBuf::from("/nonexistent/af-proxy"), true);
        let rule = forward.intercepted_rule(&env());
        assert_eq!(rule.host, "127.0.0.1:8443", "other ports stay plain allow");
        assert_eq!(rule.mode, Mode::Allow);
        assert_eq!(rule.paths, ["/"], "a path limit opens TLS");
        assert_eq!(forward.modes(), ModesConfig::default());
    }

    #[test]
    fn the_mock_twin_answers_the_upstreams_small_body_from_the_pack_its_rule_names() {
        let mock = AfProxy::new(PathBuf::from("/nonexistent/af-proxy"), true).mocking();
        let rule = mock.intercepted_rule(&env());
        assert_eq!(rule.mode, Mode::Mock);
        let pack_name = rule.fixtures.as_deref().expect("a named pack");
        let route = &mock.modes().packs[pack_name]["routes"][0];
        assert_eq!(route["method"], "GET");
        assert_eq!(route["path"], SMALL_PATH);
        assert_eq!(
            route["text"],
            upstream::small_body(),
            "the upstream's body, byte for byte"
        );
    }

    #[test]
    fn af_proxy_takes_every_scenario_and_its_mock_twin_only_interception() {
        let forward = AfProxy::new(PathBuf::from("/nonexistent/af-proxy"), true);
        let mock = forward.mocking();
        assert_eq!(
            (forward.name(), mock.name()),
            ("af-proxy", "af-proxy (mock)")
        );
        for scenario in Scenario::ALL {
            assert_eq!(forward.support(scenario), Support::Yes, "{scenario:?}");
            let expected = if scenario == Scenario::InterceptedHttps {
                Support::Yes
            } else {
                Support::No
            };
            assert_eq!(mock.support(scenario), expected, "{scenario:?}");
        }
    }
}
