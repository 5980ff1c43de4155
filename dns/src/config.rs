//! What the embedding program tells the DNS server: where to listen, what is inside, where the
//! runtime's resolver is. Built by the embedder (the sidecar compiles it from its configuration
//! document's `listeners.dns`, whose defaults [`DnsConfig::new`] takes); [`DnsConfig::validate`]
//! turns it into the checked form the query path reads.

use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

use af_sidecar_api::config::DnsListener;
use hickory_proto::rr::Name;
use ipnet::IpNet;

use crate::{error::DnsError, sightings::SHARDS};

/// Configuration of the environment's DNS server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DnsConfig {
    /// Address for both UDP and TCP (default `0.0.0.0:53`; port 0 picks a free port).
    pub listen: SocketAddr,
    /// Number of UDP sockets bound with `SO_REUSEPORT`; 0 means one per core (the default).
    pub udp_sockets: usize,
    /// The sidecar's inside IPv4 address: the answer to `A` for every outside name.
    pub sidecar_v4: Ipv4Addr,
    /// The sidecar's inside IPv6 address, answered for `AAAA` when `allow_ipv6` is set.
    pub sidecar_v6: Option<Ipv6Addr>,
    /// Whether outside names get an `AAAA` answer (otherwise empty `NOERROR`).
    pub allow_ipv6: bool,
    /// The environment's service names (exact match, case-insensitive).
    pub inside_names: Vec<String>,
    /// The runtime's own zones, e.g. `svc.cluster.local`: the zone and every name below it.
    pub inside_zones: Vec<String>,
    /// Inside names answered here with these addresses and never forwarded (a cluster
    /// runtime's Services, whose addresses it made); each address lies in `inside_subnets`.
    pub inside_hosts: BTreeMap<String, Vec<IpAddr>>,
    /// Whether a single-label name that `inside_names` does not list is still asked of the
    /// runtime's resolver. Off (the default), it is answered as outside: the runtime's resolver
    /// passes names it does not know on to the host's resolvers, so forwarding made-up short
    /// names would be a way out for data spelled into them.
    pub forward_unlisted_single_labels: bool,
    /// The environment's networks: an inside name must resolve only into these to be inside.
    pub inside_subnets: Vec<IpNet>,
    /// The runtime's resolver (Docker's `127.0.0.11:53`, the cluster DNS service).
    pub upstream: SocketAddr,
    /// TTL of every answer, and the longest time a forwarded answer is cached (default 5 s).
    pub ttl_secs: u32,
    /// How long one forwarded lookup may take before the client gets `SERVFAIL` (default 2000).
    pub upstream_timeout_ms: u64,
    /// How many (name, type) pairs are remembered as already reported (default 65 536).
    pub seen_capacity: usize,
    /// How many sightings may wait for the observer before new ones are dropped (default 4096).
    pub sighting_queue: usize,
    /// First sightings reported per second (ten times as many at once). Past it a sighting is
    /// counted and not remembered, so the name is reported on a later query once there is room:
    /// a flood of made-up names cannot bury the observer (the sidecar's bounded journal).
    pub sightings_per_second: u32,
    /// A DNS-over-TCP connection that brings no whole query for this long is closed (default
    /// 10 s; a query trickled in byte by byte does not reset it).
    pub tcp_idle_secs: u64,
    /// DNS-over-TCP connections open at once; past it a new one is closed at once (default
    /// 1024). An embedding program can count them under its own cap instead
    /// ([`crate::DnsServer::bind_under`]), and then this is not used.
    pub tcp_max_connections: usize,
    /// Queries one UDP socket keeps waiting on the runtime's resolver (each at most
    /// `upstream_timeout_ms`); past it a datagram is dropped unread and counted (default 4096).
    pub udp_max_in_flight: usize,
}

/// `ttl_secs` when not set.
const DEFAULT_TTL_SECS: u32 = 5;
/// `upstream_timeout_ms` when not set.
const DEFAULT_UPSTREAM_TIMEOUT_MS: u64 = 2000;
/// `sighting_queue` when not set.
const DEFAULT_SIGHTING_QUEUE: usize = 4096;
/// `tcp_max_connections` when not set.
const DEFAULT_TCP_MAX_CONNECTIONS: usize = 1024;
/// `udp_max_in_flight` when not set.
const DEFAULT_UDP_MAX_IN_FLIGHT: usize = 4096;

/// Upper bound on `udp_sockets`: more sockets than this only wastes file descriptors.
const MAX_UDP_SOCKETS: usize = 256;
/// Upper bound on `ttl_secs`: answers point at the sidecar and must not outlive an environment.
const MAX_TTL_SECS: u32 = 3600;

