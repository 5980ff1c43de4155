//! The address guard: the one place every upstream dial goes through.
//!
//! A destination is resolved against the configured resolver, every address is classified, and
//! the sidecar dials exactly an address that passed; it never re-resolves between checking and
//! dialling, which closes DNS rebinding. Only three things let a refused address through:
//! an IP literal the catalogue names exactly (when the request itself named that literal),
//! the environment's own inside subnets, and the configured trusted upstream networks (meant
//! for tests). The last two can never open unspecified, link-local (metadata), multicast or
//! broadcast addresses, nor IPv6 forms that embed an IPv4 address: see [`admit`].
//!
//! A dial is bounded twice: it must finish, resolution included, within one deadline however
//! many addresses the name has, and each connection it opens holds a place under the upstream
//! cap until it closes.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use hickory_resolver::TokioResolver;
use hickory_resolver::config::{
    ConnectionConfig, LookupIpStrategy, NameServerConfig, ResolveHosts, ResolverConfig,
};
use hickory_resolver::net::runtime::TokioRuntimeProvider;
use ipnet::IpNet;
use tokio::net::TcpStream;
use tokio::time::Instant;

use crate::limits::{UpstreamConn, UpstreamLimit};
use crate::metrics::Metrics;
use af_policy::egress::Catalogue;
use af_policy::egress::address::{self, AddressClass};

/// Why an address is never dialled: its class (shared with the policy), or what only the
/// sidecar knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Refusal {
    /// Not on the public internet ([`AddressClass`]).
    Class(AddressClass),
    /// Any IPv6 address while the catalogue does not allow IPv6.
    Ipv6NotAllowed,
    /// One of the sidecar's own addresses: dialling it would loop through the sidecar.
    Sidecar,
}

impl Refusal {
    /// Short name for the journal and metrics.
    pub(crate) const fn as_str(self) -> &'static str {
        match self {
            Refusal::Class(class) => class.as_str(),
            Refusal::Ipv6NotAllowed => "ipv6_not_allowed",
            Refusal::Sidecar => "sidecar",
        }
    }

    /// Whether the trusted upstream networks may override this refusal. The dangerous classes
    /// (metadata endpoint, unspecified, multicast, broadcast, embedded IPv4) never can.
    const fn overridable(self) -> bool {
        matches!(
            self,
            Refusal::Class(
                AddressClass::Loopback
                    | AddressClass::Private
                    | AddressClass::SharedCgnat
                    | AddressClass::UniqueLocal
            )
        )
    }
}

/// Classify one address on its own: `Ok(())` for an address on the public internet.
pub(crate) fn classify(ip: IpAddr) -> Result<(), Refusal> {
    address::classify(ip).map_err(Refusal::Class)
}

/// A mapped address (`::ffff:a.b.c.d`) is the IPv4 address itself; it is checked and dialled
/// as such.
pub(crate) fn unmap(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
        IpAddr::V4(_) => ip,
    }
}

/// What may let a refused address through.
pub(crate) struct Overrides<'a> {
    /// The request named this IP literal and a forwarding rule names exactly it.
    pub named_literal: bool,
    /// The catalogue allows IPv6.
    pub allow_ipv6: bool,
    /// The environment's own subnets.
    pub inside: &'a [IpNet],
    /// Trusted upstream networks (tests).
    pub trusted: &'a [IpNet],
    /// The sidecar's own addresses, which nothing overrides.
    pub own: &'a [IpAddr],
}

/// The guard's whole verdict on one (unmapped) address.
///
/// A rule naming the literal opens anything but unspecified, multicast and broadcast. The
/// inside subnets and the trusted networks open only loopback, private, CGNAT and unique-local
/// addresses: never the metadata endpoint, and never an IPv6 form embedding IPv4. Nothing
/// opens the sidecar's own addresses.
pub(crate) fn admit(ip: IpAddr, o: &Overrides<'_>) -> Result<IpAddr, Refusal> {
    match admit_by_class(ip, o) {
        Ok(ip) if o.own.contains(&ip) => Err(Refusal::Sidecar),
        verdict => verdict,
    }
}

