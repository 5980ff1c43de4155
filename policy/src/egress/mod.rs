//! The egress catalogue: what a service may send to the outside world, and how each request
//! is decided.
//!
//! [`EgressSpec`] is the catalogue as written in `af.yaml`; [`Catalogue`] is its compiled,
//! indexed form that answers [`Catalogue::decide`] without allocating.

mod mode;
mod spec;

pub use mode::Mode;
pub use spec::{EgressSpec, RuleSpec};
