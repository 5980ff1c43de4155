//! Containment proven while the environment runs: a watcher beside every service retries the
//! ways out each period, under exactly that service's rules, and posts what it found to the
//! sidecar's report listener; the sidecar keeps each watcher's latest report for the admin API
//! (`GET /v1/containment`) and journals every change. Two witness listeners tell the layers
//! apart: the policy witness is refused by the cluster's NetworkPolicy alone (the pod's own
//! fence lets it through), the fence witness by the pod's own fence alone. A watcher that
//! reaches either has lost that layer.

use std::net::{Ipv4Addr, SocketAddr};
use std::num::NonZeroU32;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The containment section; absent: no watcher reports and no witnesses (the local runtime).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Containment {
    /// Where watchers post their reports (`POST /v1/report`), default `0.0.0.0:9902`.
    #[serde(default = "Containment::default_report")]
    pub report: SocketAddr,
    /// The bearer token a report must carry, at least 16 characters: only the watchers hold it,
    /// so a service cannot report for them.
    pub token: String,
    /// The witness only the NetworkPolicy layer refuses a service, default `0.0.0.0:9903`.
    #[serde(default = "Containment::default_policy_witness")]
    pub policy_witness: SocketAddr,
    /// The witness only the pod's own fence refuses a service, default `0.0.0.0:9904`.
    #[serde(default = "Containment::default_fence_witness")]
    pub fence_witness: SocketAddr,
    /// Seconds between a watcher's checks, default 10. A watcher silent for three periods
    /// is no longer proof.
    #[serde(default = "Containment::default_period")]
    pub period_secs: NonZeroU32,
    /// Watchers remembered, default 1024; past it the one heard from longest ago is forgotten.
    #[serde(default = "Containment::default_max_watchers")]
    pub max_watchers: usize,
}

impl Containment {
    /// The report listener's port.
    pub const REPORT_PORT: u16 = 9902;
    /// The policy witness's port.
    pub const POLICY_WITNESS_PORT: u16 = 9903;
    /// The fence witness's port.
    pub const FENCE_WITNESS_PORT: u16 = 9904;
    /// Periods a watcher may be silent before its proof is stale.
    pub const STALE_PERIODS: u32 = 3;

    /// Every default, with `token`.
    pub fn new(token: String) -> Self {
        Self {
            report: Self::default_report(),
            token,
            policy_witness: Self::default_policy_witness(),
            fence_witness: Self::default_fence_witness(),
            period_secs: Self::default_period(),
            max_watchers: Self::default_max_watchers(),
        }
    }

    fn default_report() -> SocketAddr {
        SocketAddr::from((Ipv4Addr::UNSPECIFIED, Self::REPORT_PORT))
    }

    fn default_policy_witness() -> SocketAddr {
        SocketAddr::from((Ipv4Addr::UNSPECIFIED, Self::POLICY_WITNESS_PORT))
    }

    fn default_fence_witness() -> SocketAddr {
        SocketAddr::from((Ipv4Addr::UNSPECIFIED, Self::FENCE_WITNESS_PORT))
    }

    fn default_period() -> NonZeroU32 {
        NonZeroU32::new(10).unwrap_or(NonZeroU32::MIN)
    }

    fn default_max_watchers() -> usize {
        1024
    }
}
