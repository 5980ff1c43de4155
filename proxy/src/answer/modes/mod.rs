//! The modes beyond allow and block. Mock (fixture packs), capture (provider-shaped answers,
//! recorded as inbox messages) and synth (generated answers) answer locally: each takes a
//! buffered [`Exchange`] and makes an [`Answer`]. Sandbox forwards with a test credential
//! swapped in ([`sandbox`]). Synth may ask a model to replace its answer ([`model_question`] makes the
//! question and checks the reply; [`model_client`] sends it). Only `model_client` does I/O.

mod builtin;
pub(crate) mod capture;
pub(crate) mod mock;
pub(crate) mod model_client;
pub(crate) mod model_question;
pub(crate) mod pack;
pub(crate) mod packs;
pub(crate) mod sandbox;
pub(crate) mod schema_value;
pub(crate) mod synth;

use std::collections::BTreeMap;
use std::sync::Arc;

use bytes::Bytes;
use http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use tokio::sync::Semaphore;

/// What the answering modes work from, compiled from the configuration at start.
#[derive(Debug, Clone)]
pub(crate) struct ModeSettings {
    /// Largest request body mock and synth read.
    pub mock_body_bytes: usize,
    /// Largest request body capture reads.
    pub capture_body_bytes: usize,
    /// Room for request bodies held at once, in KiB permits (`modes.buffered_body_bytes`).
    pub buffered: Arc<Semaphore>,
    /// Test credentials for sandbox mode, by name.
    pub credentials: BTreeMap<String, String>,
    /// The built-in fixture packs and the repository's.
    pub packs: packs::Packs,
    /// The repository's OpenAPI descriptions.
    pub openapi: synth::OpenApiDocs,
    /// The model endpoint synth asks, with its client and answer cache, when one is configured.
    pub model: Option<Arc<crate::answer::modes::model_client::SynthModel>>,
}

/// A client request, buffered, as the answering modes see it.
#[derive(Debug, Clone, Copy)]
pub struct Exchange<'a> {
    /// The method.
    pub method: &'a Method,
    /// The decided host (lower-case, no trailing dot).
    pub host: &'a str,
    /// The path, without the query.
    pub path: &'a str,
    /// The query string, without `?`.
    pub query: Option<&'a str>,
    /// The request headers.
    pub headers: &'a HeaderMap,
    /// The whole body (within the mode's cap).
    pub body: &'a [u8],
}

impl Exchange<'_> {
    /// The `Content-Type` media type, lower-cased, without parameters.
    pub fn media_type(&self) -> Option<String> {
        let v = self.headers.get(header::CONTENT_TYPE)?.to_str().ok()?;
        Some(v.split(';').next()?.trim().to_ascii_lowercase())
    }
}

/// An answer the sidecar makes itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Answer {
    /// The status.
    pub status: StatusCode,
    /// Headers (the sidecar adds its `X-Af-*` headers when it sends the answer).
    pub headers: HeaderMap,
    /// The body.
    pub body: Bytes,
}

impl Answer {
    /// An answer with `content_type` and `body`.
    pub fn new(status: StatusCode, content_type: &'static str, body: impl Into<Bytes>) -> Self {
        let mut headers = HeaderMap::new();
        headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
        Self {
            status,
            headers,
            body: body.into(),
        }
    }

    /// A JSON answer.
    pub fn json(status: StatusCode, value: &serde_json::Value) -> Self {
        Self::new(status, "application/json", value.to_string())
    }
}
