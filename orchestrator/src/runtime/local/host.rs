//! What this machine's own settings would expose to a service whose confinement let it use
//! IPv6. The containment does not rest on any of it (services have IPv6 off unless the
//! catalogue allows IPv6, and never hold `NET_RAW`), so this is read only to say, in `af doctor`
//! and `af up`, where a manifest that turns IPv6 on would reach the host.

use std::fmt;

use procfs::net::TcpState;

/// The host's IPv6 exposure, as read from `/proc` on this machine.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Exposure {
    /// The Docker daemon is not on this machine, so its host cannot be read from here.
    Unknown(&'static str),
    /// What was read.
    Read {
        /// Whether the host routes IPv6 between its interfaces (`net.ipv6.conf.all.forwarding`).
        forwarding: bool,
        /// Ports with a listener on every IPv6 address (`[::]`), as `"22/tcp"`: reachable over
        /// a bridge's link-local address by a container with IPv6 on.
        wildcard_listeners: Vec<String>,
    },
}

impl Exposure {
    /// Read this machine's settings, when the Docker daemon is on this machine.
    pub fn read() -> Exposure {
        if !daemon_is_local(std::env::var("DOCKER_HOST").ok().as_deref()) {
            return Exposure::Unknown("the Docker daemon (DOCKER_HOST) is not on this machine");
        }
        let forwarding = std::fs::read_to_string("/proc/sys/net/ipv6/conf/all/forwarding")
            .is_ok_and(|v| v.trim() == "1");
        let mut wildcard_listeners: Vec<String> = procfs::net::tcp6()
            .unwrap_or_default()
            .into_iter()
            .filter(|e| e.state == TcpState::Listen && e.local_address.ip().is_unspecified())
            .map(|e| format!("{}/tcp", e.local_address.port()))
            .chain(
                procfs::net::udp6()
                    .unwrap_or_default()
                    .into_iter()
                    .filter(|e| e.local_address.ip().is_unspecified())
                    .map(|e| format!("{}/udp", e.local_address.port())),
            )
            .collect();
        wildcard_listeners.sort();
        wildcard_listeners.dedup();
        Exposure::Read {
            forwarding,
            wildcard_listeners,
        }
    }

    /// What a service with IPv6 on could reach of the host, or `None` when nothing.
    pub fn with_ipv6(&self) -> Option<String> {
        match self {
            Exposure::Unknown(why) => Some(format!(
                "whether the host can be reached over IPv6 cannot be judged: {why}"
            )),
            Exposure::Read {
                forwarding,
                wildcard_listeners,
            } => {
                let mut parts = Vec::new();
                if !wildcard_listeners.is_empty() {
                    parts.push(format!(
                        "the host's listeners on [::] ({}) over the bridge's link-local address",
                        list(wildcard_listeners)
                    ));
                }
                if *forwarding {
                    parts.push(
                        "other networks' hosts, since this host forwards IPv6 (net.ipv6.conf.all.forwarding=1)"
                            .to_owned(),
                    );
                }
                (!parts.is_empty()).then(|| parts.join(", and "))
            }
        }
    }
}

impl fmt::Display for Exposure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Exposure::Unknown(why) => f.write_str(why),
            Exposure::Read {
                forwarding,
                wildcard_listeners,
            } => write!(
                f,
                "IPv6 forwarding {}; {} listener(s) on [::]{}",
                if *forwarding { "on" } else { "off" },
                wildcard_listeners.len(),
                if wildcard_listeners.is_empty() {
                    String::new()
                } else {
                    format!(" ({})", list(wildcard_listeners))
                }
            ),
        }
    }
}

/// At most eight entries, then how many more.
fn list(items: &[String]) -> String {
    let shown = items.iter().take(8).cloned().collect::<Vec<_>>().join(", ");
    match items.len().saturating_sub(8) {
        0 => shown,
        more => format!("{shown} and {more} more"),
    }
}

/// Whether `DOCKER_HOST` (unset, or a Unix socket) names a daemon on this machine.
fn daemon_is_local(docker_host: Option<&str>) -> bool {
    docker_host.is_none_or(|h| h.is_empty() || h.starts_with("unix://"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_unix_socket_is_this_machine() {
        assert!(daemon_is_local(None));
        assert!(daemon_is_local(Some("unix:///var/run/docker.sock")));
        assert!(!daemon_is_local(Some("tcp://203.0.113.5:2376")));
        assert!(!daemon_is_local(Some("ssh://builder")));
    }

    #[test]
    fn a_host_that_forwards_and_listens_on_every_address_is_named_both_ways() {
        let open = Exposure::Read {
            forwarding: true,
            wildcard_listeners: vec!["22/tcp".to_owned(), "53/udp".to_owned()],
        };
        let said = open.with_ipv6().unwrap_or_default();
        assert!(said.contains("22/tcp, 53/udp"), "{said}");
        assert!(said.contains("forwards IPv6"), "{said}");
        let closed = Exposure::Read {
            forwarding: false,
            wildcard_listeners: Vec::new(),
        };
        assert_eq!(closed.with_ipv6(), None);
        assert!(Exposure::Unknown("remote").with_ipv6().is_some());
    }

    #[test]
    fn this_machine_is_read_and_a_listener_of_ours_on_every_ipv6_address_is_seen() {
        let listener = std::net::TcpListener::bind("[::]:0").expect("listen on [::]");
        let port = listener.local_addr().expect("address").port();
        match Exposure::read() {
            Exposure::Read {
                wildcard_listeners, ..
            } => assert!(
                wildcard_listeners.contains(&format!("{port}/tcp")),
                "{wildcard_listeners:?}"
            ),
            Exposure::Unknown(why) => {
                // Only when this test runs against a remote daemon; CI's is local.
                assert!(std::env::var("DOCKER_HOST").is_ok(), "{why}");
            }
        }
    }
}
