//! Synth mode: generated answers that work offline and are deterministic. Each request seeds
//! a generator (method, host, path, query and body through SHA-256 into ChaCha8), so the same
//! request always gets the same answer and different requests get different ones.
//!
//! The answer comes from the rule's OpenAPI 3.x description (examples first, otherwise a value
//! synthesised from the response schema), else from the shape of the fixture pack's route, else
//! a 404 naming what was asked.

use std::collections::BTreeMap;

use bytes::Bytes;
use http::{HeaderMap, Method, StatusCode};
use serde_json::Value;

use super::pack::{Pack, PathTemplate, Problem};
use super::schema_value::{Dice, Schemas, follow_refs};
use super::{Answer, Exchange, mock};

/// Header saying what the answer was made from: `openapi`, `pack` or `miss`.
pub const HEADER: &str = "x-af-synth";

/// Why an OpenAPI description was refused.
#[derive(Debug, thiserror::Error)]
pub enum SynthError {
    /// The document is not OpenAPI 3.x.
    #[error("OpenAPI description {doc}: `openapi` must be a 3.x version, found {found}")]
    Version {
        /// The path the description was loaded from.
        doc: String,
        /// What the `openapi` field holds.
        found: String,
    },
    /// `paths` is missing or not a mapping.
    #[error("OpenAPI description {doc}: `paths` must be a mapping")]
    Paths {
        /// The path the description was loaded from.
        doc: String,
    },
    /// A path template is not one af can match.
    #[error("OpenAPI description {doc}: paths.{template}: {problem}")]
    Template {
        /// The path the description was loaded from.
        doc: String,
        /// The template as written (with the server's base path).
        template: String,
        /// What is wrong with it.
        problem: Problem,
    },
}

/// The repository's OpenAPI descriptions, by the path a rule's `openapi` names.
#[derive(Debug, Clone, Default)]
pub(crate) struct OpenApiDocs {
    docs: BTreeMap<String, OpenApi>,
}

impl OpenApiDocs {
    /// Index every description (YAML is already converted to JSON values by the caller).
    pub(crate) fn load(docs: &BTreeMap<String, Value>) -> Result<OpenApiDocs, SynthError> {
        let docs = docs
            .iter()
            .map(|(path, doc)| Ok((path.clone(), OpenApi::from_value(path, doc)?)))
            .collect::<Result<_, SynthError>>()?;
        Ok(OpenApiDocs { docs })
    }

    /// The description a rule names.
    pub(crate) fn get(&self, name: &str) -> Option<&OpenApi> {
        self.docs.get(name)
    }
}

/// An OpenAPI 3.x description with its operations indexed by method and path template.
#[derive(Debug, Clone)]
pub struct OpenApi {
    doc: Value,
    operations: Vec<Operation>,
}

/// One operation under one server base path, with the success answer it gives.
#[derive(Debug, Clone)]
struct Operation {
    method: Method,
    template: PathTemplate,
    status: StatusCode,
    /// The JSON media object of that response, if it has one.
    media: Option<Value>,
}

