//! `af ui`: one local page showing what the environment sent (decisions, live), what it
//! captured (the inbox) and how it is set up (overview), served on 127.0.0.1 and read through
//! the sidecar's admin API on the server side: the page never holds the admin token, and every
//! request must name the run's secret path and this listener's own `Host`.

mod api;
mod assets;
mod clients;
mod server;
mod snippet;

use std::sync::Arc;

use af_policy::egress::Catalogue;

pub use server::Ui;

use crate::env_id::EnvId;
use crate::runtime::{AdminEndpoint, Runtime};

/// What the page reads: the sidecar's admin API and, when known, the manifest's catalogue
/// (for explanations and the overview) and the runtime (for the environment's state).
pub struct Source {
    /// The sidecar's admin API (a port-forward on a cluster, held while the page is served).
    pub admin: AdminEndpoint,
    /// The manifest's egress catalogue, when a manifest was found.
    pub catalogue: Option<Catalogue>,
    /// The runtime and the environment, when the page runs for one.
    pub environment: Option<Environment>,
}

/// An environment on its runtime, for the overview and the services' names.
#[derive(Clone)]
pub struct Environment {
    /// The runtime it runs on.
    pub runtime: Arc<dyn Runtime>,
    /// Its id.
    pub env: EnvId,
}
