//! Synth's optional model: the question put to an OpenAI-compatible chat-completions endpoint,
//! and the check of its reply. The offline answer is always made first; the model may only
//! replace its JSON body, and only with JSON that is valid against the operation's response
//! schema (or, without a usable schema, keeps the offline answer's shape). Sending the question
//! is the caller's job ([`model_client`](super::model_client)).

use bytes::Bytes;
use http::StatusCode;
use http::header;
use serde::Deserialize;
use serde_json::{Map, Value, json};

use super::synth::{self, OpenApi};
use super::{Answer, Exchange, mock};
use crate::decide::tripwire;

/// The `X-Af-Synth` value of an answer the model made.
pub(crate) const MARK: &str = "model";
/// Most request-body bytes put in the prompt.
pub(crate) const PROMPT_BODY_BYTES: usize = 16 * 1024;

const SYSTEM_PROMPT: &str = "You stand in for an HTTP API in a test environment. You are given \
one request. Answer only with the JSON body the API would return for it: no prose, no Markdown, \
no code fences. When a response schema is given, the body must be valid against it; otherwise \
keep every key and value type of the example answer and choose values that fit the request.";

/// Where component schemas live in an OpenAPI description, as a `$ref` names them.
const SCHEMA_REF: &str = "#/components/schemas/";

/// Why a model's reply was not used.
#[derive(Debug, thiserror::Error)]
pub(crate) enum Unusable {
    /// The reply is not a chat completion.
    #[error("the reply is not a chat completion: {0}")]
    Reply(serde_json::Error),
    /// The completion has no message content.
    #[error("the reply has no message content")]
    NoContent,
    /// The message content is not JSON.
    #[error("the message content is not JSON: {0}")]
    NotJson(serde_json::Error),
    /// The JSON is not valid against the response schema.
    #[error("the answer breaks the response schema at `{at}`: {message}")]
    Schema {
        /// Where in the answer (a JSON pointer).
        at: String,
        /// What the validator said.
        message: String,
    },
    /// The JSON does not keep the offline answer's shape.
    #[error("the answer does not keep the offline answer's shape at `{0}`")]
    Shape(String),
}

/// A synth answer the model is asked to replace.
#[derive(Debug)]
pub(crate) struct Question<'o> {
    /// The chat-completions request body.
    pub request: Value,
    offline: &'o Answer,
    offline_body: Value,
    /// The response schema, self-contained (see [`self_contained`]).
    schema: Option<Value>,
}

impl<'o> Question<'o> {
    /// The question for `ex`, whose request digest is `digest` ([`request_digest`](super::schema_value::request_digest)), or
    /// `None` when a model may not replace `offline`: a miss, or an answer without a JSON body.
    pub(crate) fn new(
        model: &str,
        digest: &[u8; 32],
        doc: Option<&OpenApi>,
        ex: &Exchange<'_>,
        offline: &'o Answer,
    ) -> Option<Question<'o>> {
        let replaceable = offline
            .headers
            .get(synth::HEADER)
            .is_some_and(|from| from == "openapi" || from == "pack");
        if !replaceable {
            return None;
        }
        let offline_body: Value = serde_json::from_slice(&offline.body).ok()?;
        let schema = doc
            .and_then(|d| d.response_schema(ex))
            .map(|(schema, doc)| self_contained(schema, doc));
        let prompt = user_prompt(ex, offline.status, schema.as_ref(), &offline_body);
        let request = json!({
            "model": model,
            "messages": [
                {"role": "system", "content": SYSTEM_PROMPT},
                {"role": "user", "content": prompt},
            ],
            "temperature": 0,
            "seed": seed(digest),
            "response_format": {"type": "json_object"},
        });
        Some(Question {
            request,
            offline,
            offline_body,
            schema,
        })
    }

    /// The answer made from the model's reply (a chat completion): the offline answer's status
    /// and headers with the model's JSON as the body, marked [`MARK`].
    pub(crate) fn answer(&self, reply: &[u8]) -> Result<Answer, Unusable> {
        let completion: Completion = serde_json::from_slice(reply).map_err(Unusable::Reply)?;
        let content = completion
            .choices
            .into_iter()
            .next()
            .and_then(|choice| choice.message.content)
            .ok_or(Unusable::NoContent)?;
        let value: Value = serde_json::from_str(&content).map_err(Unusable::NotJson)?;
        self.check(&value)?;
        let mut headers = self.offline.headers.clone();
        headers.remove(header::CONTENT_LENGTH);
        let answer = Answer {
            status: self.offline.status,
            headers,
            body: Bytes::from(value.to_string()),
        };
        Ok(mock::marked(answer, synth::HEADER, MARK))
    }

    /// Valid against the schema when it compiles as JSON Schema, else of the offline shape.
    fn check(&self, value: &Value) -> Result<(), Unusable> {
        // OpenAPI 3.0 schemas are not always JSON Schema (a boolean `exclusiveMinimum`): those
        // fall back to the shape check.
        let validator = self.schema.as_ref().and_then(|schema| {
            jsonschema::options()
                .should_validate_formats(true)
                .build(schema)
                .ok()
        });
        match validator {
            Some(validator) => validator.validate(value).map_err(|e| Unusable::Schema {
                at: e.instance_path().to_string(),
                message: e.to_string(),
            }),
            None => match misfit(&self.offline_body, value) {
                Some(at) if at.is_empty() => Err(Unusable::Shape("/".to_owned())),
                Some(at) => Err(Unusable::Shape(at)),
                None => Ok(()),
            },
        }
    }
}

