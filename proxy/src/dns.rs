//! The environment's DNS server inside the sidecar: af-dns answers, and every first sighting of
//! a name becomes a journal record carrying the mode the catalogue gives that host.

use std::num::NonZeroU32;
use std::sync::Arc;

use af_dns::{DnsError, QueryObserver, Sighting};
use af_policy::egress::Catalogue;
use af_policy::error::{Report, codes};
use governor::{DefaultDirectRateLimiter, Quota, RateLimiter};

use crate::journal::{DnsSighting, Entry, Journal};
use crate::metrics::Metrics;

/// The port a sighting's mode is decided for: a name is looked up before any port is known,
/// and most outside traffic is HTTPS.
const SIGHTING_PORT: u16 = 443;

/// Journals first sightings, within a budget. Runs on af-dns's observer thread;
/// `Journal::record` never waits.
pub struct JournalSightings {
    journal: Journal,
    catalogue: Arc<Catalogue>,
    budget: DefaultDirectRateLimiter,
    metrics: Arc<Metrics>,
}

impl JournalSightings {
    /// Sightings into `journal`, with the mode `catalogue` gives each host, at most
    /// `per_second` a second (ten times that at once); the rest are counted in `metrics`.
    pub fn new(
        journal: Journal,
        catalogue: Arc<Catalogue>,
        per_second: NonZeroU32,
        metrics: Arc<Metrics>,
    ) -> Self {
        let burst = per_second.saturating_mul(NonZeroU32::new(10).unwrap_or(NonZeroU32::MIN));
        Self {
            journal,
            catalogue,
            budget: RateLimiter::direct(Quota::per_second(per_second).allow_burst(burst)),
            metrics,
        }
    }
}

impl QueryObserver for JournalSightings {
    fn first_seen(&self, sighting: &Sighting) {
        if self.budget.check().is_err() {
            self.metrics.sighting_not_journaled();
            return;
        }
        let decision = self.catalogue.decide_host(&sighting.name, SIGHTING_PORT);
        self.journal.record(Entry::DnsSighting(DnsSighting {
            via: "dns",
            client: sighting.client,
            host: sighting.name.clone(),
            qtype: sighting.record_type.to_string(),
            answer: format!("{:?}", sighting.answer).to_ascii_lowercase(),
            mode: decision.mode.as_str(),
            rule: self.catalogue.rule_label(decision.rule).to_owned(),
        }));
    }
}

/// af-dns's error as the product's coded refusal.
pub fn refusal(error: DnsError) -> Report {
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