fn admit_by_class(ip: IpAddr, o: &Overrides<'_>) -> Result<IpAddr, Refusal> {
    let base = classify(ip);
    if o.named_literal
        && !matches!(
            base,
            Err(Refusal::Class(AddressClass::Unspecified)
                | Refusal::Class(AddressClass::Multicast)
                | Refusal::Class(AddressClass::Broadcast))
        )
    {
        return Ok(ip);
    }
    let listed = |nets: &[IpNet]| nets.iter().any(|n| n.contains(&ip));
    match base {
        Err(r) if r.overridable() && (listed(o.inside) || listed(o.trusted)) => Ok(ip),
        Err(r) => Err(r),
        Ok(()) if ip.is_ipv6() && !o.allow_ipv6 => Err(Refusal::Ipv6NotAllowed),
        Ok(()) => Ok(ip),
    }
}

/// Why the guard did not produce a connection.
#[derive(Debug, thiserror::Error)]
pub(crate) enum DialError {
    /// Every address of the destination was refused.
    #[error("{host} resolved only to addresses the sidecar never dials ({addr}: {})", refusal.as_str())]
    Refused {
        host: String,
        addr: IpAddr,
        refusal: Refusal,
    },
    /// The name did not resolve.
    #[error("{host} could not be resolved: {reason}")]
    Resolve { host: String, reason: String },
    /// Every passed address refused the connection or timed out.
    #[error("could not connect to {host} ({addr}): {reason}")]
    Connect {
        host: String,
        addr: SocketAddr,
        reason: String,
    },
    /// The dial deadline passed before any address answered.
    #[error(
        "no address of {host} answered within the dial deadline of {} ms ({tried} of {addresses} addresses tried)",
        deadline.as_millis()
    )]
    Deadline {
        host: String,
        deadline: Duration,
        tried: usize,
        addresses: usize,
    },
    /// The sidecar already holds as many upstream connections as it may.
    #[error(
        "{host} was not dialled: the sidecar already holds limits.max_upstream_connections ({max}) upstream connections"
    )]
    Limit { host: String, max: usize },
}

/// The shortest time one address is given while the deadline allows it (as Go's dialer).
const MIN_ATTEMPT: Duration = Duration::from_secs(2);

/// How long the next of `left` addresses may take to connect: an equal share of what remains
/// of the deadline, but at least [`MIN_ATTEMPT`] (or all that remains), and never more than
/// the per-address `connect_timeout`.
fn attempt_timeout(remaining: Duration, left: usize, connect_timeout: Duration) -> Duration {
    let share = remaining / u32::try_from(left.max(1)).unwrap_or(u32::MAX);
    share.max(MIN_ATTEMPT.min(remaining)).min(connect_timeout)
}

/// The guard: resolver, classifier and the overrides, shared by every dial.
pub(crate) struct Guard {
    catalogue: Arc<Catalogue>,
    resolver: TokioResolver,
    inside: Vec<IpNet>,
    trusted: Vec<IpNet>,
    own: Vec<IpAddr>,
    connect_timeout: Duration,
    resolve_timeout: Duration,
    dial_timeout: Duration,
    upstream: UpstreamLimit,
    metrics: Arc<Metrics>,
}

/// How the guard is built.
pub(crate) struct GuardSettings {
    /// The one resolver every name is resolved against.
    pub resolver: SocketAddr,
    /// The environment's own subnets.
    pub inside: Vec<IpNet>,
    /// Trusted upstream networks (tests).
    pub trusted: Vec<IpNet>,
    /// The sidecar's own inside addresses (its DNS answers), never dialled.
    pub own: Vec<IpAddr>,
    /// Connect timeout of one address.
    pub connect_timeout: Duration,
    /// Name resolution timeout.
    pub resolve_timeout: Duration,
    /// Deadline of a whole dial, resolution and every address included.
    pub dial_timeout: Duration,
    /// The cap every upstream connection takes a place under.
    pub upstream: UpstreamLimit,
}