impl DnsConfig {
    /// A configuration with every default, for the given sidecar address, networks and resolver.
    /// The knobs the sidecar's configuration has take its defaults ([`DnsListener`]).
    pub fn new(sidecar_v4: Ipv4Addr, inside_subnets: Vec<IpNet>, upstream: SocketAddr) -> Self {
        let section = DnsListener::default();
        Self {
            listen: DnsListener::DEFAULT_LISTEN,
            udp_sockets: section.udp_sockets,
            sidecar_v4,
            sidecar_v6: None,
            allow_ipv6: false,
            inside_names: Vec::new(),
            inside_zones: Vec::new(),
            inside_hosts: BTreeMap::new(),
            forward_unlisted_single_labels: false,
            inside_subnets,
            upstream,
            ttl_secs: DEFAULT_TTL_SECS,
            upstream_timeout_ms: DEFAULT_UPSTREAM_TIMEOUT_MS,
            seen_capacity: section.seen_capacity,
            sighting_queue: DEFAULT_SIGHTING_QUEUE,
            sightings_per_second: section.sightings_per_second.get(),
            tcp_idle_secs: section.tcp_idle_secs.get(),
            tcp_max_connections: DEFAULT_TCP_MAX_CONNECTIONS,
            udp_max_in_flight: DEFAULT_UDP_MAX_IN_FLIGHT,
        }
    }

    /// Checks the configuration and normalises names; errors carry `AF-NET-030`.
    pub fn validate(&self) -> Result<Checked, DnsError> {
        if self.udp_sockets > MAX_UDP_SOCKETS {
            return Err(invalid(
                format!(
                    "udp_sockets is {}, at most {MAX_UDP_SOCKETS} are allowed",
                    self.udp_sockets
                ),
                "set udp_sockets to 0 (one per core) or a small number",
            ));
        }
        if self.udp_max_in_flight == 0 {
            return Err(invalid(
                "udp_max_in_flight is 0, so no inside name asked over UDP could wait for the runtime's resolver".to_owned(),
                "leave udp_max_in_flight at its default (4096) or set a positive number",
            ));
        }
        if self.sidecar_v4.is_unspecified() || self.sidecar_v4.is_broadcast() {
            return Err(invalid(
                format!(
                    "sidecar_v4 {} is not an address a service can reach",
                    self.sidecar_v4
                ),
                "set sidecar_v4 to the sidecar's address on the environment's inside network",
            ));
        }
        if self.allow_ipv6 && self.sidecar_v6.is_none() {
            return Err(invalid(
                "allow_ipv6 is set but sidecar_v6 is missing".to_owned(),
                "set sidecar_v6 to the sidecar's inside IPv6 address, or turn allow_ipv6 off",
            ));
        }
        if self.inside_subnets.is_empty() {
            return Err(invalid(
                "inside_subnets is empty, so no name could ever be inside".to_owned(),
                "list the environment's network(s), e.g. 172.18.0.0/16",
            ));
        }
        if self.upstream == self.listen {
            return Err(invalid(
                format!(
                    "upstream {} is this server's own listen address",
                    self.upstream
                ),
                "set upstream to the runtime's resolver, e.g. 127.0.0.11:53 on Docker",
            ));
        }
        if self.ttl_secs > MAX_TTL_SECS {
            return Err(invalid(
                format!(
                    "ttl_secs is {}, at most {MAX_TTL_SECS} is allowed",
                    self.ttl_secs
                ),
                "keep ttl_secs short (the default is 5)",
            ));
        }
        if self.upstream_timeout_ms == 0 || self.tcp_idle_secs == 0 || self.tcp_max_connections == 0
        {
            return Err(invalid(
                "upstream_timeout_ms, tcp_idle_secs and tcp_max_connections must be positive"
                    .to_owned(),
                "remove them to use the defaults (2000 ms, 10 s and 1024)",
            ));
        }
        if self.sightings_per_second == 0 {
            return Err(invalid(
                "sightings_per_second must be positive".to_owned(),
                "remove it to use the default (50)",
            ));
        }
        if self.seen_capacity < SHARDS || self.sighting_queue == 0 {
            return Err(invalid(
                format!("seen_capacity must be at least {SHARDS} and sighting_queue positive"),
                "remove them to use the defaults (65536 and 4096)",
            ));
        }
        let mut inside_hosts = Vec::with_capacity(self.inside_hosts.len());
        for (name, addrs) in &self.inside_hosts {
            let host = normalise_all(std::slice::from_ref(name), "inside_hosts")?;
            if let Some(addr) = addrs.iter().find(|a| !is_inside(&self.inside_subnets, **a)) {
                return Err(invalid(
                    format!("inside_hosts gives {name} the address {addr}, outside inside_subnets"),
                    "list the host's address in inside_subnets, or remove the host",
                ));
            }
            inside_hosts.extend(host.into_iter().map(|h| (h, addrs.clone())));
        }
        Ok(Checked {
            inside_hosts,
            inside_names: normalise_all(&self.inside_names, "inside_names")?,
            inside_zones: normalise_all(&self.inside_zones, "inside_zones")?,
            udp_sockets: match self.udp_sockets {
                0 => std::thread::available_parallelism().map_or(1, usize::from),
                n => n,
            },
        })
    }
}

