//! The af control plane: environments, their runtimes and the lifecycle commands.
//!
//! A command reads the manifest, turns it into an [`plan::EnvPlan`] and hands it to a
//! [`runtime::Runtime`]. The runtime is the only thing that knows how an environment is made;
//! everything it promises is checked by one conformance suite (`tests/conformance`).

pub mod admin;
pub mod bounded;
pub mod compose;
pub mod containment;
pub mod env_id;
pub mod har;
pub mod lifecycle;
pub mod listing;
pub mod modes;
pub mod plan;
pub mod runtime;
pub mod secret;
pub mod suggest;
pub mod trust;
pub mod ui;
pub mod webhook;
