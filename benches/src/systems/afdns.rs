//! af-dns: the DNS server library af-proxy embeds, run in a process of its
//! own (`af-benches af-dns …`) until the lead wires it into af-proxy.
//! Configured as the sidecar will: every outside name answers the sidecar's
//! address, TTL 5 s, one UDP socket per core with SO_REUSEPORT, first
//! sightings handed off the query path (to an observer that drops them).

use std::net::Ipv4Addr;
use std::process::Command;
use std::sync::Arc;

use super::dnsmasq::dns_support;
use super::{Endpoint, Env, Ready, Running, Support, System};
use crate::error::{BenchError, Result};
use crate::scenarios::Scenario;

/// af-dns in a harness subprocess.
pub(super) struct AfDns;

impl System for AfDns {
    fn name(&self) -> &str {
        "af-dns"
    }

    fn support(&self, scenario: Scenario) -> Support {
        dns_support(scenario)
    }

    fn missing(&self) -> Option<String> {
        None
    }

    fn start(&self, env: &Env) -> Result<Running> {
        let dir = super::config_dir()?;
        let port = super::free_port()?;
        let exe = std::env::current_exe().map_err(|e| BenchError::io("find own executable", e))?;
        let mut cmd = Command::new(exe);
        cmd.arg("af-dns")
            .arg("--port")
            .arg(port.to_string())
            .arg("--answer")
            .arg(env.dns_answer.to_string());
        let endpoint = Endpoint::Dns(([127, 0, 0, 1], port).into());
        super::launch("af-dns", cmd, dir, port, Ready::Dns, endpoint)
    }
}

/// Arguments of the hidden `af-dns` subcommand.
#[derive(Debug, Clone, clap::Args)]
pub(crate) struct ServeArgs {
    /// UDP and TCP port on 127.0.0.1.
    #[arg(long)]
    pub port: u16,
    /// The address every outside name answers.
    #[arg(long)]
    pub answer: Ipv4Addr,
}

/// Serves DNS until killed.
pub(crate) fn serve(args: ServeArgs) -> Result<()> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| BenchError::io("start tokio", e))?;
    rt.block_on(async {
        let inside = "10.254.0.0/16"
            .parse()
            .map_err(|_| BenchError::Protocol("subnet".into()))?;
        // The runtime's resolver is never asked: every benchmark name is outside.
        let mut config =
            af_dns::DnsConfig::new(args.answer, vec![inside], ([127, 0, 0, 1], 9).into());
        config.listen = ([127, 0, 0, 1], args.port).into();
        let server = af_dns::DnsServer::bind(config, Arc::new(af_dns::IgnoreSightings))
            .await
            .map_err(|e| BenchError::Protocol(e.to_string()))?;
        server
            .serve_until(std::future::pending())
            .await
            .map_err(|e| BenchError::Protocol(e.to_string()))
    })
}
