//! Asking synth's model endpoint ([`crate::answer::modes::model_question`] makes the question and checks the
//! reply): one pooled client whose every dial goes through the address guard, the whole call
//! under a timeout, and a bounded cache of the answers used, so the same request keeps getting
//! the same answer. The key is sent only in `Authorization` (marked sensitive) and never logged.
//! Every call leaves the environment, so every call is journaled ([`CallJournal`]).

use std::borrow::Cow;
use std::num::NonZeroUsize;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use af_policy::error::{Report, codes};
use bytes::Bytes;
use http::header::{ACCEPT, AUTHORIZATION, CONTENT_TYPE};
use http::{HeaderValue, Method, Request, StatusCode, Uri};
use http_body_util::{BodyExt, Full, Limited};
use hyper_rustls::{HttpsConnector, HttpsConnectorBuilder};
use hyper_util::client::legacy::Client;
use hyper_util::rt::{TokioExecutor, TokioTimer};
use lru::LruCache;
use rustls::ClientConfig;

use crate::answer::modes::model_question::{Question, Unusable};
use crate::answer::modes::schema_value;
use crate::answer::modes::synth::OpenApi;
use crate::answer::modes::{Answer, Exchange};
use crate::config::ModelConfig;
use crate::decide::tripwire;
use crate::leave::forward::connector::GuardedConnector;
use crate::leave::guard::Guard;
use crate::record::journal::{DecisionRecord, Entry, Journal, Outcome};

/// Largest reply read from the model.
const REPLY_BYTES: usize = 1024 * 1024;

/// The model endpoint synth asks, with its client and its answers so far.
pub(crate) struct SynthModel {
    endpoint: Uri,
    authorization: HeaderValue,
    model: String,
    timeout: Duration,
    client: Client<HttpsConnector<GuardedConnector>, Full<Bytes>>,
    /// Model answers by request digest.
    answers: Mutex<LruCache<[u8; 32], Answer>>,
}

/// Where a model call is journaled: a call leaves the environment, so it gets a decision
/// record of its own, made on behalf of the synth request (`on_behalf`: its listener, client,
/// mode and rule).
pub(crate) struct CallJournal {
    /// The journal.
    pub journal: Journal,
    /// The synth request's side of the record.
    pub on_behalf: DecisionRecord,
}

/// One call to the model, journaled when it is dropped: when it ends, and also when the synth
/// request is cancelled mid-call (the question may already have left).
struct ModelCall {
    to: CallJournal,
    endpoint: Uri,
    started: Instant,
    /// Bytes of the question; not counted when the endpoint was never reached.
    question_bytes: u64,
    reached: bool,
    bytes_down: u64,
    status: Option<u16>,
    outcome: Option<Result<(), String>>,
}

/// Longest error text a call record keeps.
const ERROR_CHARS: usize = 300;

impl Drop for ModelCall {
    fn drop(&mut self) {
        let https = self.endpoint.scheme_str() == Some("https");
        let error = match self.outcome.take() {
            Some(Ok(())) => None,
            Some(Err(why)) => Some(why),
            None => Some("the synth request was cancelled before the model answered".to_owned()),
        };
        let error = error.map(|e| tripwire::redact(&e).chars().take(ERROR_CHARS).collect());
        let record = DecisionRecord {
            method: Cow::Borrowed("POST"),
            host: self.endpoint.host().unwrap_or_default().to_owned(),
            port: self
                .endpoint
                .port_u16()
                .unwrap_or(if https { 443 } else { 80 }),
            path: self.endpoint.path().to_owned(),
            tls: https,
            reason: Cow::Borrowed("synth_model"),
            allowed: self.reached,
            outcome: Some(if error.is_some() {
                Outcome::Failed
            } else {
                Outcome::Forwarded
            }),
            status: self.status,
            bytes_up: if self.reached { self.question_bytes } else { 0 },
            bytes_down: self.bytes_down,
            duration_ms: self.started.elapsed().as_millis() as u64,
            code: error.as_ref().map(|_| codes::NET_UPSTREAM.code.into()),
            error,
            ..std::mem::take(&mut self.to.on_behalf)
        };
        self.to.journal.record(Entry::Decision(record));
    }
}

