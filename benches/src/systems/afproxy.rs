//! af-proxy: the sidecar itself, from its static release build.
//!
//! The configuration follows `docs/sidecar-config.md`: egress default allow,
//! loopback as a trusted upstream network (the address guard refuses
//! loopback otherwise), the explicit proxy listener on a free port, the
//! transparent listeners off, the journal in the temporary directory. The
//! journal stays on: it is part of what every request costs.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use super::{Endpoint, Env, Ready, Running, Support, System};
use crate::error::{BenchError, Result};
use crate::scenarios::Scenario;

/// The target triple of the static build (the same artifact the Docker images use).
pub const TARGET: &str = "x86_64-unknown-linux-gnu";

/// af-proxy, started from `binary`.
pub struct AfProxy {
    binary: PathBuf,
    /// Whether to turn on the DNS listener (af-dns inside af-proxy).
    dns: bool,
}

impl AfProxy {
    /// af-proxy from an already built binary.
    pub fn new(binary: PathBuf, dns: bool) -> Self {
        Self { binary, dns }
    }

    /// Where the static release build lands for the workspace at `root`.
    pub fn default_binary(root: &Path) -> PathBuf {
        let target_dir = std::env::var_os("CARGO_TARGET_DIR")
            .map(PathBuf::from)
            .unwrap_or_else(|| root.join("target"));
        target_dir.join(TARGET).join("release").join("af-proxy")
    }

    /// Copies `binary` into `dir` and returns the copy's path.
    pub fn pin(binary: &Path, dir: &Path) -> Result<PathBuf> {
        let copy = dir.join("af-proxy");
        std::fs::copy(binary, &copy)
            .map_err(|e| BenchError::io(format!("copy {}", binary.display()), e))?;
        Ok(copy)
    }

    /// Builds the static release binary exactly as the Docker images do.
    pub fn build(root: &Path) -> Result<()> {
        eprintln!(
            "building af-proxy: RUSTFLAGS='-C target-feature=+crt-static' cargo build --release --target {TARGET} -p af-proxy"
        );
        let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
        let status = Command::new(cargo)
            .current_dir(root)
            .env("RUSTFLAGS", "-C target-feature=+crt-static")
            .args(["build", "--release", "--target", TARGET, "-p", "af-proxy"])
            .status()
            .map_err(|source| BenchError::Spawn {
                program: "cargo".into(),
                source,
            })?;
        if status.success() {
            Ok(())
        } else {
            Err(BenchError::Build {
                status: status.to_string(),
            })
        }
    }
}

impl System for AfProxy {
    fn name(&self) -> &'static str {
        "af-proxy"
    }

    fn support(&self, scenario: Scenario) -> Support {
        match scenario {
            Scenario::Dns if !self.dns => Support::Pending("DNS listener off (--no-af-dns)".into()),
            Scenario::InterceptedHttps => {
                Support::Pending("TLS interception is a later issue".into())
            }
            _ => Support::Yes,
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
        // DNS as the sidecar serves it: every outside name answers the
        // sidecar's address; the runtime resolver (for inside names) is never asked.
        let dns_listener = if self.dns {
            serde_json::json!({
                "listen": format!("127.0.0.1:{dns}"),
                "answer_v4": env.dns_answer.to_string(),
                "inside_resolver": "127.0.0.1:9",
            })
        } else {
            serde_json::json!({ "listen": null })
        };
        // The resolver is never asked: every request names 127.0.0.1.
        let config = serde_json::json!({
            "env": "bench",
            "egress": { "default": "allow", "rules": [] },
            "resolver": "127.0.0.1:9",
            "guard": { "trusted_networks": ["127.0.0.0/8"] },
            "inside": { "subnets": ["10.254.0.0/16"] },
            "listeners": {
                "proxy": { "listen": format!("127.0.0.1:{port}") },
                "transparent_http": { "listen": null },
                "transparent_tls": { "listen": null },
                "dns": dns_listener,
            },
            "admin": { "listen": format!("127.0.0.1:{admin}"), "token": "af-bench-admin-token-0123" },
            "journal": { "dir": journal },
            "limits": { "max_connections": 20000 },
        });
        let path = super::write_config(dir.path(), "af-proxy.json", &config.to_string())?;
        let mut cmd = Command::new(&self.binary);
        cmd.arg("--config").arg(&path).env("AF_PROXY_LOG", "warn");
        let (ready, endpoint) = (Ready::Tcp, Endpoint::Proxy(([127, 0, 0, 1], port).into()));
        let mut running = super::launch("af-proxy", cmd, dir, port, ready, endpoint)?;
        if self.dns {
            let addr = ([127, 0, 0, 1], dns).into();
            let deadline = Instant::now() + Duration::from_secs(10);
            while !crate::load::dnsperf::probe(addr) {
                if Instant::now() > deadline {
                    return Err(BenchError::NotReady {
                        system: "af-proxy (dns)".into(),
                        port: dns,
                        secs: 10,
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