/// The part of a chat completion synth reads.
#[derive(Deserialize)]
struct Completion {
    choices: Vec<Choice>,
}

#[derive(Deserialize)]
struct Choice {
    message: ChoiceMessage,
}

#[derive(Deserialize)]
struct ChoiceMessage {
    content: Option<String>,
}

/// The model's seed: the first 63 bits of the request digest (a non-negative JSON integer any
/// API takes).
fn seed(digest: &[u8; 32]) -> u64 {
    let [b0, b1, b2, b3, b4, b5, b6, b7, ..] = *digest;
    u64::from_le_bytes([b0, b1, b2, b3, b4, b5, b6, b7]) >> 1
}

/// The request as the model reads it, with the schema to answer by (or, without one, the
/// offline answer as the example of the shape).
fn user_prompt(
    ex: &Exchange<'_>,
    status: StatusCode,
    schema: Option<&Value>,
    offline: &Value,
) -> String {
    // A credential in the query is not the model's business: it would leave with the prompt.
    let query: Vec<&str> = ex
        .query
        .into_iter()
        .flat_map(tripwire::non_credential_pairs)
        .collect();
    let query = if query.is_empty() {
        "(none)".to_owned()
    } else {
        query.join("&")
    };
    let mut prompt = format!(
        "Request: {} {}\nHost: {}\nQuery: {query}\n",
        ex.method,
        tripwire::redact_path(ex.host, ex.path),
        ex.host,
    );
    if ex.body.is_empty() {
        prompt.push_str("Request body: (none)\n");
    } else {
        let shown = &ex.body[..ex.body.len().min(PROMPT_BODY_BYTES)];
        let media = ex.media_type().unwrap_or_else(|| "unknown type".to_owned());
        prompt.push_str(&format!(
            "Request body ({media}):\n{}\n",
            String::from_utf8_lossy(shown)
        ));
        if shown.len() < ex.body.len() {
            prompt.push_str(&format!(
                "(request body truncated: {} of {} bytes shown)\n",
                shown.len(),
                ex.body.len()
            ));
        }
    }
    prompt.push_str(&format!(
        "The API answers with status {}.\n",
        status.as_u16()
    ));
    match schema {
        Some(schema) => prompt.push_str(&format!(
            "Response body JSON Schema (its $refs point into its own components):\n{schema}\n"
        )),
        None => prompt.push_str(&format!("Example answer:\n{offline}\n")),
    }
    prompt
}

