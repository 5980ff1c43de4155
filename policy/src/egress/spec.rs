//! The egress catalogue as written in `af.yaml`.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::Mode;

/// The `egress:` section of a manifest.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct EgressSpec {
    /// The verdict for a request no rule matches. Missing means `block`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default: Option<Mode>,
    /// Whether services may reach IPv6 addresses at all.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub allow_ipv6: bool,
    /// The rules. Order does not decide; specificity does (ties go to the first written).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rules: Vec<RuleSpec>,
    /// PEM files of certificate authorities the sidecar trusts, besides the public web roots,
    /// when it opens TLS to an upstream itself (an allow rule with paths or methods, sandbox):
    /// paths relative to the manifest, e.g. `certs/internal-ca.pem`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub upstream_roots: Vec<String>,
}

impl EgressSpec {
    /// The verdict for a request no rule matches.
    pub fn default_mode(&self) -> Mode {
        self.default.unwrap_or(Mode::Block)
    }
}

/// One rule of the catalogue.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RuleSpec {
    /// Host pattern: `api.example.com`, `*`, `*.example.com` (one or more labels, never the
    /// apex), `api.*.example.com` (exactly one label), an IP literal, each optionally `:port`.
    pub host: String,
    /// The verdict for requests this rule decides.
    pub mode: Mode,
    /// Path prefixes, matched on segment boundaries (`/admin` does not match `/administrator`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub paths: Vec<String>,
    /// HTTP methods this rule is limited to (case-insensitive).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub methods: Vec<String>,
    /// Token-bucket rate limit for allow/sandbox: `10/s`, `600/m`, `5000/h`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate_limit: Option<String>,
    /// Name of the test credential sandbox mode swaps in.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub credential: Option<String>,
    /// The repository's own fixture pack for mock mode (a path relative to the manifest).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fixtures: Option<String>,
    /// OpenAPI description synth mode generates answers from (a path relative to the manifest).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub openapi: Option<String>,
    /// Where `af webhook trigger` posts this provider's events in the service.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub webhook_path: Option<String>,
    /// Free text shown by `af net policy` and `af net explain`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

impl RuleSpec {
    /// A rule deciding every request to `host` with `mode`, with no other limits.
    pub fn new(host: impl Into<String>, mode: Mode) -> Self {
        RuleSpec {
            host: host.into(),
            mode,
            paths: Vec::new(),
            methods: Vec::new(),
            rate_limit: None,
            credential: None,
            fixtures: None,
            openapi: None,
            webhook_path: None,
            note: None,
        }
    }
}
