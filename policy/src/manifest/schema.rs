//! The JSON Schema of `af.yaml`, derived from the typed model. `docs/af.schema.json` is this,
//! and a test keeps the two in step.

use std::sync::LazyLock;

use super::model::Manifest;

/// The JSON Schema (draft 2020-12) of `af.yaml`.
pub fn json_schema() -> serde_json::Value {
    schemars::schema_for!(Manifest).to_value()
}

/// The schema, generated once: the shape check reads it for every manifest.
pub(crate) static SCHEMA: LazyLock<serde_json::Value> = LazyLock::new(json_schema);