/// `schema` wrapped with every component schema it refers to (directly or through others)
/// under its own `components`, so that its `#/components/schemas/...` `$ref`s resolve inside
/// it: one document to show the model and to validate against.
fn self_contained(schema: &Value, doc: &Value) -> Value {
    let components = doc.pointer("/components/schemas");
    let mut found = Map::new();
    let mut pending = Vec::new();
    component_refs(schema, &mut pending);
    while let Some(name) = pending.pop() {
        if found.contains_key(name) {
            continue;
        }
        if let Some(target) = components.and_then(|c| c.get(name)) {
            component_refs(target, &mut pending);
            found.insert(name.to_owned(), target.clone());
        }
    }
    json!({"allOf": [schema], "components": {"schemas": found}})
}

/// The component schema names `value`'s `$ref`s point at.
fn component_refs<'d>(value: &'d Value, names: &mut Vec<&'d str>) {
    match value {
        Value::Object(fields) => {
            for (key, field) in fields {
                match field.as_str().and_then(|r| r.strip_prefix(SCHEMA_REF)) {
                    Some(name) if key == "$ref" => names.push(name),
                    _ => component_refs(field, names),
                }
            }
        }
        Value::Array(items) => items.iter().for_each(|item| component_refs(item, names)),
        _ => {}
    }
}

