//! Where a manifest still reads a rule without a port as every port.
//!
//! A rule that names no port covers 80 and 443 ([`Ports`](crate::egress::Ports)). A service
//! whose environment names `host:PORT` on another port (a URL such as
//! `postgres://db.example.com:5432/app`, or a bare `broker.example.com:9092`) under a rule
//! that names only the host was let through when a portless rule meant every port, and is not
//! now. `af validate` says so, one finding per variable.

use serde::Serialize;
use url::Url;

use super::Manifest;
use crate::egress::{Catalogue, Miss, Ports, RuleId, WEB_PORTS};

/// A service's variable that names a port its host's rule no longer covers.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct UnnamedPort {
    /// The service and variable: `services.web.env.DATABASE_URL`.
    pub variable: String,
    /// The host and port it names, as a rule would name them: `db.example.com:5432`.
    pub target: String,
    /// The rule that names the host but not the port, as `af net explain` labels it.
    pub rule: String,
}

impl UnnamedPort {
    /// One sentence a person reads.
    pub fn sentence(&self) -> String {
        format!(
            "{} goes to {}, and {} names no port, so it covers 80 and 443 only; write `host: {}` to let that port through.",
            self.variable, self.target, self.rule, self.target
        )
    }
}

/// Every variable of every service that names a host and port outside the web's ports which a
/// forwarding rule names only by host, while no rule lets that port through.
pub fn unnamed_ports(manifest: &Manifest, catalogue: &Catalogue) -> Vec<UnnamedPort> {
    let mut found = Vec::new();
    for service in &manifest.services {
        for (name, value) in &service.env {
            for authority in authorities(value) {
                let Ok(explained) = catalogue.explain("CONNECT", &authority) else {
                    continue;
                };
                if WEB_PORTS.contains(&explained.port) || explained.mode.forwards() {
                    continue;
                }
                let Some(rule) = explained.missed.iter().find(|m| {
                    m.lost_on == Miss::Port
                        && m.mode.forwards()
                        && u32::try_from(m.index)
                            .is_ok_and(|i| catalogue.ports(RuleId(i)) == Ports::Web)
                }) else {
                    continue;
                };
                found.push(UnnamedPort {
                    variable: format!("services.{}.env.{name}", service.name),
                    target: authority,
                    rule: format!("rules[{}] {}", rule.index, rule.host.trim()),
                });
            }
        }
    }
    found
}

/// The `host:port` authorities a variable's value names with an explicit port: each URL, or
/// each bare `host:port`, in a list separated by commas or spaces.
fn authorities(value: &str) -> impl Iterator<Item = String> + '_ {
    value
        .split(|c: char| c == ',' || c.is_whitespace())
        .filter(|word| !word.is_empty())
        .filter_map(|word| {
            let url = if word.contains("://") {
                Url::parse(word).ok()?
            } else {
                let url = Url::parse(&format!("tcp://{word}")).ok()?;
                (url.path().is_empty() && url.username().is_empty()).then_some(url)?
            };
            let port = url.port()?;
            let host = match url.host()? {
                url::Host::Domain(name) => name.to_owned(),
                url::Host::Ipv4(ip) => ip.to_string(),
                url::Host::Ipv6(ip) => format!("[{ip}]"),
            };
            Some(format!("{host}:{port}"))
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn authorities_are_read_from_urls_and_bare_host_ports() {
        let found: Vec<String> = authorities(
            "postgres://app:secret@db.example.com:5432/app, kafka-1.test:9092 kafka-2.test:9092 \
             https://api.example.com/v1 just-words [2001:db8::1]:6379 /path:80",
        )
        .collect();
        assert_eq!(
            found,
            [
                "db.example.com:5432",
                "kafka-1.test:9092",
                "kafka-2.test:9092",
                "[2001:db8::1]:6379"
            ]
        );
    }
}