impl Guard {
    /// Build the guard; the resolver is configured with exactly one name server.
    pub(crate) fn new(
        catalogue: Arc<Catalogue>,
        settings: GuardSettings,
        metrics: Arc<Metrics>,
    ) -> Result<Self, String> {
        let resolver = resolver_for(settings.resolver, settings.resolve_timeout)?;
        Ok(Self {
            catalogue,
            resolver,
            inside: settings.inside,
            trusted: settings.trusted,
            own: settings.own,
            connect_timeout: settings.connect_timeout,
            resolve_timeout: settings.resolve_timeout,
            dial_timeout: settings.dial_timeout,
            upstream: settings.upstream,
            metrics,
        })
    }

    /// Check one address. `literal` is true when the request itself named this IP literal,
    /// the only case in which a rule naming the exact address overrides a refusal.
    pub(crate) fn check(&self, ip: IpAddr, port: u16, literal: bool) -> Result<IpAddr, Refusal> {
        let ip = unmap(ip);
        admit(
            ip,
            &Overrides {
                named_literal: literal && self.catalogue.names_ip(ip, port),
                allow_ipv6: self.catalogue.allow_ipv6(),
                inside: &self.inside,
                trusted: &self.trusted,
                own: &self.own,
            },
        )
    }

    /// Resolve `host` (a name or an IP literal) and return the addresses that passed, in the
    /// resolver's order. Fails with the first refusal when none passed.
    pub(crate) async fn resolve(
        &self,
        host: &str,
        port: u16,
    ) -> Result<Vec<SocketAddr>, DialError> {
        let bare = host.trim_start_matches('[').trim_end_matches(']');
        if let Ok(ip) = bare.parse::<IpAddr>() {
            return match self.check(ip, port, true) {
                Ok(ip) => Ok(vec![SocketAddr::new(ip, port)]),
                Err(refusal) => Err(self.refused(host, ip, refusal)),
            };
        }
        let fqdn;
        let name = if host.ends_with('.') {
            host
        } else {
            fqdn = format!("{host}.");
            &fqdn
        };
        let lookup = tokio::time::timeout(self.resolve_timeout, self.resolver.lookup_ip(name))
            .await
            .map_err(|_| DialError::Resolve {
                host: host.to_owned(),
                reason: "resolver timed out".into(),
            })?
            .map_err(|e| DialError::Resolve {
                host: host.to_owned(),
                reason: e.to_string(),
            })?;
        let mut passed = Vec::new();
        let mut first_refusal = None;
        for ip in lookup.iter() {
            match self.check(ip, port, false) {
                Ok(ip) => passed.push(SocketAddr::new(ip, port)),
                Err(r) => {
                    first_refusal.get_or_insert((ip, r));
                }
            }
        }
        match (passed.is_empty(), first_refusal) {
            (false, _) => Ok(passed),
            (true, Some((ip, r))) => Err(self.refused(host, ip, r)),
            (true, None) => Err(DialError::Resolve {
                host: host.to_owned(),
                reason: "no addresses".into(),
            }),
        }
    }

    fn refused(&self, host: &str, addr: IpAddr, refusal: Refusal) -> DialError {
        self.metrics.guard_refusal();
        DialError::Refused {
            host: host.to_owned(),
            addr,
            refusal,
        }
    }

