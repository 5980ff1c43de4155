//! What the answering modes (mock, capture, synth, sandbox) work from.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The modes' inputs and body budgets.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct ModesConfig {
    /// Largest request body mock and synth read, default 1 MiB.
    pub mock_body_bytes: usize,
    /// Largest request body capture reads, default 128 KiB.
    pub capture_body_bytes: usize,
    /// Request bodies the answering modes hold at once across every connection and HTTP/2
    /// stream, default 64 MiB; a request waits for room rather than growing memory.
    pub buffered_body_bytes: usize,
    /// The repository's fixture packs, by the path a rule's `fixtures` names.
    pub packs: BTreeMap<String, serde_json::Value>,
    /// The repository's OpenAPI descriptions, by the path a rule's `openapi` names.
    pub openapi: BTreeMap<String, serde_json::Value>,
    /// Test credentials sandbox mode swaps in, by the name a rule's `credential` gives.
    pub credentials: BTreeMap<String, String>,
    /// The model endpoint synth may ask; without it synth answers offline only.
    pub model: Option<ModelConfig>,
}

impl Default for ModesConfig {
    fn default() -> Self {
        Self {
            mock_body_bytes: 1024 * 1024,
            capture_body_bytes: 128 * 1024,
            buffered_body_bytes: 64 * 1024 * 1024,
            packs: BTreeMap::new(),
            openapi: BTreeMap::new(),
            credentials: BTreeMap::new(),
            model: None,
        }
    }
}

/// An OpenAI-compatible chat-completions endpoint synth asks for answers.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ModelConfig {
    /// The API's base URL (`https://api.openai.com/v1`); synth posts to
    /// `{base_url}/chat/completions`.
    pub base_url: String,
    /// Sent as `Authorization: Bearer`; never logged, journaled or answered.
    pub api_key: ApiKey,
    /// The model name sent with every request.
    pub model: String,
    /// Time for the whole call (dial, request, reply), default 10 s; then synth answers offline.
    #[serde(default = "ModelConfig::default_timeout_ms")]
    pub timeout_ms: u64,
    /// Model answers kept (one per distinct request), default 1024; the least recently used
    /// is evicted.
    #[serde(default = "ModelConfig::default_cache_entries")]
    pub cache_entries: usize,
}

impl ModelConfig {
    /// The endpoint `base_url` for `model`, with every default.
    pub fn new(base_url: String, api_key: ApiKey, model: String) -> Self {
        Self {
            base_url,
            api_key,
            model,
            timeout_ms: Self::default_timeout_ms(),
            cache_entries: Self::default_cache_entries(),
        }
    }

    fn default_timeout_ms() -> u64 {
        10_000
    }
    fn default_cache_entries() -> usize {
        1024
    }
}

/// A secret key: carried in the file, never printed by `Debug`.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(transparent)]
pub struct ApiKey(String);

impl ApiKey {
    /// The key `secret`.
    pub fn new(secret: String) -> Self {
        ApiKey(secret)
    }

    /// The key itself, for the one place that sends it.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for ApiKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ApiKey(<redacted>)")
    }
}
