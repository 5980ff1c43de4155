//! Why a payload was refused: one sentence naming the provider and what was wrong.

use super::Provider;

/// A payload the provider's API would not accept.
#[derive(Debug, thiserror::Error)]
pub enum CaptureError {
    /// The body is not JSON of the shape the API takes.
    #[error("the {provider} payload is not what its API accepts: {source}")]
    Json {
        /// Whose API.
        provider: Provider,
        /// What the JSON parser said.
        source: serde_json::Error,
    },
    /// The body is not a URL-encoded form.
    #[error("the {provider} payload is not a valid form: {source}")]
    Form {
        /// Whose API.
        provider: Provider,
        /// What the form parser said.
        source: serde_urlencoded::de::Error,
    },
    /// The body is not multipart/form-data with the boundary its Content-Type names.
    #[error("the {provider} payload is not multipart/form-data with a boundary")]
    Multipart {
        /// Whose API.
        provider: Provider,
    },
    /// A field the API requires is missing or empty.
    #[error("the {provider} payload has no {field}")]
    Missing {
        /// Whose API.
        provider: Provider,
        /// The field, as the API documents it.
        field: &'static str,
    },
    /// A field that must hold base64 does not.
    #[error("the {provider} payload's {field} is not base64: {source}")]
    Base64 {
        /// Whose API.
        provider: Provider,
        /// The field.
        field: &'static str,
        /// What the decoder said.
        source: base64::DecodeError,
    },
    /// A field that must hold a MIME message does not.
    #[error("the {provider} payload's {field} is not a MIME message")]
    Mime {
        /// Whose API.
        provider: Provider,
        /// The field.
        field: &'static str,
    },
}
