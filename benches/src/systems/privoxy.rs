//! privoxy: forward proxy with filtering toggled off, no logs.

use std::process::Command;

use super::squid::http_proxy_support;
use super::{Endpoint, Env, Ready, Running, Support, System};
use crate::error::Result;
use crate::scenarios::Scenario;

/// Privoxy as a plain forward proxy.
pub(super) struct Privoxy;

impl System for Privoxy {
    fn name(&self) -> &str {
        "privoxy"
    }

    fn support(&self, scenario: Scenario) -> Support {
        http_proxy_support(scenario)
    }

    fn missing(&self) -> Option<String> {
        super::missing_program("privoxy")
    }

    fn start(&self, _env: &Env) -> Result<Running> {
        let dir = super::config_dir()?;
        let port = super::free_port()?;
        // Privoxy allows CONNECT to port 443 only unless an action says otherwise.
        super::write_config(dir.path(), "bench.action", "{+limit-connect{-}}\n/\n")?;
        let d = dir.path().display();
        let conf = format!(
            "confdir {d}\n\
             logdir {d}\n\
             actionsfile bench.action\n\
             listen-address 127.0.0.1:{port}\n\
             toggle 1\n\
             enable-remote-toggle 0\n\
             enable-edit-actions 0\n\
             keep-alive-timeout 600\n\
             default-server-timeout 600\n\
             socket-timeout 600\n\
             connection-sharing 1\n\
             max-client-connections 20000\n"
        );
        let path = super::write_config(dir.path(), "config", &conf)?;
        let mut cmd = Command::new("privoxy");
        cmd.arg("--no-daemon").arg(&path);
        super::launch(
            "privoxy",
            cmd,
            dir,
            port,
            Ready::Tcp,
            Endpoint::Proxy(([127, 0, 0, 1], port).into()),
        )
    }
}
