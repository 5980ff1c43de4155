//! Where each listener binds. A listener missing from the file listens on its default address;
//! `listen: null` turns it off (for SMTP, an empty list).

use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4};
use std::num::{NonZeroU32, NonZeroU64};

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Every listener.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Listeners {
    /// Explicit proxy (absolute-form and CONNECT).
    #[serde(default)]
    pub proxy: ProxyListener,
    /// Transparent HTTP.
    #[serde(default)]
    pub transparent_http: TransparentHttp,
    /// Transparent TLS.
    #[serde(default)]
    pub transparent_tls: TransparentTls,
    /// The environment's DNS server (af-dns), UDP and TCP.
    #[serde(default)]
    pub dns: DnsListener,
    /// The SMTP listener whose mail lands in the inbox.
    #[serde(default)]
    pub smtp: SmtpListener,
}

/// `0.0.0.0:port`, every listener's default address.
fn any(port: u16) -> SocketAddr {
    SocketAddr::from((Ipv4Addr::UNSPECIFIED, port))
}

/// The explicit proxy listener.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ProxyListener {
    /// Bind address, default `0.0.0.0:3128`.
    #[serde(default = "ProxyListener::default_listen")]
    pub listen: Option<SocketAddr>,
}

impl ProxyListener {
    /// The port services are pointed at (`HTTP_PROXY`) when `listen` is not given.
    pub const DEFAULT_PORT: u16 = 3128;

    fn default_listen() -> Option<SocketAddr> {
        Some(any(Self::DEFAULT_PORT))
    }
}

impl Default for ProxyListener {
    fn default() -> Self {
        Self {
            listen: Self::default_listen(),
        }
    }
}

/// The transparent HTTP listener.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TransparentHttp {
    /// Bind address, default `0.0.0.0:80`.
    #[serde(default = "TransparentHttp::default_listen")]
    pub listen: Option<SocketAddr>,
    /// The port requests are decided and forwarded on (never taken from `Host`), default 80.
    #[serde(default = "TransparentHttp::default_port")]
    pub advertised_port: u16,
}

impl TransparentHttp {
    fn default_listen() -> Option<SocketAddr> {
        Some(any(Self::default_port()))
    }
    fn default_port() -> u16 {
        80
    }
}

impl Default for TransparentHttp {
    fn default() -> Self {
        Self {
            listen: Self::default_listen(),
            advertised_port: Self::default_port(),
        }
    }
}

/// The transparent TLS listener.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TransparentTls {
    /// Bind address, default `0.0.0.0:443`.
    #[serde(default = "TransparentTls::default_listen")]
    pub listen: Option<SocketAddr>,
    /// The upstream port connections are decided and tunnelled to, default 443.
    #[serde(default = "TransparentTls::default_port")]
    pub upstream_port: u16,
}

impl TransparentTls {
    fn default_listen() -> Option<SocketAddr> {
        Some(any(Self::default_port()))
    }
    fn default_port() -> u16 {
        443
    }
}

impl Default for TransparentTls {
    fn default() -> Self {
        Self {
            listen: Self::default_listen(),
            upstream_port: Self::default_port(),
        }
    }
}

