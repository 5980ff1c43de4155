//! dnsmasq: answers every name with one address, no upstream, no logs.

use std::process::Command;

use super::{Endpoint, Env, Ready, Running, Support, System};
use crate::error::Result;
use crate::scenarios::Scenario;

/// dnsmasq as an every-name-to-one-address server.
pub(super) struct Dnsmasq;

impl System for Dnsmasq {
    fn name(&self) -> &str {
        "dnsmasq"
    }

    fn support(&self, scenario: Scenario) -> Support {
        dns_support(scenario)
    }

    fn missing(&self) -> Option<String> {
        super::missing_program("dnsmasq")
    }

    fn start(&self, env: &Env) -> Result<Running> {
        let dir = super::config_dir()?;
        let port = super::free_port()?;
        let conf = format!(
            "port={port}\n\
             listen-address=127.0.0.1\n\
             bind-interfaces\n\
             no-resolv\n\
             no-hosts\n\
             no-poll\n\
             address=/#/{}\n\
             local-ttl=5\n\
             user=root\n\
             pid-file=\n",
            env.dns_answer
        );
        let path = super::write_config(dir.path(), "dnsmasq.conf", &conf)?;
        let mut cmd = Command::new("dnsmasq");
        // -k: foreground; -C: only our configuration, never /etc/dnsmasq.conf.
        cmd.arg("-k").arg("-C").arg(&path);
        super::launch(
            "dnsmasq",
            cmd,
            dir,
            port,
            Ready::Dns,
            Endpoint::Dns(([127, 0, 0, 1], port).into()),
        )
    }
}

/// The scenarios a DNS server takes part in.
pub(super) fn dns_support(scenario: Scenario) -> Support {
    if scenario == Scenario::Dns {
        Support::Yes
    } else {
        Support::No
    }
}