/// Where `got` first leaves `expected`'s shape (a JSON pointer; empty for the whole value), or
/// `None` when it keeps it: the same kind of value everywhere, every key of an object (more are
/// fine), every array item shaped like the first expected one. `null` expects anything.
fn misfit(expected: &Value, got: &Value) -> Option<String> {
    match (expected, got) {
        (Value::Null, _)
        | (Value::Bool(_), Value::Bool(_))
        | (Value::Number(_), Value::Number(_))
        | (Value::String(_), Value::String(_)) => None,
        (Value::Array(want), Value::Array(items)) => {
            let first = want.first()?;
            items
                .iter()
                .enumerate()
                .find_map(|(i, item)| misfit(first, item).map(|at| format!("/{i}{at}")))
        }
        (Value::Object(want), Value::Object(fields)) => {
            want.iter().find_map(|(key, shape)| match fields.get(key) {
                Some(field) => misfit(shape, field).map(|at| format!("/{key}{at}")),
                None => Some(format!("/{key}")),
            })
        }
        _ => Some(String::new()),
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use http::HeaderValue;

    use super::*;
    use crate::answer::modes::pack::Pack;
    use crate::answer::modes::pack::testing::Request;
    use crate::answer::modes::synth::OpenApiDocs;

    const SHOP: &str = "openapi/shop.yaml";
    const HOST: &str = "api.shop.example";

    fn shop() -> OpenApiDocs {
        let doc: Value =
            serde_saphyr::from_str(include_str!("../../../../fixtures/openapi/shop.yaml"))
                .expect("the demo description is YAML");
        OpenApiDocs::load(&BTreeMap::from([(SHOP.to_owned(), doc)]))
            .expect("the demo description loads")
    }

    /// A request and its offline answer from the demo description (and `pack`).
    struct Asked {
        request: Request,
        docs: OpenApiDocs,
        offline: Answer,
    }

    impl Asked {
        fn new(request: Request, pack: Option<&Pack>) -> Asked {
            let docs = shop();
            let offline = synth::answer(docs.get(SHOP), pack, &request.exchange());
            Asked {
                request,
                docs,
                offline,
            }
        }

        fn get(path: &str) -> Asked {
            Asked::new(Request::new("GET", HOST, path), None)
        }

        fn question(&self) -> Option<Question<'_>> {
            let ex = self.request.exchange();
            let digest = crate::answer::modes::schema_value::request_digest(&ex);
            Question::new("m-1", &digest, self.docs.get(SHOP), &ex, &self.offline)
        }
    }

    fn prompt<'q>(q: &'q Question<'_>) -> &'q str {
        q.request["messages"][1]["content"]
            .as_str()
            .expect("a user prompt")
    }

    fn completion(content: &str) -> Vec<u8> {
        json!({"choices": [{"index": 0, "message": {"role": "assistant", "content": content}}]})
            .to_string()
            .into_bytes()
    }

    fn order() -> Value {
        json!({
            "id": "0b6f5c9e-3b8a-4c1d-9f2e-5a7b8c9d0e1f", "state": "paid", "total": 12.5,
            "quantity": 2, "created_at": "2024-05-06T07:08:09Z",
            "customer": {"id": "cus_1", "email": "ada@example.com"},
            "items": [{"sku": "SKU-0002", "price": 120}],
        })
    }

    #[test]
    fn the_request_carries_model_seed_and_the_operations_schema() {
        let (one, same, other) = (
            Asked::get("/v1/orders/o_7?expand=items"),
            Asked::get("/v1/orders/o_7?expand=items"),
            Asked::get("/v1/orders/o_8"),
        );
        let q = one.question().expect("an OpenAPI answer is replaceable");
        let again = same.question().expect("replaceable");
        let other = other.question().expect("replaceable too");
        assert_eq!(q.request["model"], "m-1");
        assert_eq!(q.request["temperature"], 0);
        assert_eq!(q.request["response_format"], json!({"type": "json_object"}));
        assert_eq!(q.request["messages"][0]["role"], "system");
        assert!(q.request["seed"].is_u64());
        assert_eq!(q.request["seed"], again.request["seed"]);
        assert_ne!(q.request["seed"], other.request["seed"]);
        let text = prompt(&q);
        for part in ["GET /v1/orders/o_7", HOST, "expand=items", "status 200"] {
            assert!(text.contains(part), "{part:?} missing from {text}");
        }
        // The Order schema and the components it refers to, transitively, are shown.
        let schema = &q.schema.as_ref().expect("a schema")["components"]["schemas"];
        assert!(
            schema.get("Order").is_some() && schema.get("Customer").is_some(),
            "{schema}"
        );
        assert!(
            schema.get("OrderList").is_none(),
            "only what the answer refers to"
        );
        assert!(text.contains("\"Customer\""), "{text}");
    }

    #[test]
    fn a_long_body_is_cut_at_16_kib_and_says_so() {
        let body = "x".repeat(PROMPT_BODY_BYTES + 100);
        let asked = Asked::new(Request::new("POST", HOST, "/v1/orders").form(&body), None);
        let q = asked.question().expect("replaceable");
        let text = prompt(&q);
        assert!(text.contains(&"x".repeat(PROMPT_BODY_BYTES)));
        assert!(!text.contains(&"x".repeat(PROMPT_BODY_BYTES + 1)));
        assert!(text.contains(&format!(
            "{PROMPT_BODY_BYTES} of {} bytes shown",
            body.len()
        )));
    }

    #[test]
    fn misses_and_bodiless_answers_are_not_asked() {
        let miss = Asked::get("/elsewhere");
        assert_eq!(miss.offline.headers[synth::HEADER], "miss");
        assert!(miss.question().is_none(), "a miss keeps its 404");
        let cancelled = Asked::new(Request::new("DELETE", HOST, "/v1/orders/o_1"), None);
        assert_eq!(cancelled.offline.status, StatusCode::NO_CONTENT);
        assert!(cancelled.question().is_none(), "a 204 has no body");
    }

    #[test]
    fn a_valid_reply_replaces_the_body_and_keeps_status_and_headers() {
        let asked = Asked::get("/v1/orders/o_1");
        let q = asked.question().expect("asked");
        let answer = q
            .answer(&completion(&order().to_string()))
            .expect("a valid order");
        assert_eq!(answer.status, StatusCode::OK);
        assert_eq!(answer.headers[synth::HEADER], MARK);
        assert_eq!(answer.headers[header::CONTENT_TYPE], "application/json");
        let body: Value = serde_json::from_slice(&answer.body).expect("JSON");
        assert_eq!(body, order());
    }

    #[test]
    fn replies_that_are_not_json_or_break_the_schema_are_refused() {
        let asked = Asked::get("/v1/orders/o_1");
        let q = asked.question().expect("asked");
        let fenced = format!("```json\n{}\n```", order());
        let mut wrong_state = order();
        wrong_state["state"] = json!("lost");
        let mut no_id = order();
        no_id.as_object_mut().expect("object").remove("id");
        let cases: [(Vec<u8>, &str); 5] = [
            (b"<html>busy</html>".to_vec(), "not a chat completion"),
            (
                json!({"choices": []}).to_string().into_bytes(),
                "no message content",
            ),
            (completion(&fenced), "not JSON"),
            (completion(&wrong_state.to_string()), "at `/state`"),
            (completion(&no_id.to_string()), "\"id\""),
        ];
        for (reply, expected) in cases {
            let error = q.answer(&reply).expect_err("refused").to_string();
            assert!(
                error.contains(expected),
                "{error:?} should contain {expected:?}"
            );
        }
    }

    #[test]
    fn without_a_schema_the_reply_must_keep_the_offline_shape() {
        let pack = Pack::from_value(
            "p",
            &json!([{"method": "GET", "path": "/v1/things/{id}", "json": {
                "id": "{id}", "tags": [{"name": "a"}], "count": 3, "note": null,
            }}]),
        )
        .expect("a valid pack");
        let asked = Asked::new(Request::new("GET", "h", "/v1/things/t1"), Some(&pack));
        let q = asked.question().expect("a pack answer is replaceable");
        assert!(prompt(&q).contains("Example answer:"), "{}", prompt(&q));
        let fits = json!({"id": "t1", "tags": [{"name": "b"}, {"name": "c"}], "count": 9,
            "note": {"any": "thing"}, "extra": true});
        let answer = q.answer(&completion(&fits.to_string())).expect("fits");
        assert_eq!(answer.headers[synth::HEADER], MARK);
        let cases = [
            (json!({"tags": [], "count": 1, "note": null}), "`/id`"),
            (
                json!({"id": "t1", "tags": [{"name": 1}], "count": 1, "note": null}),
                "`/tags/0/name`",
            ),
            (json!({"id": "t1", "tags": [], "count": "3"}), "`/count`"),
            (json!(["t1"]), "`/`"),
        ];
        for (reply, expected) in cases {
            let error = q
                .answer(&completion(&reply.to_string()))
                .expect_err("misshapen")
                .to_string();
            assert!(
                error.contains(expected),
                "{error:?} should contain {expected:?}"
            );
        }
    }

    #[test]
    fn a_schema_the_validator_cannot_compile_falls_back_to_the_shape() {
        // OpenAPI 3.0's boolean `exclusiveMinimum` is not JSON Schema 2020-12.
        let doc = json!({"openapi": "3.0.3", "paths": {"/n": {"get": {"responses": {"200": {
            "content": {"application/json": {"schema": {"type": "object", "required": ["v"],
                "properties": {"v": {"type": "integer", "minimum": 0, "exclusiveMinimum": true}}}}}}}}}}});
        let doc = OpenApi::from_value("n.yaml", &doc).expect("loads");
        let request = Request::new("GET", "h", "/n");
        let ex = request.exchange();
        let offline = synth::answer(Some(&doc), None, &ex);
        let q = Question::new(
            "m",
            &crate::answer::modes::schema_value::request_digest(&ex),
            Some(&doc),
            &ex,
            &offline,
        )
        .expect("asked");
        let below_minimum = completion(&json!({"v": -3}).to_string());
        assert!(
            q.answer(&below_minimum).is_ok(),
            "only the shape is checked"
        );
        let error = q
            .answer(&completion(&json!({"v": "one"}).to_string()))
            .expect_err("misshapen");
        assert!(
            matches!(error, Unusable::Shape(ref at) if at == "/v"),
            "{error}"
        );
    }

    #[test]
    fn content_length_of_the_offline_answer_is_not_kept() {
        let mut asked = Asked::get("/v1/orders/o_1");
        asked
            .offline
            .headers
            .insert(header::CONTENT_LENGTH, HeaderValue::from_static("3"));
        let q = asked.question().expect("asked");
        let answer = q.answer(&completion(&order().to_string())).expect("valid");
        assert!(answer.headers.get(header::CONTENT_LENGTH).is_none());
    }
}
