//! What a containment watcher reports (`POST /v1/report` on the report listener, with the
//! containment token) and what the admin API answers about them (`GET /v1/containment`).
//! [`crate::config::Containment`] says how they are wired.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The most breaches one report may carry.
pub const MAX_BREACHES: usize = 64;
/// The longest pod name, route id or description a report may carry, in bytes.
pub const MAX_TEXT: usize = 512;

/// One watcher's check: empty `breaches` means every layer was in force and every way out held.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WatchReport {
    /// The pod the watcher runs in (its service's pod).
    pub pod: String,
    /// What got through.
    #[serde(default)]
    pub breaches: Vec<Breach>,
}

/// One way out, or one layer's witness, that a watcher reached.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Breach {
    /// The route's id: `policy-layer` or `pod-layer` for a witness, else the probe's route id
    /// (`tcp`, `dns`, `metadata`, `api-server`, `node-port`, ...).
    pub route: String,
    /// What it is, for a person, with where it was aimed.
    pub what: String,
}

impl Breach {
    /// The route id of the policy witness: the NetworkPolicy layer is not in force.
    pub const POLICY_LAYER: &str = "policy-layer";
    /// The route id of the fence witness: the pod's own fence is not in force.
    pub const POD_LAYER: &str = "pod-layer";
}

impl WatchReport {
    /// Why the report cannot be kept, if it cannot: every text within [`MAX_TEXT`], at most
    /// [`MAX_BREACHES`], a pod named.
    pub fn invalid(&self) -> Option<String> {
        if self.pod.is_empty() || self.pod.len() > MAX_TEXT {
            return Some(format!("pod must be 1 to {MAX_TEXT} bytes"));
        }
        if self.breaches.len() > MAX_BREACHES {
            return Some(format!("at most {MAX_BREACHES} breaches"));
        }
        self.breaches
            .iter()
            .any(|b| b.route.is_empty() || b.route.len() > MAX_TEXT || b.what.len() > MAX_TEXT)
            .then(|| {
                format!(
                    "a breach's route must be 1 to {MAX_TEXT} bytes, its what at most {MAX_TEXT}"
                )
            })
    }
}

/// `GET /v1/containment`: every watcher heard from, newest report each.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ContainmentPage {
    /// Seconds between a watcher's checks.
    pub period_secs: u32,
    /// A watcher last heard from longer ago than this is stale: its proof no longer counts.
    pub stale_after_secs: u64,
    /// The watchers, by pod name.
    pub watchers: Vec<WatcherState>,
}

/// One watcher, as the sidecar last heard it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct WatcherState {
    /// Its pod.
    pub pod: String,
    /// When its last report came, RFC 3339 UTC.
    pub checked_at: String,
    /// Seconds since then, by the sidecar's clock.
    pub checked_secs_ago: u64,
    /// Reports received from it.
    pub reports: u64,
    /// When containment was first found lost and has stayed lost since, RFC 3339 UTC.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lost_at: Option<String>,
    /// What got through, in its last report; empty: held.
    #[serde(default)]
    pub breaches: Vec<Breach>,
}

impl WatcherState {
    /// Whether its last report says containment held.
    pub fn held(&self) -> bool {
        self.breaches.is_empty()
    }
}