    /// Resolve, check and connect to the first address that passed and answers, all within
    /// the dial deadline; the connection holds a place under the upstream cap until it closes.
    pub(crate) async fn dial(&self, host: &str, port: u16) -> Result<UpstreamConn, DialError> {
        let deadline = Instant::now() + self.dial_timeout;
        let past_deadline = |tried, addresses| DialError::Deadline {
            host: host.to_owned(),
            deadline: self.dial_timeout,
            tried,
            addresses,
        };
        let addrs = tokio::time::timeout_at(deadline, self.resolve(host, port))
            .await
            .map_err(|_| past_deadline(0, 0))??;
        let place = self.upstream.try_take().ok_or_else(|| DialError::Limit {
            host: host.to_owned(),
            max: self.upstream.max(),
        })?;
        let mut last = None;
        for (tried, addr) in addrs.iter().enumerate() {
            let remaining = deadline.saturating_duration_since(Instant::now());
            if remaining.is_zero() {
                return Err(past_deadline(tried, addrs.len()));
            }
            let timeout = attempt_timeout(remaining, addrs.len() - tried, self.connect_timeout);
            self.metrics.upstream_dial();
            match tokio::time::timeout(timeout, TcpStream::connect(addr)).await {
                Ok(Ok(stream)) => {
                    let _ = stream.set_nodelay(true);
                    return Ok(UpstreamConn::new(stream, place));
                }
                Ok(Err(e)) => last = Some((*addr, e.to_string())),
                Err(_) if Instant::now() >= deadline => {
                    return Err(past_deadline(tried + 1, addrs.len()));
                }
                Err(_) => last = Some((*addr, "connect timed out".into())),
            }
        }
        let (addr, reason) =
            last.unwrap_or_else(|| (SocketAddr::from(([0, 0, 0, 0], port)), "no address".into()));
        Err(DialError::Connect {
            host: host.to_owned(),
            addr,
            reason,
        })
    }
}

