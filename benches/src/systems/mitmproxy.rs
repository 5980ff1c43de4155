//! mitmproxy (mitmdump): intercepting proxy, quiet, verifying the upstream's certificate
//! against the bench's upstream certificate as af-proxy does.

use std::process::Command;

use super::{Endpoint, Env, Ready, Running, Support, System};
use crate::error::Result;
use crate::scenarios::Scenario;

/// mitmdump as an intercepting forward proxy.
pub(super) struct Mitmproxy;

impl System for Mitmproxy {
    fn name(&self) -> &str {
        "mitmproxy"
    }

    fn support(&self, scenario: Scenario) -> Support {
        if scenario == Scenario::InterceptedHttps {
            Support::Yes
        } else {
            Support::No
        }
    }

    fn missing(&self) -> Option<String> {
        super::missing_program("mitmdump")
    }

    fn start(&self, env: &Env) -> Result<Running> {
        let dir = super::config_dir()?;
        let port = super::free_port()?;
        let mut cmd = Command::new("mitmdump");
        cmd.arg("--listen-host")
            .arg("127.0.0.1")
            .arg("--listen-port")
            .arg(port.to_string())
            .arg("--set")
            .arg(format!("confdir={}", dir.path().display()))
            .arg("--set")
            .arg(format!(
                "ssl_verify_upstream_trusted_ca={}",
                env.upstream_cert.display()
            ))
            .arg("--quiet")
            .arg("--set")
            .arg("flow_detail=0")
            .arg("--set")
            .arg("termlog_verbosity=error");
        let ca = dir.path().join("mitmproxy-ca-cert.pem");
        let endpoint = Endpoint::Proxy(([127, 0, 0, 1], port).into());
        let mut running = super::launch("mitmproxy", cmd, dir, port, Ready::Tcp, endpoint)?;
        running.ca_cert = Some(ca);
        Ok(running)
    }
}