/// The DNS listener, served by af-dns: outside names answer with `answer_v4`, inside names
/// are forwarded to `inside_resolver`. The defaults here are af-dns's defaults too.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DnsListener {
    /// Bind address (UDP and TCP), default `0.0.0.0:53`.
    #[serde(default = "DnsListener::default_listen")]
    pub listen: Option<SocketAddr>,
    /// The runtime's resolver for inside names (Docker: `127.0.0.11:53`). Required when DNS
    /// is on.
    #[serde(default)]
    pub inside_resolver: Option<SocketAddr>,
    /// The sidecar's own inside IPv4 address, the answer for every outside name. Required
    /// when DNS is on.
    #[serde(default)]
    pub answer_v4: Option<Ipv4Addr>,
    /// The sidecar's inside IPv6 address, answered for AAAA when the catalogue allows IPv6.
    #[serde(default)]
    pub answer_v6: Option<Ipv6Addr>,
    /// The runtime's own zones, forwarded like inside names (e.g. `svc.cluster.local`).
    #[serde(default)]
    pub inside_zones: Vec<String>,
    /// Ask the runtime's resolver for single-label names `inside.names` does not list (off:
    /// they are answered as outside, so made-up short names cannot carry data out through it).
    #[serde(default)]
    pub forward_unlisted_short_names: bool,
    /// UDP sockets sharing the port (SO_REUSEPORT); 0 (the default) means one per core.
    #[serde(default)]
    pub udp_sockets: usize,
    /// How many (name, type) pairs are remembered as seen, default 65 536 (about 16 bytes
    /// each); the oldest is forgotten first.
    #[serde(default = "DnsListener::default_seen_capacity")]
    pub seen_capacity: usize,
    /// First sightings journaled per second (ten times as many at once), default 50; past it
    /// one is counted and journaled on a later query once there is room, so a flood of made-up
    /// names cannot push decisions out of the bounded journal.
    #[serde(default = "DnsListener::default_sightings_per_second")]
    pub sightings_per_second: NonZeroU32,
    /// A DNS-over-TCP connection that brings no whole query for this long is closed, default
    /// 10 s. DNS-over-TCP connections count under `limits.max_connections`.
    #[serde(default = "DnsListener::default_tcp_idle_secs")]
    pub tcp_idle_secs: NonZeroU64,
}

impl DnsListener {
    /// `listen` when not given: every address, port 53.
    pub const DEFAULT_LISTEN: SocketAddr =
        SocketAddr::V4(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 53));
    /// `seen_capacity` when not given.
    pub const DEFAULT_SEEN_CAPACITY: usize = 65_536;
    /// `sightings_per_second` when not given.
    pub const DEFAULT_SIGHTINGS_PER_SECOND: NonZeroU32 = super::non_zero_u32(50);
    /// `tcp_idle_secs` when not given.
    pub const DEFAULT_TCP_IDLE_SECS: NonZeroU64 = super::non_zero_u64(10);

    fn default_listen() -> Option<SocketAddr> {
        Some(Self::DEFAULT_LISTEN)
    }
    fn default_seen_capacity() -> usize {
        Self::DEFAULT_SEEN_CAPACITY
    }
    fn default_sightings_per_second() -> NonZeroU32 {
        Self::DEFAULT_SIGHTINGS_PER_SECOND
    }
    fn default_tcp_idle_secs() -> NonZeroU64 {
        Self::DEFAULT_TCP_IDLE_SECS
    }
}

impl Default for DnsListener {
    fn default() -> Self {
        Self {
            listen: Self::default_listen(),
            inside_resolver: None,
            answer_v4: None,
            answer_v6: None,
            inside_zones: Vec::new(),
            forward_unlisted_short_names: false,
            udp_sockets: 0,
            seen_capacity: Self::DEFAULT_SEEN_CAPACITY,
            sightings_per_second: Self::DEFAULT_SIGHTINGS_PER_SECOND,
            tcp_idle_secs: Self::DEFAULT_TCP_IDLE_SECS,
        }
    }
}

/// The SMTP listener: every address it listens on (default ports 25, 587 and 2525).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SmtpListener {
    /// Bind addresses; an empty list turns SMTP off.
    #[serde(default = "SmtpListener::default_listen")]
    pub listen: Vec<SocketAddr>,
    /// Largest message accepted, default 10 MiB.
    #[serde(default = "SmtpListener::default_max_message")]
    pub max_message_bytes: usize,
}

impl SmtpListener {
    /// The ports SMTP listens on when `listen` is not given.
    pub const DEFAULT_PORTS: [u16; 3] = [25, 587, 2525];

    fn default_listen() -> Vec<SocketAddr> {
        Self::DEFAULT_PORTS.into_iter().map(any).collect()
    }
    fn default_max_message() -> usize {
        10 * 1024 * 1024
    }
}

impl Default for SmtpListener {
    fn default() -> Self {
        Self {
            listen: Self::default_listen(),
            max_message_bytes: Self::default_max_message(),
        }
    }
}