impl OpenApi {
    /// Index a description; operations without a 2xx response are left out.
    pub fn from_value(name: &str, doc: &Value) -> Result<OpenApi, SynthError> {
        let version = doc.get("openapi");
        if !version
            .and_then(Value::as_str)
            .is_some_and(|v| v.starts_with("3."))
        {
            return Err(SynthError::Version {
                doc: name.to_owned(),
                found: version.map_or_else(|| "nothing".to_owned(), Value::to_string),
            });
        }
        let paths =
            doc.get("paths")
                .and_then(Value::as_object)
                .ok_or_else(|| SynthError::Paths {
                    doc: name.to_owned(),
                })?;
        let mut prefixes: Vec<&str> = doc
            .get("servers")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|server| server.get("url").and_then(Value::as_str))
            .map(server_base_path)
            .collect();
        prefixes.sort_unstable();
        prefixes.dedup();
        if prefixes.is_empty() {
            prefixes.push("");
        }
        let mut operations = Vec::new();
        for (path, item) in paths {
            for (key, operation) in item.as_object().into_iter().flatten() {
                let Some(method) = operation_method(key) else {
                    continue;
                };
                let Some((status, media)) = success(doc, operation) else {
                    continue;
                };
                for prefix in &prefixes {
                    let text = format!("{prefix}{path}");
                    let template =
                        PathTemplate::parse(&text).map_err(|problem| SynthError::Template {
                            doc: name.to_owned(),
                            template: text.clone(),
                            problem,
                        })?;
                    operations.push(Operation {
                        method: method.clone(),
                        template,
                        status,
                        media: media.cloned(),
                    });
                }
            }
        }
        Ok(OpenApi {
            doc: doc.clone(),
            operations,
        })
    }

    /// The operation for `ex`: literal segments beat parameters, ties go to the first.
    fn find(&self, ex: &Exchange<'_>) -> Option<&Operation> {
        let mut best: Option<&Operation> = None;
        for op in &self.operations {
            if op.method != *ex.method || op.template.matches(ex.path).is_none() {
                continue;
            }
            if best.is_none_or(|b| op.template.outranks(&b.template).is_gt()) {
                best = Some(op);
            }
        }
        best
    }

    /// The JSON schema of the success answer to `ex`, and the description its `$ref`s point
    /// into; `None` when no operation matches or its answer has no schema.
    pub fn response_schema(&self, ex: &Exchange<'_>) -> Option<(&Value, &Value)> {
        let schema = self.find(ex)?.media.as_ref()?.get("schema")?;
        Some((schema, &self.doc))
    }

    fn answer(&self, op: &Operation, dice: &mut Dice) -> Answer {
        match &op.media {
            Some(media) => Answer::json(op.status, &Schemas::new(&self.doc, dice).media(media)),
            None => Answer {
                status: op.status,
                headers: HeaderMap::new(),
                body: Bytes::new(),
            },
        }
    }
}

/// Answer `ex` from the OpenAPI description, else from the shape of the pack's route, else 404.
pub fn answer(doc: Option<&OpenApi>, pack: Option<&Pack>, ex: &Exchange<'_>) -> Answer {
    let mut dice = Dice::seeded(ex);
    if let Some(doc) = doc
        && let Some(op) = doc.find(ex)
    {
        return mock::marked(doc.answer(op, &mut dice), HEADER, "openapi");
    }
    if let Some(hit) = pack.and_then(|p| p.find(ex)) {
        let answer = hit.answer_with(|json| dice.reshape(json, &hit));
        return mock::marked(answer, HEADER, "pack");
    }
    let why = "no OpenAPI operation and no fixture route matches this request";
    mock::marked(mock::miss(pack, ex, why), HEADER, "miss")
}

/// The path part of a server URL (`https://api.example.com/v1` → `/v1`), without a trailing `/`.
/// Server URLs may hold `{variables}`, so they are not parsed as URIs.
fn server_base_path(url: &str) -> &str {
    let path = match url.split_once("://") {
        Some((_, rest)) => rest.find('/').map_or("", |slash| &rest[slash..]),
        None if url.starts_with('/') => url,
        None => "",
    };
    path.trim_end_matches('/')
}

fn operation_method(key: &str) -> Option<Method> {
    Some(match key {
        "get" => Method::GET,
        "put" => Method::PUT,
        "post" => Method::POST,
        "delete" => Method::DELETE,
        "options" => Method::OPTIONS,
        "head" => Method::HEAD,
        "patch" => Method::PATCH,
        "trace" => Method::TRACE,
        _ => return None,
    })
}