/// Why one call to the model gave nothing usable.
#[derive(Debug, thiserror::Error)]
enum CallError {
    #[error("no reply within {0:?}")]
    Timeout(Duration),
    #[error("the request failed: {0}")]
    Request(String),
    #[error("the endpoint answered {0}")]
    Status(StatusCode),
    #[error("the reply could not be read: {0}")]
    Body(String),
    #[error(transparent)]
    Unusable(#[from] Unusable),
}

impl SynthModel {
    /// The client for a checked `config`, dialling through `guard`; `https://` endpoints are
    /// verified as every upstream is (`tls`).
    pub(crate) fn new(
        config: &ModelConfig,
        guard: Arc<Guard>,
        tls: ClientConfig,
    ) -> Result<SynthModel, Report> {
        let refuse =
            |what: String| Report::new(&codes::NET_CONFIG, format!("modes.model: {what}."));
        let endpoint = crate::config::model_endpoint(config)?;
        let authorization = crate::config::model_authorization(&config.api_key)
            .ok_or_else(|| refuse("api_key is not a usable header value".to_owned()))?;
        let cache = NonZeroUsize::new(config.cache_entries)
            .ok_or_else(|| refuse("cache_entries must be greater than 0".to_owned()))?;
        let connector = HttpsConnectorBuilder::new()
            .with_tls_config(tls)
            .https_or_http()
            .enable_http1()
            .wrap_connector(GuardedConnector::new(guard));
        let client = Client::builder(TokioExecutor::new())
            .timer(TokioTimer::new())
            .pool_timer(TokioTimer::new())
            .build(connector);
        Ok(SynthModel {
            endpoint,
            authorization,
            model: config.model.clone(),
            timeout: Duration::from_millis(config.timeout_ms),
            client,
            answers: Mutex::new(LruCache::new(cache)),
        })
    }

    /// The answer to `ex`: the model's, when it gives (or gave) a usable one, else `offline`.
    /// A call made (not when the cache answers) is journaled through `to`.
    pub(crate) async fn answer(
        &self,
        doc: Option<&OpenApi>,
        ex: &Exchange<'_>,
        offline: Answer,
        to: CallJournal,
    ) -> Answer {
        let digest = schema_value::request_digest(ex);
        if let Some(kept) = self.cache().get(&digest) {
            return kept.clone();
        }
        let Some(question) = Question::new(&self.model, &digest, doc, ex, &offline) else {
            return offline;
        };
        let body = Bytes::from(question.request.to_string());
        let mut call = ModelCall {
            to,
            endpoint: self.endpoint.clone(),
            started: Instant::now(),
            question_bytes: body.len() as u64,
            // Until a dial is known to have failed, the question may have left.
            reached: true,
            bytes_down: 0,
            status: None,
            outcome: None,
        };
        let asked = tokio::time::timeout(self.timeout, self.ask(&question, body, &mut call))
            .await
            .unwrap_or(Err(CallError::Timeout(self.timeout)));
        match asked {
            Ok(answer) => {
                call.outcome = Some(Ok(()));
                self.cache().put(digest, answer.clone());
                answer
            }
            Err(e) => {
                tracing::warn!(
                    endpoint = %self.endpoint,
                    host = ex.host,
                    path = ex.path,
                    error = %e,
                    "synth: the model's answer is not used; answering offline"
                );
                call.outcome = Some(Err(format!("the model's answer was not used: {e}")));
                offline
            }
        }
    }

    /// Post the question and make the answer from the reply.
    async fn ask(
        &self,
        question: &Question<'_>,
        body: Bytes,
        call: &mut ModelCall,
    ) -> Result<Answer, CallError> {
        let mut req = Request::new(Full::new(body));
        *req.method_mut() = Method::POST;
        *req.uri_mut() = self.endpoint.clone();
        let headers = req.headers_mut();
        headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        headers.insert(ACCEPT, HeaderValue::from_static("application/json"));
        headers.insert(AUTHORIZATION, self.authorization.clone());
        let resp = self.client.request(req).await.map_err(|e| {
            // A dial that failed (or that the guard refused) sent nothing.
            call.reached = !e.is_connect();
            CallError::Request(error_chain(&e))
        })?;
        call.status = Some(resp.status().as_u16());
        if !resp.status().is_success() {
            return Err(CallError::Status(resp.status()));
        }
        let reply = Limited::new(resp.into_body(), REPLY_BYTES)
            .collect()
            .await
            .map_err(|e| CallError::Body(e.to_string()))?
            .to_bytes();
        call.bytes_down = reply.len() as u64;
        Ok(question.answer(&reply)?)
    }

    fn cache(&self) -> std::sync::MutexGuard<'_, LruCache<[u8; 32], Answer>> {
        self.answers.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl std::fmt::Debug for SynthModel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SynthModel")
            .field("endpoint", &self.endpoint)
            .field("model", &self.model)
            .field("timeout", &self.timeout)
            .finish_non_exhaustive()
    }
}

/// An error and its sources on one line (the client's own message is only "client error").
fn error_chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}
