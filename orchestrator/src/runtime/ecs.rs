//! The ECS runtime, which refuses every time with its report: the network it is made for is
//! read here from `AF_ECS_*`, and the report itself is the pure computation in
//! `af_policy::placement::ecs`.

use af_policy::error::Report;
use af_policy::manifest::Manifest;
use af_policy::placement::ecs::network::{Network, NetworkVars};
use af_policy::placement::ecs::{self, EcsReport};

/// The network the `AF_ECS_*` variables describe (placeholders when none is set), or
/// AF-SCH-011.
pub fn network_from_env() -> Result<Network, Report> {
    Network::describe(&NetworkVars::read(|name| std::env::var(name).ok()))
}

/// The report for `manifest` on the network the environment describes.
pub fn report(manifest: &Manifest) -> Result<EcsReport, Report> {
    Ok(ecs::report(
        &manifest.name,
        &manifest.egress,
        &network_from_env()?,
    ))
}