/// The operation's success answer: the lowest 2xx status with a JSON body, else the lowest 2xx
/// (answered empty). `2XX` counts as 200 after the explicit codes.
fn success<'d>(doc: &'d Value, operation: &'d Value) -> Option<(StatusCode, Option<&'d Value>)> {
    let mut candidates: Vec<(u16, bool, &Value)> = operation
        .get("responses")?
        .as_object()?
        .iter()
        .filter_map(|(code, response)| {
            let (status, explicit) = match code.parse::<u16>() {
                Ok(status) => (status, true),
                Err(_) if code.eq_ignore_ascii_case("2xx") => (200, false),
                Err(_) => return None,
            };
            (200..300)
                .contains(&status)
                .then(|| (status, explicit, follow_refs(doc, response)))
        })
        .collect();
    candidates.sort_by_key(|(status, explicit, _)| (!explicit, *status));
    let with_json = candidates
        .iter()
        .find_map(|(status, _, response)| Some((*status, json_media(response)?)));
    let (status, media) = match with_json {
        Some((status, media)) => (status, Some(media)),
        None => (candidates.first()?.0, None),
    };
    Some((StatusCode::from_u16(status).ok()?, media))
}

/// The response's JSON media object (`application/json` first, then any `...json` type) that
/// has a schema or an example.
fn json_media(response: &Value) -> Option<&Value> {
    let content = response.get("content")?.as_object()?;
    let usable = |media: &&Value| {
        ["schema", "example", "examples"]
            .iter()
            .any(|k| media.get(k).is_some())
    };
    content.get("application/json").filter(usable).or_else(|| {
        content
            .iter()
            .filter(|(media_type, _)| {
                let essence = media_type.split(';').next().unwrap_or_default().trim();
                essence.ends_with("json")
            })
            .map(|(_, media)| media)
            .find(usable)
    })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::answer::modes::pack::testing::Request;
    use crate::answer::modes::schema_value::REF_REPEATS;

    const SHOP: &str = "openapi/shop.yaml";
    const HOST: &str = "api.shop.example";

    fn shop_doc() -> Value {
        serde_saphyr::from_str(include_str!("../../../../fixtures/openapi/shop.yaml"))
            .expect("the demo description is YAML")
    }

    fn shop() -> OpenApiDocs {
        OpenApiDocs::load(&BTreeMap::from([(SHOP.to_owned(), shop_doc())]))
            .expect("the demo description loads")
    }

    fn ask(docs: &OpenApiDocs, request: &Request) -> Answer {
        answer(docs.get(SHOP), None, &request.exchange())
    }

    fn body(answer: &Answer) -> Value {
        serde_json::from_slice(&answer.body).expect("a JSON body")
    }

    /// A validator for one component schema of the demo description (OpenAPI 3.0 schemas are
    /// JSON Schema plus annotations the validator ignores).
    fn validator(component: &str) -> jsonschema::Validator {
        let schema = json!({
            "$ref": format!("#/components/schemas/{component}"),
            "components": shop_doc()["components"],
        });
        jsonschema::options()
            .should_validate_formats(true)
            .build(&schema)
            .expect("the component is a schema")
    }

    #[test]
    fn same_request_gets_byte_identical_answer_and_other_ids_differ() {
        let docs = shop();
        let first = ask(&docs, &Request::new("GET", HOST, "/v1/orders/o_1"));
        let again = ask(&docs, &Request::new("GET", HOST, "/v1/orders/o_1"));
        let other = ask(&docs, &Request::new("GET", HOST, "/v1/orders/o_2"));
        assert_eq!(first.headers[HEADER], "openapi");
        assert_eq!(first.status, StatusCode::OK);
        assert_eq!(first.body, again.body);
        assert_ne!(first.body, other.body);
    }

    #[test]
    fn body_and_query_seed_the_answer() {
        let docs = shop();
        let one = Request::new("POST", HOST, "/v1/orders")
            .json(&json!({"customer_email": "a@example.com"}));
        let two = Request::new("POST", HOST, "/v1/orders")
            .json(&json!({"customer_email": "b@example.com"}));
        let page = ask(&docs, &Request::new("GET", HOST, "/v1/orders?limit=1"));
        let other_page = ask(&docs, &Request::new("GET", HOST, "/v1/orders?limit=2"));
        let created = ask(&docs, &one);
        assert_eq!(created.status, StatusCode::CREATED);
        assert_ne!(created.body, ask(&docs, &two).body);
        assert_ne!(page.body, other_page.body);
    }

    #[test]
    fn synthesised_values_satisfy_their_schemas() {
        let docs = shop();
        let order = validator("Order");
        let list = validator("OrderList");
        let payments = validator("Payment");
        let mut broken = body(&ask(&docs, &Request::new("GET", HOST, "/v1/orders/o_1")));
        broken["customer"]["email"] = json!("not an email");
        assert!(
            !order.is_valid(&broken),
            "the checker catches a wrong format"
        );
        for n in 0..40 {
            let one = body(&ask(
                &docs,
                &Request::new("GET", HOST, &format!("/v1/orders/o_{n}")),
            ));
            let errors: Vec<String> = order.iter_errors(&one).map(|e| e.to_string()).collect();
            assert!(errors.is_empty(), "{one} breaks Order: {errors:?}");
            assert!(
                one.get("password").is_none(),
                "writeOnly fields are not answered"
            );
            let page = body(&ask(
                &docs,
                &Request::new("GET", HOST, &format!("/v1/orders?limit={n}")),
            ));
            assert!(list.is_valid(&page), "{page} breaks OrderList");
            let payment = body(&ask(
                &docs,
                &Request::new("GET", HOST, &format!("/v1/payments/p{n}")),
            ));
            assert!(payments.is_valid(&payment), "{payment} breaks Payment");
        }
    }

    #[test]
    fn recursive_refs_are_bounded_and_still_valid() {
        fn depth(category: &Value) -> usize {
            let children = category["children"].as_array().into_iter().flatten();
            let parent = category.get("parent").into_iter();
            1 + children.chain(parent).map(depth).max().unwrap_or(0)
        }
        let docs = shop();
        let category = validator("Category");
        for n in 0..10 {
            let answer = ask(
                &docs,
                &Request::new("GET", HOST, &format!("/v1/categories/c{n}")),
            );
            let value = body(&answer);
            assert!(category.is_valid(&value), "{value} breaks Category");
            assert!(depth(&value) <= 1 + REF_REPEATS, "{value} nests too deep");
        }
    }

    #[test]
    fn examples_are_preferred_to_synthesis() {
        let docs = shop();
        let receipt = ask(&docs, &Request::new("GET", HOST, "/v1/orders/o_1/receipt"));
        assert_eq!(
            body(&receipt),
            json!({"number": "R-1001", "total": 42.5, "currency": "EUR"})
        );
        let status = ask(&docs, &Request::new("GET", HOST, "/v1/status"));
        assert_eq!(body(&status), json!({"state": "operational"}));
        let order = body(&ask(&docs, &Request::new("GET", HOST, "/v1/orders/o_1")));
        let skus: Vec<&Value> = order["items"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|i| &i["sku"])
            .collect();
        assert!(
            !skus.is_empty() && skus.iter().all(|s| *s == "SKU-0001"),
            "{order}"
        );
    }

    #[test]
    fn operations_are_found_under_the_server_base_path_literal_first() {
        let docs = shop();
        let search = ask(&docs, &Request::new("GET", HOST, "/v1/orders/search"));
        assert!(
            body(&search)["ids"].is_array(),
            "2XX with a literal path wins over {{orderId}}"
        );
        let cancelled = ask(&docs, &Request::new("DELETE", HOST, "/v1/orders/o_1"));
        assert_eq!(cancelled.status, StatusCode::NO_CONTENT);
        assert!(cancelled.body.is_empty());
        let outside = ask(&docs, &Request::new("GET", HOST, "/orders/o_1"));
        assert_eq!(outside.status, StatusCode::NOT_FOUND);
        assert_eq!(outside.headers[HEADER], "miss");
        assert_eq!(body(&outside)["asked"]["path"], "/orders/o_1");
    }

    #[test]
    fn exclusive_bounds_of_both_openapi_versions_hold() {
        let doc = json!({"openapi": "3.0.0", "paths": {"/n": {"get": {"responses": {"200": {
        "content": {"application/json": {"schema": {"type": "object", "properties": {
            "v30": {"type": "integer", "minimum": 0, "maximum": 1, "exclusiveMinimum": true},
            "v31": {"type": "integer", "exclusiveMinimum": 4, "exclusiveMaximum": 6},
            "f": {"type": "number", "minimum": 0.5, "maximum": 0.5},
        }}}}}}}}}});
        let doc = OpenApi::from_value("n.yaml", &doc).expect("loads");
        let answer = answer(Some(&doc), None, &Request::new("GET", "h", "/n").exchange());
        assert_eq!(body(&answer), json!({"v30": 1, "v31": 5, "f": 0.5}));
    }

    #[test]
    fn pack_shape_is_kept_with_leaves_redrawn() {
        let pack = Pack::from_value("p", &json!([{"method": "GET", "path": "/v1/customers/{id}", "json": {
            "id": "{id}", "object": "customer", "created": 1700000000, "email": "jenny@example.com",
            "name": "Jenny Rosen", "at": "2024-01-02T03:04:05Z", "ref": "cus_AbC123", "ok": true,
            "nested": {"list": [1, 2.5, null]}, "url": "https://shop.example/a/B1",
            "kinds": ["User", "EUR", "gpt-4o-mini"],
        }}]))
        .expect("a valid pack");
        let ask = |path: &str| {
            answer(
                None,
                Some(&pack),
                &Request::new("GET", "h", path).exchange(),
            )
        };
        let first = ask("/v1/customers/cus_1");
        assert_eq!(first.headers[HEADER], "pack");
        assert_eq!(first.body, ask("/v1/customers/cus_1").body);
        assert_ne!(first.body, ask("/v1/customers/cus_2").body);
        let value = body(&first);
        assert_eq!(value["id"], "cus_1");
        assert_eq!(value["object"], "customer");
        assert_ne!(value["name"], "Jenny Rosen");
        assert!(
            value["name"]
                .as_str()
                .is_some_and(|n| n.len() == 11 && n.as_bytes()[5] == b' ')
        );
        assert!(
            value["email"]
                .as_str()
                .is_some_and(|e| e.ends_with("@example.com"))
        );
        assert!(
            value["at"]
                .as_str()
                .is_some_and(|t| humantime::parse_rfc3339(t).is_ok())
        );
        assert!(
            value["ref"]
                .as_str()
                .is_some_and(|r| r.starts_with("cus_") && r != "cus_AbC123")
        );
        assert!(
            value["url"]
                .as_str()
                .is_some_and(|u| u.starts_with("https://shop.example/"))
        );
        assert!(value["created"].is_i64() && value["ok"].is_boolean());
        assert_eq!(value["kinds"], json!(["User", "EUR", "gpt-4o-mini"]));
        let list = value["nested"]["list"]
            .as_array()
            .expect("the list keeps its shape");
        assert!(list.len() == 3 && list[0].is_i64() && list[1].is_f64() && list[2].is_null());
    }

    #[test]
    fn nothing_to_answer_from_is_a_404_miss_with_a_skeleton() {
        let answer = answer(None, None, &Request::new("GET", "h", "/x").exchange());
        assert_eq!(answer.status, StatusCode::NOT_FOUND);
        assert_eq!(answer.headers[HEADER], "miss");
        assert_eq!(body(&answer)["route"]["path"], "/x");
    }

    #[test]
    fn descriptions_that_are_not_openapi_3_are_refused_by_name() {
        let cases = [
            (
                json!({"swagger": "2.0", "paths": {}}),
                "d.yaml: `openapi` must be a 3.x version, found nothing",
            ),
            (
                json!({"openapi": "3.1.0"}),
                "d.yaml: `paths` must be a mapping",
            ),
            (
                json!({"openapi": "3.1.0", "paths": {"/a/{b": {"get": {"responses": {"200": {}}}}}}),
                "paths./a/{b: segment",
            ),
        ];
        for (doc, expected) in cases {
            let docs = BTreeMap::from([("d.yaml".to_owned(), doc)]);
            let error = OpenApiDocs::load(&docs).expect_err("refused").to_string();
            assert!(
                error.contains(expected),
                "{error:?} should contain {expected:?}"
            );
        }
    }
}
