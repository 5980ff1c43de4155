//! The environment's authoritative DNS server, embedded in the egress sidecar.
//!
//! Every outside name resolves to the sidecar itself, so every connection a service makes goes
//! through it. Only `A` (and `AAAA` when IPv6 is allowed) get an address; every other type is an
//! empty `NOERROR` and is never forwarded, which closes DNS tunnelling. `localhost` is answered
//! locally. Inside names (service names, single labels, the runtime's zones) are asked of the
//! runtime's resolver and kept only if every address lies in the environment's networks.
//! The first sighting of each (name, type) goes to a [`QueryObserver`] off the query path.
//!
//! ```no_run
//! # async fn run() -> Result<(), af_dns::DnsError> {
//! use std::sync::Arc;
//! let config = af_dns::DnsConfig::new(
//!     "172.18.0.2".parse().expect("address"),
//!     vec!["172.18.0.0/16".parse().expect("subnet")],
//!     "127.0.0.11:53".parse().expect("address"),
//! );
//! let server = af_dns::DnsServer::bind(config, Arc::new(af_dns::IgnoreSightings)).await?;
//! server.serve_until(std::future::pending()).await
//! # }
//! ```

mod classify;
mod config;
mod error;
mod forward;
#[cfg(any(test, feature = "fuzzing"))]
#[doc(hidden)]
pub mod fuzzing;
mod handler;
mod metrics;
mod query;
mod server;
mod sightings;
mod tcp;
mod udp;

pub use config::{Checked, DnsConfig};
pub use error::DnsError;
pub use metrics::{Metrics, MetricsSnapshot};
pub use server::DnsServer;
pub use sightings::{AnswerKind, IgnoreSightings, QueryObserver, Sighting};
pub use tcp::{TcpAdmission, TcpLimit, TcpPlace};

/// The DNS record type of a [`Sighting`] (re-exported from hickory-proto).
pub use hickory_proto::rr::RecordType;

/// The hasher of the sets looked up on every query: foldhash, several times cheaper than the
/// standard SipHash. Their keys are fixed at start (inside names and hosts) or already a keyed
/// hash (the sightings' seen set), so a client choosing names cannot crowd them.
type FastHash = foldhash::fast::RandomState;