/// The parts of a configuration that [`DnsConfig::validate`] derives: normalised names and the
/// actual socket count.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Checked {
    /// Inside names, lower-case ASCII (IDN as punycode), no trailing dot.
    pub inside_names: Vec<String>,
    /// Inside zones, in the same form.
    pub inside_zones: Vec<String>,
    /// Inside hosts, their names in the same form.
    pub inside_hosts: Vec<(String, Vec<IpAddr>)>,
    /// UDP sockets to bind (at least 1).
    pub udp_sockets: usize,
}

/// True when `addr` lies in one of `subnets` (an IPv4-mapped IPv6 address counts as its IPv4).
pub(crate) fn is_inside(subnets: &[IpNet], addr: IpAddr) -> bool {
    let addr = addr.to_canonical();
    subnets.iter().any(|net| net.contains(&addr))
}

fn normalise_all(names: &[String], field: &str) -> Result<Vec<String>, DnsError> {
    names
        .iter()
        .map(|name| {
            normalise(name).ok_or_else(|| {
                invalid(
                    format!("{field} entry {name:?} is not a valid DNS name"),
                    "use plain names such as `db` or `svc.cluster.local`",
                )
            })
        })
        .collect()
}

/// Lower-case ASCII form without the trailing dot, as the query path compares names.
fn normalise(name: &str) -> Option<String> {
    let trimmed = name.trim().trim_end_matches('.');
    if trimmed.is_empty() {
        return None;
    }
    let parsed = Name::from_utf8(trimmed).ok()?;
    Some(
        parsed
            .to_lowercase()
            .to_ascii()
            .trim_end_matches('.')
            .to_owned(),
    )
}

fn invalid(problem: String, next: &'static str) -> DnsError {
    DnsError::Config { problem, next }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn base() -> DnsConfig {
        DnsConfig::new(
            Ipv4Addr::new(192, 0, 2, 1),
            vec!["192.0.2.0/24".parse().expect("subnet")],
            "127.0.0.1:5353".parse().expect("addr"),
        )
    }

    #[test]
    fn defaults_are_valid_and_use_every_core() {
        let checked = base().validate().expect("valid");
        assert!(checked.udp_sockets >= 1);
    }

    #[test]
    fn names_are_lower_cased_without_trailing_dot() {
        let mut config = base();
        config.inside_names = vec!["DB.".into(), "Bücher".into()];
        config.inside_zones = vec!["Svc.Cluster.Local.".into()];
        let checked = config.validate().expect("valid");
        assert_eq!(checked.inside_names, ["db", "xn--bcher-kva"]);
        assert_eq!(checked.inside_zones, ["svc.cluster.local"]);
    }

    #[test]
    fn allow_ipv6_without_an_address_is_af_net_030() {
        let mut config = base();
        config.allow_ipv6 = true;
        let text = config.validate().expect_err("invalid").to_string();
        assert!(text.starts_with("AF-NET-030"), "{text}");
        assert!(text.contains("\nNext: "), "{text}");
    }

    #[test]
    fn empty_subnets_empty_names_loops_and_no_room_are_refused() {
        let mut config = base();
        config.inside_subnets.clear();
        assert!(config.validate().is_err());

        let mut config = base();
        config.inside_zones = vec![".".into()];
        assert!(config.validate().is_err());

        let mut config = base();
        config.upstream = config.listen;
        assert!(config.validate().is_err());

        let mut config = base();
        config.udp_max_in_flight = 0;
        let text = config.validate().expect_err("invalid").to_string();
        assert!(text.starts_with("AF-NET-030"), "{text}");
        assert!(text.contains("udp_max_in_flight"), "{text}");
    }

    #[test]
    fn new_takes_the_sidecar_configurations_defaults() {
        let config = base();
        let section = DnsListener::default();
        assert_eq!(Some(config.listen), section.listen);
        assert_eq!(config.udp_sockets, section.udp_sockets);
        assert_eq!(config.seen_capacity, section.seen_capacity);
        assert_eq!(
            config.sightings_per_second,
            section.sightings_per_second.get()
        );
        assert_eq!(config.tcp_idle_secs, section.tcp_idle_secs.get());
        assert_eq!(config.ttl_secs, 5);
    }

    #[test]
    fn inside_means_every_address_in_a_subnet() {
        let nets: Vec<IpNet> = vec!["198.51.100.0/24".parse().expect("net")];
        assert!(is_inside(&nets, "198.51.100.7".parse().expect("ip")));
        assert!(is_inside(&nets, "::ffff:198.51.100.7".parse().expect("ip")));
        assert!(!is_inside(&nets, "203.0.113.7".parse().expect("ip")));
        assert!(!is_inside(&nets, "127.0.0.1".parse().expect("ip")));
    }
}
