//! af-proxy: the egress sidecar. Every request leaving an environment arrives on one of its
//! listeners, is decided by the egress catalogue, answered or forwarded, and journaled.
//!
//! The data path reads top to bottom: [`listener`] → [`decide`] → [`answer`] or [`forward`]
//! (every dial through [`guard`]) → [`journal`]. [`admin`] serves the journal and [`metrics`];
//! [`sidecar`] wires it together from [`config`]; [`drain`] stops it.

pub mod admin;
pub mod answer;
pub mod config;
pub mod decide;
pub mod dns;
pub mod drain;
pub mod forward;
pub mod guard;
pub mod intercept;
pub mod journal;
pub mod limits;
pub mod listener;
pub mod local;
pub mod loops;
pub mod message;
pub mod metrics;
pub mod mime;
pub mod modes;
pub mod rate;
pub mod respond;
pub mod sidecar;
pub mod smtp;
pub mod state;
pub mod tripwire;
