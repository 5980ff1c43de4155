//! The crate's one error type. Every variant names a product error code, a one-sentence
//! statement and a `Next:` line, as the sidecar prints them.

use std::{io, net::SocketAddr};

/// Why the DNS server could not be configured, started or kept running.
#[derive(Debug, thiserror::Error)]
pub enum DnsError {
    /// The configuration is invalid (`AF-NET-030`).
    #[error("AF-NET-030 invalid DNS configuration: {problem}.\nNext: {next}.")]
    Config {
        /// What is wrong, naming the field.
        problem: String,
        /// What to change.
        next: &'static str,
    },
    /// A listening socket could not be opened (`AF-NET-002`).
    #[error(
        "AF-NET-002 cannot listen for DNS over {transport} on {addr}: {source}.\nNext: free the port, or set dns.listen to another address."
    )]
    Bind {
        /// The address asked for.
        addr: SocketAddr,
        /// `udp` or `tcp`.
        transport: &'static str,
        /// The operating system's reason.
        #[source]
        source: io::Error,
    },
    /// The resolver for inside names could not be built (`AF-NET-030`).
    #[error(
        "AF-NET-030 invalid DNS configuration: the resolver for {upstream} cannot be built: {reason}.\nNext: check dns.upstream."
    )]
    Upstream {
        /// The runtime resolver's address.
        upstream: SocketAddr,
        /// Why hickory-resolver refused it.
        reason: String,
    },
    /// The server stopped on its own, e.g. a socket closed under it (`AF-NET-032`).
    #[error(
        "AF-NET-032 the DNS server stopped: {reason}.\nNext: restart the sidecar; if it repeats, report it with the sidecar log."
    )]
    Stopped {
        /// What hickory-server reported.
        reason: String,
    },
}
