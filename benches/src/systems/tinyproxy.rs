//! tinyproxy: forward proxy, logging only critical messages (to its captured stderr).

use std::process::Command;

use super::squid::http_proxy_support;
use super::{Endpoint, Env, Ready, Running, Support, System};
use crate::error::Result;
use crate::scenarios::Scenario;

/// Tinyproxy as a plain forward proxy.
pub(super) struct Tinyproxy;

impl System for Tinyproxy {
    fn name(&self) -> &str {
        "tinyproxy"
    }

    fn support(&self, scenario: Scenario) -> Support {
        http_proxy_support(scenario)
    }

    fn missing(&self) -> Option<String> {
        super::missing_program("tinyproxy")
    }

    fn start(&self, _env: &Env) -> Result<Running> {
        let dir = super::config_dir()?;
        let port = super::free_port()?;
        // No ConnectPort line: CONNECT to any port (the bulk source is not on 443).
        let conf = format!(
            "User nobody\n\
             Group nogroup\n\
             Port {port}\n\
             Listen 127.0.0.1\n\
             Timeout 600\n\
             MaxClients 20000\n\
             LogLevel Critical\n\
             DisableViaHeader Yes\n"
        );
        let path = super::write_config(dir.path(), "tinyproxy.conf", &conf)?;
        let mut cmd = Command::new("tinyproxy");
        cmd.arg("-d").arg("-c").arg(&path);
        super::launch(
            "tinyproxy",
            cmd,
            dir,
            port,
            Ready::Tcp,
            Endpoint::Proxy(([127, 0, 0, 1], port).into()),
        )
    }
}
