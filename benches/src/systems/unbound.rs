//! unbound: a local-zone redirect of "." to one address, no recursion, no logs.

use std::process::Command;

use super::dnsmasq::dns_support;
use super::{Endpoint, Env, Ready, Running, Support, System};
use crate::error::Result;
use crate::scenarios::Scenario;

/// Unbound as an every-name-to-one-address server.
pub(super) struct Unbound;

impl System for Unbound {
    fn name(&self) -> &str {
        "unbound"
    }

    fn support(&self, scenario: Scenario) -> Support {
        dns_support(scenario)
    }

    fn missing(&self) -> Option<String> {
        super::missing_program("unbound")
    }

    fn start(&self, env: &Env) -> Result<Running> {
        let dir = super::config_dir()?;
        let port = super::free_port()?;
        let d = dir.path().display();
        // The harness's threads, each its own socket (SO_REUSEPORT).
        let threads = env.threads.max(1);
        let conf = format!(
            "server:\n\
             \x20 interface: 127.0.0.1\n\
             \x20 port: {port}\n\
             \x20 num-threads: {threads}\n\
             \x20 so-reuseport: yes\n\
             \x20 do-ip6: no\n\
             \x20 do-daemonize: no\n\
             \x20 chroot: \"\"\n\
             \x20 username: \"\"\n\
             \x20 directory: \"{d}\"\n\
             \x20 pidfile: \"{d}/unbound.pid\"\n\
             \x20 use-syslog: no\n\
             \x20 logfile: \"\"\n\
             \x20 verbosity: 0\n\
             \x20 access-control: 127.0.0.0/8 allow\n\
             \x20 module-config: \"iterator\"\n\
             \x20 local-zone: \".\" redirect\n\
             \x20 local-data: \". 5 IN A {}\"\n\
             remote-control:\n\
             \x20 control-enable: no\n",
            env.dns_answer
        );
        let path = super::write_config(dir.path(), "unbound.conf", &conf)?;
        let mut cmd = Command::new("unbound");
        cmd.arg("-d").arg("-c").arg(&path);
        super::launch(
            "unbound",
            cmd,
            dir,
            port,
            Ready::Dns,
            Endpoint::Dns(([127, 0, 0, 1], port).into()),
        )
    }
}
