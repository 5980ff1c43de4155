//! af-proxy: the egress sidecar. Every request leaving an environment arrives on one of its
//! listeners, is decided by the egress catalogue, answered or forwarded, and journaled.
//!
//! The data path reads top to bottom: `arrive` → `decide` → `answer` or `leave` (every dial
//! through `leave::guard`) → `record`. `admin` serves the journal and `metrics`; [`sidecar`]
//! wires it together from [`config`]; `drain` stops it.
//!
//! The library exports what the `af-proxy` binary and its tests need ([`config`], [`sidecar`])
//! and the parsers the fuzz targets drive ([`fuzzing`]); the rest is the crate's own.

pub(crate) mod admin;
#[cfg(feature = "alloc-count")]
pub(crate) mod alloc_count;
pub(crate) mod answer;
pub(crate) mod arrive;
pub mod config;
pub(crate) mod decide;
pub(crate) mod dns;
pub(crate) mod drain;
pub(crate) mod leave;
pub(crate) mod limits;
pub(crate) mod metrics;
pub(crate) mod record;
pub mod sidecar;
pub(crate) mod state;

pub use admin::MAX_CONNECTIONS;
pub use drain::Drained;
pub use metrics::Metrics;
pub use record::journal::Journal;

/// The parsers the fuzz targets (`fuzz/fuzz_targets`) drive, exported for them alone.
pub mod fuzzing {
    pub use crate::answer::modes::capture::routes as capture_routes;
    pub use crate::answer::modes::capture::{Captured, Provider, capture};
    pub use crate::answer::modes::pack::{Pack, PathTemplate};
    pub use crate::answer::modes::synth::OpenApi;
    pub use crate::answer::modes::{Answer, Exchange};
    pub use crate::arrive::listener::transparent_tls::{Hello, read_client_hello};
    pub use crate::record::message::{MAX_BODY_BYTES, Message};
    pub use crate::record::mime::{AddressField, Mail, address_list};

    /// Synth mode: the answer made offline from an OpenAPI document.
    pub mod synth {
        pub use crate::answer::modes::synth::{HEADER, answer};
    }

    /// The SMTP listener's protocol and what a received mail becomes.
    pub mod smtp {
        pub use crate::arrive::smtp::mail::{Envelope, message};
        pub use crate::arrive::smtp::session::{MAX_RECIPIENTS, Session, Settings, Then};
    }
}
