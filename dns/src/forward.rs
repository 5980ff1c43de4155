//! Asks the runtime's resolver about a possibly-inside name and judges the answer: inside only if
//! every address it returns lies in the environment's networks.

use std::{net::IpAddr, time::Duration};

use hickory_proto::rr::{LowerName, Name, RData, RecordType};
use hickory_resolver::{
    TokioResolver,
    config::{NameServerConfig, ResolveHosts, ResolverConfig},
    net::runtime::TokioRuntimeProvider,
};
use ipnet::IpNet;

use crate::{
    config::{DnsConfig, is_inside},
    error::DnsError,
};

/// What the runtime's resolver said about a name, judged against the inside networks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Forwarded {
    /// Every address is inside: answer with these (non-empty), for `ttl` seconds.
    Inside {
        /// The addresses, in the resolver's order.
        addrs: Vec<IpAddr>,
        /// The smaller of the resolver's TTL and the configured one.
        ttl: u32,
    },
    /// The name exists inside but has no address of this type: answer empty `NOERROR`.
    NoData,
    /// The name does not exist inside, or some address is outside: answer as an outside name.
    NotInside,
    /// The resolver did not answer in time or failed: answer `SERVFAIL`.
    Failed,
}

/// A hickory-resolver pointed only at the runtime's resolver (no hosts file, no search list).
pub(crate) struct Forwarder {
    resolver: TokioResolver,
    subnets: Vec<IpNet>,
    ttl: u32,
    timeout: Duration,
}

impl Forwarder {
    /// Builds the resolver for `config.upstream`; no traffic is sent until the first lookup.
    pub(crate) fn new(config: &DnsConfig) -> Result<Self, DnsError> {
        let mut server = NameServerConfig::udp_and_tcp(config.upstream.ip());
        for connection in &mut server.connections {
            connection.port = config.upstream.port();
        }
        let timeout = Duration::from_millis(config.upstream_timeout_ms);
        let ttl_cap = Duration::from_secs(u64::from(config.ttl_secs));
        let mut builder = TokioResolver::builder_with_config(
            ResolverConfig::from_name_servers(vec![server]),
            TokioRuntimeProvider::default(),
        );
        let opts = builder.options_mut();
        opts.timeout = timeout;
        opts.use_hosts_file = ResolveHosts::Never;
        // Inside answers can change when `af up` replaces a service: never cache past our TTL.
        opts.positive_max_ttl = Some(ttl_cap);
        opts.negative_max_ttl = Some(ttl_cap);
        let resolver = builder.build().map_err(|error| DnsError::Upstream {
            upstream: config.upstream,
            reason: error.to_string(),
        })?;
        Ok(Self {
            resolver,
            subnets: config.inside_subnets.clone(),
            ttl: config.ttl_secs,
            timeout,
        })
    }

    /// Looks `name` up for an address type (`A` or `AAAA`) and judges the result.
    pub(crate) async fn resolve(&self, name: &LowerName, record_type: RecordType) -> Forwarded {
        let lookup = self.resolver.lookup(Name::from(name), record_type);
        let result = match tokio::time::timeout(self.timeout, lookup).await {
            Ok(result) => result,
            Err(_elapsed) => return Forwarded::Failed,
        };
        match result {
            Ok(lookup) => {
                let mut ttl = self.ttl;
                let mut addrs = Vec::new();
                for record in lookup.answers() {
                    let addr = match &record.data {
                        RData::A(a) => IpAddr::V4(a.0),
                        RData::AAAA(aaaa) => IpAddr::V6(aaaa.0),
                        _ => continue,
                    };
                    ttl = ttl.min(record.ttl);
                    addrs.push(addr);
                }
                self.judge(addrs, ttl)
            }
            Err(error) if error.is_nx_domain() => Forwarded::NotInside,
            Err(error) if error.is_no_records_found() => Forwarded::NoData,
            Err(error) => {
                tracing::debug!(%error, %name, "runtime resolver failed");
                Forwarded::Failed
            }
        }
    }

    fn judge(&self, addrs: Vec<IpAddr>, ttl: u32) -> Forwarded {
        if addrs.is_empty() {
            Forwarded::NoData
        } else if addrs.iter().all(|addr| is_inside(&self.subnets, *addr)) {
            Forwarded::Inside { addrs, ttl }
        } else {
            Forwarded::NotInside
        }
    }
}
