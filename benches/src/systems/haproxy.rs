//! HAProxy (Debian's `haproxy`): the anchor of the harness. It does less than af-proxy (no
//! decision, no journal), so it is what the same forwarding costs on this machine. One
//! process, the harness's threads (`--threads`), three front ends on their own
//! ports: HTTP mode in front of the upstream's plain HTTP (the plain-HTTP scenarios), TCP mode
//! in front of the bulk source (the tunnel's relay reference), and TLS terminated with a fixed
//! certificate and re-encrypted to the upstream's HTTPS, its certificate verified (the
//! intercepted scenario's two handshakes and two ciphers per connection).

use std::process::Command;

use super::{Endpoint, Env, Fronts, Ready, Running, Support, System};
use crate::error::{BenchError, Result};
use crate::scenarios::Scenario;

/// HAProxy as a reverse proxy and relay.
pub(super) struct Haproxy {
    /// The name in the table.
    name: String,
    /// Its `nbthread`, when not the harness's threads.
    threads: Option<u32>,
}

impl Haproxy {
    /// The anchor, with the harness's threads.
    pub(super) fn anchor() -> Self {
        Self {
            name: "haproxy".to_owned(),
            threads: None,
        }
    }

    /// HAProxy with `threads` threads, in the scaled scenarios only.
    pub(super) fn threaded(threads: u32) -> Self {
        Self {
            name: super::threaded_name("haproxy", threads),
            threads: Some(threads),
        }
    }
}

/// HAProxy's configuration for these ports, the upstream in `env`, and the certificate and
/// key (one PEM file) its TLS front end presents.
pub(crate) fn config(env: &Env, fronts: &Fronts, pem: &std::path::Path, threads: u32) -> String {
    format!(
        "global\n\
         \tnbthread {threads}\n\
         \tmaxconn 9000\n\
         \tssl-server-verify required\n\
         defaults\n\
         \ttimeout connect 5s\n\
         \ttimeout client 60s\n\
         \ttimeout server 60s\n\
         frontend http\n\
         \tmode http\n\
         \tbind {http}\n\
         \tdefault_backend upstream_http\n\
         backend upstream_http\n\
         \tmode http\n\
         \thttp-reuse always\n\
         \tserver upstream {upstream_http}\n\
         frontend relay\n\
         \tmode tcp\n\
         \tbind {tcp}\n\
         \tdefault_backend upstream_bulk\n\
         backend upstream_bulk\n\
         \tmode tcp\n\
         \tserver upstream {upstream_bulk}\n\
         frontend tls\n\
         \tmode http\n\
         \tbind {https} ssl crt {pem}\n\
         \tdefault_backend upstream_https\n\
         backend upstream_https\n\
         \tmode http\n\
         \thttp-reuse always\n\
         \tserver upstream {upstream_https} ssl verify required ca-file {ca} sni str(localhost) verifyhost localhost\n",
        http = fronts.http,
        tcp = fronts.tcp,
        https = fronts.https,
        pem = pem.display(),
        upstream_http = env.upstream_http,
        upstream_bulk = env.upstream_bulk,
        upstream_https = env.upstream_https,
        ca = env.upstream_cert.display(),
    )
}

impl System for Haproxy {
    fn name(&self) -> &str {
        &self.name
    }

    fn support(&self, scenario: Scenario) -> Support {
        if self.threads.is_some() && !super::SCALED.contains(&scenario) {
            return Support::No;
        }
        match scenario {
            Scenario::HttpKeepAlive
            | Scenario::HttpNewConn
            | Scenario::Http1m
            | Scenario::ConnectBulk
            | Scenario::InterceptedHttps => Support::Yes,
            Scenario::IdleMemory | Scenario::Dns | Scenario::Decision | Scenario::AfUp => {
                Support::No
            }
        }
    }

    fn missing(&self) -> Option<String> {
        super::missing_program("haproxy")
    }

    fn start(&self, env: &Env) -> Result<Running> {
        let dir = super::config_dir()?;
        let at = |port| std::net::SocketAddr::from(([127, 0, 0, 1], port));
        let fronts = Fronts {
            http: at(super::free_port()?),
            tcp: at(super::free_port()?),
            https: at(super::free_port()?),
        };
        // The fixed certificate of the TLS front end, for 127.0.0.1 (the address the load
        // generator names), and its key, in the one file HAProxy reads.
        let cert = rcgen::generate_simple_self_signed(vec!["127.0.0.1".into()])
            .map_err(|e| BenchError::Tls(format!("HAProxy's certificate: {e}")))?;
        let cert_path = super::write_config(dir.path(), "front.crt", &cert.cert.pem())?;
        let pem = super::write_config(
            dir.path(),
            "front.pem",
            &format!("{}{}", cert.cert.pem(), cert.signing_key.serialize_pem()),
        )?;
        let conf = config(
            env,
            &fronts,
            &pem,
            self.threads.unwrap_or(env.threads).max(1),
        );
        let path = super::write_config(dir.path(), "haproxy.cfg", &conf)?;
        let mut cmd = Command::new("haproxy");
        // -db: in the foreground, no daemon; -f: this configuration only.
        cmd.arg("-db").arg("-f").arg(&path);
        let port = fronts.http.port();
        let mut running = super::launch(
            &self.name,
            cmd,
            dir,
            port,
            Ready::Tcp,
            Endpoint::Reverse(fronts),
        )?;
        running.ca_cert = Some(cert_path);
        Ok(running)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_configuration_names_each_front_end_its_upstream_and_verifies_the_upstreams_certificate()
    {
        let env = Env {
            dns_answer: std::net::Ipv4Addr::new(127, 0, 0, 2),
            upstream_http: "127.0.0.1:8001".parse().expect("addr"),
            upstream_https: "127.0.0.1:8002".parse().expect("addr"),
            upstream_bulk: "127.0.0.1:8003".parse().expect("addr"),
            upstream_cert: "/tmp/upstream.crt".into(),
            threads: 1,
        };
        let fronts = Fronts {
            http: "127.0.0.1:9001".parse().expect("addr"),
            tcp: "127.0.0.1:9002".parse().expect("addr"),
            https: "127.0.0.1:9003".parse().expect("addr"),
        };
        let conf = config(&env, &fronts, std::path::Path::new("/tmp/front.pem"), 2);
        for line in [
            "\tnbthread 2\n",
            "\tbind 127.0.0.1:9001\n",
            "\tserver upstream 127.0.0.1:8001\n",
            "\tbind 127.0.0.1:9002\n",
            "\tserver upstream 127.0.0.1:8003\n",
            "\tbind 127.0.0.1:9003 ssl crt /tmp/front.pem\n",
            "\tserver upstream 127.0.0.1:8002 ssl verify required ca-file /tmp/upstream.crt sni str(localhost) verifyhost localhost\n",
        ] {
            assert!(conf.contains(line), "{line:?} in\n{conf}");
        }
    }

    #[test]
    fn a_threaded_twin_is_named_for_its_threads_and_measured_only_where_threads_are_compared() {
        let twin = Haproxy::threaded(2);
        assert_eq!(twin.name(), "haproxy (2 threads)");
        assert_eq!(twin.support(Scenario::HttpKeepAlive), Support::Yes);
        assert_eq!(twin.support(Scenario::ConnectBulk), Support::No);
        assert_eq!(
            Haproxy::anchor().support(Scenario::ConnectBulk),
            Support::Yes
        );
    }
}
