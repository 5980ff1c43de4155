//! The pure policy core of af.
//!
//! Everything else in the product decides through this crate: the manifest model and its
//! validation ([`manifest`]), the egress catalogue and its verdicts ([`egress`]), where an
//! environment is placed ([`placement`]) and the product's error catalogue ([`error`]).
//! It performs no I/O beyond reading the manifest file it is pointed at, and nothing here is async.

pub mod egress;
pub mod error;
pub mod manifest;
pub mod placement;
