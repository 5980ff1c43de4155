//! The contract between af's control plane and its sidecar, as types.
//!
//! The orchestrator (any runtime) writes a [`config::SidecarConfig`] and reads the sidecar's
//! journal through its admin API ([`admin`], records in [`journal`]); the sidecar reads the
//! same document and writes the same records. Every default is written once, here, and
//! `docs/sidecar.schema.json` is generated from these types ([`config::json_schema`]).
//!
//! Pure data: serde and schemars, no I/O, nothing async.

pub mod admin;
pub mod config;
pub mod containment;
pub mod journal;

pub use af_policy::egress::{EgressSpec, Mode, RuleSpec};
