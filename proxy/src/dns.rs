//! The environment's DNS server inside the sidecar: af-dns answers, every first sighting of
//! a name becomes a journal record carrying the mode the catalogue gives that host, and DNS
//! over TCP holds places under `limits.max_connections` like every data connection.

use std::sync::Arc;

use af_dns::{DnsError, QueryObserver, Sighting, TcpAdmission, TcpPlace};
use af_policy::egress::Catalogue;
use af_policy::error::{Report, codes};

use crate::limits::ConnectionLimit;
use crate::record::journal::{DnsSighting, Entry, Journal};

/// DNS-over-TCP connections are admitted under the data listeners' cap (a refusal is counted
/// with theirs) and are closed at once past it.
impl TcpAdmission for ConnectionLimit {
    fn admit(&self) -> Option<TcpPlace> {
        let admitted = self.try_admit()?;
        Some(Box::new(admitted))
    }
}

/// The port a sighting's mode is decided for: a name is looked up before any port is known,
/// and most outside traffic is HTTPS.
const SIGHTING_PORT: u16 = 443;

/// Journals first sightings. Runs on af-dns's observer thread; `Journal::record` never waits.
pub(crate) struct JournalSightings {
    /// Where sightings go.
    pub journal: Journal,
    /// Decides the mode each sighted host would get.
    pub catalogue: Arc<Catalogue>,
}

impl QueryObserver for JournalSightings {
    fn first_seen(&self, sighting: &Sighting) {
        let decision = self.catalogue.decide_host(&sighting.name, SIGHTING_PORT);
        self.journal.record(Entry::DnsSighting(DnsSighting {
            via: "dns".to_owned(),
            client: sighting.client,
            host: sighting.name.clone(),
            qtype: sighting.record_type.to_string(),
            answer: format!("{:?}", sighting.answer).to_ascii_lowercase(),
            mode: decision.mode,
            rule: self.catalogue.rule_label(decision.rule).to_owned(),
        }));
    }
}

/// af-dns's error as the product's coded refusal.
pub(crate) fn refusal(error: DnsError) -> Report {
    match error {
        DnsError::Config { problem, next } => Report::new(
            &codes::NET_DNS_CONFIG,
            format!("The DNS configuration is invalid: {problem}."),
        )
        .with_next(format!("{next}.")),
        DnsError::Upstream { upstream, reason } => Report::new(
            &codes::NET_DNS_CONFIG,
            format!("The resolver for inside names at {upstream} cannot be used: {reason}."),
        )
        .with_next("Set listeners.dns.inside_resolver to the runtime's resolver."),
        DnsError::Bind {
            addr,
            transport,
            source,
        } => Report::new(
            &codes::NET_BIND,
            format!("The DNS listener could not listen over {transport} on {addr}: {source}."),
        )
        .with_next(format!(
            "Free {addr} or set listeners.dns.listen to another address."
        )),
        DnsError::Stopped { reason } => Report::new(
            &codes::NET_DNS_STOPPED,
            format!("The DNS server stopped: {reason}."),
        ),
    }
}
