//! af-proxy: the egress sidecar. Every request leaving an environment arrives on one of its
//! listeners, is decided by the egress catalogue, answered or forwarded, and journaled.
//!
//! The data path reads top to bottom: [`arrive`] → [`decide`] → [`answer`] or [`leave`]
//! (every dial through [`leave::guard`]) → [`record`]. [`admin`] serves the journal and
//! [`metrics`]; [`sidecar`] wires it together from [`config`]; [`drain`] stops it.

pub mod admin;
pub mod answer;
pub mod arrive;
pub mod config;
pub mod decide;
pub mod dns;
pub mod drain;
pub mod leave;
pub mod limits;
pub mod metrics;
pub mod record;
pub mod sidecar;
pub mod state;
