//! What a listener saw, as the decision and its record read it: the host normalised, the URL,
//! the `af net explain` line.

use std::net::SocketAddr;

use crate::decide::tripwire;
use crate::metrics::Via;

/// What a listener saw.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Ask<'a> {
    /// Which listener.
    pub via: Via,
    /// For a request inside an opened TLS connection: the listener that connection arrived on.
    pub arrived: Option<Via>,
    /// The client.
    pub client: SocketAddr,
    /// Method (`CONNECT` for a proxy tunnel, empty for a TLS connection).
    pub method: &'a str,
    /// Host as received; normalised here.
    pub host: &'a str,
    /// Port, from the listener or the CONNECT authority.
    pub port: u16,
    /// Path with query (empty for tunnels).
    pub path: &'a str,
    /// Whether this is a tunnel (CONNECT or TLS) decided on the host alone.
    pub tunnel: bool,
}

impl Ask<'_> {
    /// The scheme the client used: `https` inside an intercepted connection.
    pub(crate) fn scheme(&self) -> &'static str {
        if self.via == Via::Intercept {
            "https"
        } else {
            "http"
        }
    }
}

/// The host as the catalogue compares it (lower-case, no trailing dot, IDN in punycode, no
/// IPv6 brackets); a host the catalogue cannot read is kept lower-cased for the record.
pub(crate) fn normalize_host(host: &str) -> String {
    let bare = host.trim_start_matches('[').trim_end_matches(']');
    match af_policy::egress::normalize_host(bare) {
        Ok(h) => h.into_owned(),
        Err(_) => bare.trim_end_matches('.').to_lowercase(),
    }
}

/// `host:port` as a reader writes it: an IPv6 host in brackets (`[::1]:443`).
#[derive(Debug, Clone, Copy)]
pub(crate) struct HostPort<'a>(pub &'a str, pub u16);

impl std::fmt::Display for HostPort<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let HostPort(host, port) = *self;
        if host.contains(':') {
            write!(f, "[{host}]:{port}")
        } else {
            write!(f, "{host}:{port}")
        }
    }
}

/// The URL a request was for: `scheme://host[:port]path`, the port shown unless it is the
/// scheme's default, the path redacted. A tunnel is `https://host[:port]/`.
pub(crate) fn request_url(ask: &Ask<'_>, host: &str) -> String {
    let (scheme, default_port, path) = if ask.tunnel {
        ("https", 443, "/".into())
    } else {
        let default_port = if ask.via == Via::Intercept { 443 } else { 80 };
        (
            ask.scheme(),
            default_port,
            tripwire::redact_path(host, ask.path),
        )
    };
    let authority = HostPort(host, ask.port).to_string();
    let authority = if ask.port == default_port {
        authority
            .rsplit_once(':')
            .map_or(authority.as_str(), |(h, _)| h)
    } else {
        authority.as_str()
    };
    format!("{scheme}://{authority}{path}")
}

/// The `af net explain` command line for a request.
pub(crate) fn explain_command(ask: &Ask<'_>, host: &str) -> String {
    let method = if ask.method.is_empty() || ask.tunnel {
        "GET"
    } else {
        ask.method
    };
    format!("af net explain {method} {}", request_url(ask, host))
}