/// A resolver asking only `server` (UDP, then TCP), never the hosts file, for both address
/// families.
pub(crate) fn resolver_for(server: SocketAddr, timeout: Duration) -> Result<TokioResolver, String> {
    let mut ns = NameServerConfig::new(
        server.ip(),
        true,
        vec![ConnectionConfig::udp(), ConnectionConfig::tcp()],
    );
    for c in &mut ns.connections {
        c.port = server.port();
    }
    let mut builder = TokioResolver::builder_with_config(
        ResolverConfig::from_name_servers(vec![ns]),
        TokioRuntimeProvider::default(),
    );
    let opts = builder.options_mut();
    opts.use_hosts_file = ResolveHosts::Never;
    // Ask for both families even without IPv6, so an AAAA-only name is refused by the guard
    // with its reason rather than failing as "not found".
    opts.ip_strategy = LookupIpStrategy::Ipv4AndIpv6;
    opts.timeout = timeout;
    opts.attempts = 2;
    opts.ndots = 0;
    builder.build().map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().expect("test address")
    }

    #[test]
    fn refusal_table_classifies_every_special_range() {
        let table: &[(&str, Result<(), Refusal>)] = &[
            ("127.0.0.1", Err(Refusal::Class(AddressClass::Loopback))),
            ("127.255.0.9", Err(Refusal::Class(AddressClass::Loopback))),
            ("10.0.0.1", Err(Refusal::Class(AddressClass::Private))),
            ("172.16.0.1", Err(Refusal::Class(AddressClass::Private))),
            ("172.31.255.255", Err(Refusal::Class(AddressClass::Private))),
            ("192.168.1.1", Err(Refusal::Class(AddressClass::Private))),
            (
                "169.254.169.254",
                Err(Refusal::Class(AddressClass::LinkLocal)),
            ),
            ("100.64.0.1", Err(Refusal::Class(AddressClass::SharedCgnat))),
            (
                "100.127.255.254",
                Err(Refusal::Class(AddressClass::SharedCgnat)),
            ),
            ("0.0.0.0", Err(Refusal::Class(AddressClass::Unspecified))),
            ("0.1.2.3", Err(Refusal::Class(AddressClass::Unspecified))),
            ("224.0.0.1", Err(Refusal::Class(AddressClass::Multicast))),
            (
                "239.255.255.250",
                Err(Refusal::Class(AddressClass::Multicast)),
            ),
            (
                "255.255.255.255",
                Err(Refusal::Class(AddressClass::Broadcast)),
            ),
            ("240.0.0.1", Err(Refusal::Class(AddressClass::Reserved))),
            ("198.18.0.1", Err(Refusal::Class(AddressClass::Reserved))),
            ("::1", Err(Refusal::Class(AddressClass::Loopback))),
            ("::", Err(Refusal::Class(AddressClass::Unspecified))),
            ("fe80::1", Err(Refusal::Class(AddressClass::LinkLocal))),
            ("fc00::1", Err(Refusal::Class(AddressClass::UniqueLocal))),
            (
                "fd12:3456::1",
                Err(Refusal::Class(AddressClass::UniqueLocal)),
            ),
            ("ff02::1", Err(Refusal::Class(AddressClass::Multicast))),
            ("fec0::1", Err(Refusal::Class(AddressClass::Reserved))),
            (
                "::ffff:127.0.0.1",
                Err(Refusal::Class(AddressClass::EmbedsRefusedIpv4)),
            ),
            (
                "::ffff:10.1.2.3",
                Err(Refusal::Class(AddressClass::EmbedsRefusedIpv4)),
            ),
            ("::127.0.0.1", Err(Refusal::Class(AddressClass::Reserved))),
            ("::8.8.8.8", Err(Refusal::Class(AddressClass::Reserved))),
            (
                "2002:7f00:1::",
                Err(Refusal::Class(AddressClass::EmbedsRefusedIpv4)),
            ),
            (
                "2002:a9fe:a9fe::1",
                Err(Refusal::Class(AddressClass::EmbedsRefusedIpv4)),
            ),
            // Teredo, client 127.0.0.1 (inverted: 80ff:fffe).
            (
                "2001:0:4136:e378:8000:63bf:80ff:fffe",
                Err(Refusal::Class(AddressClass::EmbedsRefusedIpv4)),
            ),
            // Teredo, server 10.0.0.1.
            (
                "2001:0:a00:1::1",
                Err(Refusal::Class(AddressClass::EmbedsRefusedIpv4)),
            ),
            (
                "64:ff9b::a00:1",
                Err(Refusal::Class(AddressClass::EmbedsRefusedIpv4)),
            ),
            (
                "64:ff9b::7f00:1",
                Err(Refusal::Class(AddressClass::EmbedsRefusedIpv4)),
            ),
            ("64:ff9b:1::1", Err(Refusal::Class(AddressClass::Reserved))),
            ("100::1", Err(Refusal::Class(AddressClass::Reserved))),
            // Dialable.
            ("192.0.2.10", Ok(())),
            ("198.51.100.7", Ok(())),
            ("203.0.113.5", Ok(())),
            ("8.8.8.8", Ok(())),
            ("172.32.0.1", Ok(())),
            ("100.128.0.1", Ok(())),
            ("2606:4700::1111", Ok(())),
            ("2002:c000:20a::1", Ok(())),
            ("64:ff9b::c000:20a", Ok(())),
        ];
        for (addr, want) in table {
            assert_eq!(classify(ip(addr)), *want, "{addr}");
        }
    }

    #[test]
    fn addresses_share_what_remains_of_the_dial_deadline() {
        let s = Duration::from_secs;
        let ms = Duration::from_millis;
        // One address: the per-address timeout, or what remains when that is shorter.
        assert_eq!(attempt_timeout(s(15), 1, s(10)), s(10));
        assert_eq!(attempt_timeout(s(4), 1, s(10)), s(4));
        // Several: an equal share, so the last address is still tried.
        assert_eq!(attempt_timeout(s(15), 3, s(10)), s(5));
        assert_eq!(attempt_timeout(s(15), 3, s(3)), s(3));
        // A share never falls below two seconds while that much remains...
        assert_eq!(attempt_timeout(s(6), 10, s(10)), s(2));
        // ...nor above what remains.
        assert_eq!(attempt_timeout(ms(700), 10, s(10)), ms(700));
        assert_eq!(attempt_timeout(ms(700), 0, s(10)), ms(700));
    }

    #[test]
    fn overrides_open_only_what_they_may() {
        let net = |s: &str| -> IpNet { s.parse().expect("test net") };
        let trusted = [net("127.0.0.0/8"), net("10.0.0.0/8"), net("169.254.0.0/16")];
        let inside = [net("172.30.0.0/24")];
        let own = [ip("172.30.0.2")];
        let o = |named_literal, allow_ipv6| Overrides {
            named_literal,
            allow_ipv6,
            inside: &inside,
            trusted: &trusted,
            own: &own,
        };
        let table: &[(&str, bool, bool, Result<(), Refusal>)] = &[
            // Trusted networks open loopback and private...
            ("127.0.0.2", false, false, Ok(())),
            ("10.1.2.3", false, false, Ok(())),
            // ...but never the metadata endpoint, even if listed.
            (
                "169.254.169.254",
                false,
                false,
                Err(Refusal::Class(AddressClass::LinkLocal)),
            ),
            // Inside subnets open the environment's own network only.
            ("172.30.0.9", false, false, Ok(())),
            // The sidecar's own address is never dialled: a tunnel to it would loop.
            ("172.30.0.2", false, false, Err(Refusal::Sidecar)),
            ("172.30.0.2", true, false, Err(Refusal::Sidecar)),
            (
                "172.31.0.9",
                false,
                false,
                Err(Refusal::Class(AddressClass::Private)),
            ),
            (
                "192.168.0.1",
                false,
                false,
                Err(Refusal::Class(AddressClass::Private)),
            ),
            // A rule naming the literal opens it, but not unspecified/multicast/broadcast.
            ("192.168.0.1", true, false, Ok(())),
            ("169.254.169.254", true, false, Ok(())),
            (
                "0.0.0.0",
                true,
                false,
                Err(Refusal::Class(AddressClass::Unspecified)),
            ),
            (
                "224.0.0.1",
                true,
                false,
                Err(Refusal::Class(AddressClass::Multicast)),
            ),
            (
                "255.255.255.255",
                true,
                false,
                Err(Refusal::Class(AddressClass::Broadcast)),
            ),
            // Embedded forms of trusted IPv4 stay refused.
            (
                "2002:7f00:2::",
                false,
                true,
                Err(Refusal::Class(AddressClass::EmbedsRefusedIpv4)),
            ),
            (
                "64:ff9b::7f00:2",
                false,
                true,
                Err(Refusal::Class(AddressClass::EmbedsRefusedIpv4)),
            ),
            // IPv6 needs allow_ipv6.
            (
                "2606:4700::1111",
                false,
                false,
                Err(Refusal::Ipv6NotAllowed),
            ),
            ("2606:4700::1111", false, true, Ok(())),
            (
                "::1",
                false,
                true,
                Err(Refusal::Class(AddressClass::Loopback)),
            ),
        ];
        for (addr, named, v6, want) in table {
            let got = admit(ip(addr), &o(*named, *v6)).map(|_| ());
            assert_eq!(got, *want, "{addr} named={named} allow_ipv6={v6}");
        }
        assert_eq!(unmap(ip("::ffff:127.0.0.1")), ip("127.0.0.1"));
        let no_overrides = Overrides {
            named_literal: false,
            allow_ipv6: true,
            inside: &[],
            trusted: &[],
            own: &[],
        };
        assert_eq!(
            admit(ip("127.0.0.2"), &no_overrides),
            Err(Refusal::Class(AddressClass::Loopback))
        );
    }
}
