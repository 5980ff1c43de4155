//! `direct`: the load generator talks to the upstream itself. The limit.

use super::{Env, Running, Support, System};
use crate::error::Result;
use crate::scenarios::Scenario;

/// No intermediary.
pub(super) struct Direct;

impl System for Direct {
    fn name(&self) -> &str {
        "direct"
    }

    fn support(&self, scenario: Scenario) -> Support {
        match scenario {
            Scenario::Dns | Scenario::IdleMemory => Support::No,
            _ => Support::Yes,
        }
    }

    fn missing(&self) -> Option<String> {
        None
    }

    fn start(&self, _env: &Env) -> Result<Running> {
        Ok(Running::direct())
    }
}
