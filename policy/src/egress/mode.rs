//! The six verdicts a request can get.

use std::fmt;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// What the sidecar does with a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    /// Forward for real.
    Allow,
    /// Refuse with 403 (or close, for a tunnel).
    Block,
    /// Answer from fixtures.
    Mock,
    /// Record the request and answer as the provider would.
    Capture,
    /// Answer with a generated, deterministic response.
    Synth,
    /// Forward for real with the provider's test credential swapped in.
    Sandbox,
}

impl Mode {
    /// Every mode, in documentation order.
    pub const ALL: [Mode; 6] = [
        Mode::Allow,
        Mode::Block,
        Mode::Mock,
        Mode::Capture,
        Mode::Synth,
        Mode::Sandbox,
    ];

    /// The name used in `af.yaml`, the journal and metrics.
    pub const fn as_str(self) -> &'static str {
        match self {
            Mode::Allow => "allow",
            Mode::Block => "block",
            Mode::Mock => "mock",
            Mode::Capture => "capture",
            Mode::Synth => "synth",
            Mode::Sandbox => "sandbox",
        }
    }

    /// Whether the sidecar must terminate TLS to serve this mode (it answers or rewrites
    /// requests itself rather than tunnelling them).
    pub const fn needs_interception(self) -> bool {
        matches!(
            self,
            Mode::Mock | Mode::Capture | Mode::Synth | Mode::Sandbox
        )
    }

    /// Whether traffic in this mode leaves the environment.
    pub const fn forwards(self) -> bool {
        matches!(self, Mode::Allow | Mode::Sandbox)
    }
}

impl fmt::Display for Mode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}
