//! The egress catalogue: what a service may send to the outside world, and how each request
//! is decided.
//!
//! [`EgressSpec`] is the catalogue as written in `af.yaml`; [`Catalogue`] is its compiled,
//! indexed form that answers [`Catalogue::decide`] without allocating.
//!
//! Specificity decides, not order: the host first (exact name or IP, then wildcards by how many
//! labels they spell out, then `*`), then a port, then the longest matching path, then methods.
//! Ties go to the rule written first. A rule that names no port covers 80 and 443, or every
//! port when it blocks ([`Ports`]).

pub mod address;
mod catalogue;
mod explain;
mod host;
mod mode;
mod pattern;
mod ports;
mod rate;
mod spec;

pub use catalogue::{Catalogue, Decision, Miss, Reason, RuleId, RuleProblem, Specificity, Target};
pub use explain::{Explanation, MatchedRule, MissedRule, UrlError};
pub use host::{HostError, MAX_HOST_LEN, normalize_host};
pub use mode::Mode;
pub use ports::{Ports, WEB_PORTS};
pub use rate::{RateLimit, RateLimitError};
pub use spec::{EgressSpec, RuleSpec};

pub(crate) use pattern::{HostPattern, parse_host_port};
