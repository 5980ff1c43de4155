//! Fixture packs: the documents mock mode answers from, and the path templates synth shares.
//!
//! A pack names the hosts it answers for and lists routes. A route matches on method, path
//! template (`/v1/customers/{id}`), optional query fields and an optional body subset, and
//! gives the answer. The format is documented for people in `docs/mock-packs.md`.

use std::borrow::Cow;
use std::collections::BTreeMap;

use bytes::Bytes;
use http::header::{self, HeaderName};
use http::{HeaderMap, HeaderValue, Method, StatusCode};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::{Answer, Exchange};

mod error;
mod path;
mod request;

pub(crate) use self::error::{PackError, Problem};
pub use self::path::PathTemplate;
use self::request::{Request, leaves, scalar_text};

/// Methods a route may name (an unknown one is more likely a typo than an extension method).
const METHODS: [Method; 9] = [
    Method::GET,
    Method::HEAD,
    Method::POST,
    Method::PUT,
    Method::PATCH,
    Method::DELETE,
    Method::OPTIONS,
    Method::TRACE,
    Method::CONNECT,
];

/// The document form of a pack, as people write it.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct PackDoc {
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    hosts: Vec<String>,
    routes: Vec<Value>,
}

/// The document form of a route, as people write it (and as the miss skeleton is written).
#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct RouteDoc {
    method: String,
    path: String,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    query: BTreeMap<String, Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    body: Option<Value>,
    #[serde(default = "default_status")]
    status: u16,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    headers: BTreeMap<String, Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    json: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    text: Option<String>,
}

fn default_status() -> u16 {
    200
}

/// A route of the pack format, serialised in the order people read it.
#[derive(Debug, Serialize)]
#[serde(transparent)]
pub(crate) struct Skeleton(RouteDoc);

/// A route that answers `ex`'s method and path with a placeholder JSON body: what a miss
/// offers to paste into the pack.
pub(crate) fn skeleton(ex: &Exchange<'_>) -> Skeleton {
    Skeleton(RouteDoc {
        method: ex.method.as_str().to_owned(),
        path: ex.path.to_owned(),
        query: BTreeMap::new(),
        body: None,
        status: default_status(),
        headers: BTreeMap::new(),
        json: Some(serde_json::json!({ "todo": "the answer the service should get" })),
        text: None,
    })
}

/// A parsed, validated fixture pack.
#[derive(Debug, Clone)]
pub struct Pack {
    name: String,
    hosts: Vec<String>,
    routes: Vec<Route>,
}

impl Pack {
    /// Parse a pack document: a mapping with `name`, `hosts` and `routes`, or just the list of
    /// routes. `label` names the pack in errors and is its name when the document has none.
    pub fn from_value(label: &str, doc: &Value) -> Result<Pack, PackError> {
        let invalid = |at: String, problem: Problem| PackError::Invalid {
            pack: label.to_owned(),
            at,
            problem,
        };
        let doc = match doc {
            Value::Array(routes) => PackDoc {
                name: None,
                hosts: Vec::new(),
                routes: routes.clone(),
            },
            other => PackDoc::deserialize(other)
                .map_err(|e| invalid("document".to_owned(), Problem::Shape(e.to_string())))?,
        };
        let routes = doc
            .routes
            .iter()
            .enumerate()
            .map(|(index, route)| {
                Route::from_value(route)
                    .map_err(|(field, problem)| invalid(route_at(index, field), problem))
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Pack {
            name: doc.name.unwrap_or_else(|| label.to_owned()),
            hosts: doc
                .hosts
                .iter()
                .map(|h| h.trim_end_matches('.').to_ascii_lowercase())
                .collect(),
            routes,
        })
    }

    /// The pack's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The hosts the pack answers for (lower-case), when it is not named by a rule.
    pub fn hosts(&self) -> &[String] {
        &self.hosts
    }

    /// The routes, in the order written.
    pub fn routes(&self) -> &[Route] {
        &self.routes
    }

    /// The most specific route matching `ex`: literal segments beat parameters (leftmost
    /// first), then more query and body constraints beat fewer, then the first written wins.
    pub fn find(&self, ex: &Exchange<'_>) -> Option<Hit<'_>> {
        let request = Request::new(ex);
        let mut best: Option<Hit<'_>> = None;
        for route in &self.routes {
            let Some(params) = route.matches(&request) else {
                continue;
            };
            let better = best
                .as_ref()
                .is_none_or(|b| route.outranks(b.route).is_gt());
            if better {
                best = Some(Hit { route, params });
            }
        }
        best
    }
}

fn route_at(index: usize, field: Option<String>) -> String {
    match field {
        Some(field) => format!("routes[{index}].{field}"),
        None => format!("routes[{index}]"),
    }
}

/// One route of a pack.
#[derive(Debug, Clone)]
pub struct Route {
    method: Method,
    path: PathTemplate,
    query: Vec<(String, String)>,
    body: Option<Value>,
    status: StatusCode,
    headers: HeaderMap,
    reply: Reply,
}

/// The answer body a route gives.
#[derive(Debug, Clone)]
enum Reply {
    Empty,
    Json(Value),
    Text(String),
}

/// A field name (`None` for the whole route) and what is wrong with it.
type FieldProblem = (Option<String>, Problem);

impl Route {
    fn from_value(value: &Value) -> Result<Route, FieldProblem> {
        let doc =
            RouteDoc::deserialize(value).map_err(|e| (None, Problem::Shape(e.to_string())))?;
        let at = |field: &str| Some(field.to_owned());
        let upper = doc.method.to_ascii_uppercase();
        let method = METHODS
            .into_iter()
            .find(|m| m.as_str() == upper)
            .ok_or_else(|| (at("method"), Problem::Method(doc.method.clone())))?;
        let path = PathTemplate::parse(&doc.path).map_err(|p| (at("path"), p))?;
        let query = doc
            .query
            .iter()
            .map(|(key, value)| {
                let text = scalar_text(value)
                    .ok_or_else(|| (at(&format!("query.{key}")), Problem::NotScalar))?;
                Ok((key.clone(), text.into_owned()))
            })
            .collect::<Result<Vec<_>, FieldProblem>>()?;
        let status = StatusCode::from_u16(doc.status)
            .ok()
            .filter(|s| (100..600).contains(&s.as_u16()))
            .ok_or_else(|| (at("status"), Problem::Status(doc.status)))?;
        let reply = match (doc.json, doc.text) {
            (Some(_), Some(_)) => return Err((None, Problem::TwoAnswers)),
            (Some(json), None) => Reply::Json(json),
            (None, Some(text)) => Reply::Text(text),
            (None, None) => Reply::Empty,
        };
        let mut headers = HeaderMap::new();
        for (name, value) in &doc.headers {
            let field = at(&format!("headers.{name}"));
            let header_name = HeaderName::from_bytes(name.as_bytes())
                .map_err(|_| (field.clone(), Problem::HeaderName(name.clone())))?;
            let text = scalar_text(value).ok_or_else(|| (field.clone(), Problem::NotScalar))?;
            let header_value =
                HeaderValue::from_str(&text).map_err(|_| (field, Problem::HeaderValue))?;
            headers.append(header_name, header_value);
        }
        let content_type = match reply {
            Reply::Json(_) => Some("application/json"),
            Reply::Text(_) => Some("text/plain; charset=utf-8"),
            Reply::Empty => None,
        };
        if let Some(content_type) =
            content_type.filter(|_| !headers.contains_key(header::CONTENT_TYPE))
        {
            headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
        }
        Ok(Route {
            method,
            path,
            query,
            body: doc.body,
            status,
            headers,
            reply,
        })
    }

    /// The method the route answers.
    pub fn method(&self) -> &Method {
        &self.method
    }

    /// The path template the route answers.
    pub fn path(&self) -> &PathTemplate {
        &self.path
    }

    /// Query fields a request must carry, with their values.
    pub fn query(&self) -> &[(String, String)] {
        &self.query
    }

    /// The JSON subset (or form fields) a request body must hold.
    pub fn body(&self) -> Option<&Value> {
        self.body.as_ref()
    }

    /// The status the route answers with.
    pub fn status(&self) -> StatusCode {
        self.status
    }

    fn matches(&self, request: &Request<'_>) -> Option<Vec<(String, String)>> {
        if *request.ex.method != self.method {
            return None;
        }
        let params = self.path.matches(request.ex.path)?;
        let query_ok = self
            .query
            .iter()
            .all(|(key, want)| request.query().iter().any(|(k, v)| k == key && v == want));
        let body_ok = self
            .body
            .as_ref()
            .is_none_or(|pattern| request.body().is_some_and(|b| b.holds(pattern)));
        (query_ok && body_ok).then(|| {
            params
                .into_iter()
                .map(|(name, value)| (name.to_owned(), value.to_owned()))
                .collect()
        })
    }

    fn constraints(&self) -> usize {
        self.query.len() + self.body.as_ref().map_or(0, leaves)
    }

    fn outranks(&self, other: &Route) -> std::cmp::Ordering {
        self.path
            .outranks(&other.path)
            .then_with(|| self.constraints().cmp(&other.constraints()))
    }
}

/// A route that matched a request, with the request's parameter values.
#[derive(Debug)]
pub struct Hit<'p> {
    route: &'p Route,
    params: Vec<(String, String)>,
}

impl Hit<'_> {
    /// The route that matched.
    pub fn route(&self) -> &Route {
        self.route
    }

    /// The route's answer, `{name}` placeholders filled with the request's path parameters.
    pub fn answer(&self) -> Answer {
        self.answer_with(Value::clone)
    }

    /// The route's answer, its JSON body passed through `reshape` before the placeholders are
    /// filled (text bodies are left as written).
    pub fn answer_with(&self, reshape: impl FnOnce(&Value) -> Value) -> Answer {
        let body = match &self.route.reply {
            Reply::Empty => Bytes::new(),
            Reply::Json(json) => Bytes::from(self.fill_json(reshape(json)).to_string()),
            Reply::Text(text) => Bytes::from(self.fill(text).into_owned()),
        };
        Answer {
            status: self.route.status,
            headers: self.route.headers.clone(),
            body,
        }
    }

    /// Whether `text` holds a placeholder for one of the route's parameters.
    pub fn names_parameter(&self, text: &str) -> bool {
        matches!(self.fill(text), Cow::Owned(_))
    }

    fn fill_json(&self, value: Value) -> Value {
        match value {
            Value::String(s) => Value::String(match self.fill(&s) {
                Cow::Borrowed(_) => s,
                Cow::Owned(filled) => filled,
            }),
            Value::Array(items) => items.into_iter().map(|v| self.fill_json(v)).collect(),
            Value::Object(map) => map
                .into_iter()
                .map(|(k, v)| (k, self.fill_json(v)))
                .collect(),
            other => other,
        }
    }

    /// Replace `{name}` for each parameter in one pass, so a value is never filled again.
    fn fill<'t>(&self, text: &'t str) -> Cow<'t, str> {
        let mut out = String::new();
        let mut copied = 0;
        let mut rest = text;
        while let Some(open) = rest.find('{') {
            let Some(close) = rest[open..].find('}') else {
                break;
            };
            let name = &rest[open + 1..open + close];
            let start = text.len() - rest.len();
            match self.params.iter().find(|(n, _)| n == name) {
                Some((_, value)) => {
                    out.push_str(&text[copied..start + open]);
                    out.push_str(value);
                    copied = start + open + close + 1;
                    rest = &rest[open + close + 1..];
                }
                None => rest = &rest[open + 1..],
            }
        }
        if copied == 0 {
            return Cow::Borrowed(text);
        }
        out.push_str(&text[copied..]);
        Cow::Owned(out)
    }
}

/// An owned request that lends an [`Exchange`], for the answering modes' tests.
#[cfg(test)]
pub(crate) mod testing {
    use http::{HeaderMap, HeaderValue, Method, header};

    use crate::answer::modes::Exchange;

    /// A buffered request.
    pub(crate) struct Request {
        pub method: Method,
        pub host: String,
        pub path: String,
        pub query: Option<String>,
        pub headers: HeaderMap,
        pub body: Vec<u8>,
    }

    impl Request {
        pub(crate) fn new(method: &str, host: &str, path_and_query: &str) -> Self {
            let (path, query) = match path_and_query.split_once('?') {
                Some((p, q)) => (p, Some(q.to_owned())),
                None => (path_and_query, None),
            };
            Self {
                method: method.parse().expect("a method"),
                host: host.to_owned(),
                path: path.to_owned(),
                query,
                headers: HeaderMap::new(),
                body: Vec::new(),
            }
        }

        pub(crate) fn json(mut self, body: &serde_json::Value) -> Self {
            self.body = body.to_string().into_bytes();
            self.content_type("application/json")
        }

        pub(crate) fn form(mut self, body: &str) -> Self {
            self.body = body.as_bytes().to_vec();
            self.content_type("application/x-www-form-urlencoded")
        }

        fn content_type(mut self, value: &'static str) -> Self {
            self.headers
                .insert(header::CONTENT_TYPE, HeaderValue::from_static(value));
            self
        }

        pub(crate) fn exchange(&self) -> Exchange<'_> {
            Exchange {
                method: &self.method,
                host: &self.host,
                path: &self.path,
                query: self.query.as_deref(),
                headers: &self.headers,
                body: &self.body,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::testing::Request;
    use super::*;

    fn pack(doc: Value) -> Pack {
        Pack::from_value("test", &doc).expect("a valid pack")
    }

    fn hit_body(pack: &Pack, request: &Request) -> Option<Value> {
        let hit = pack.find(&request.exchange())?;
        serde_json::from_slice(&hit.answer().body).ok()
    }

    #[test]
    fn literal_segment_beats_parameter_wherever_written() {
        let p = pack(json!({"routes": [
            {"method": "GET", "path": "/v1/customers/{id}", "json": {"route": "by id"}},
            {"method": "GET", "path": "/v1/customers/search", "json": {"route": "search"}},
        ]}));
        let search = Request::new("GET", "h", "/v1/customers/search");
        let by_id = Request::new("GET", "h", "/v1/customers/cus_1");
        assert_eq!(hit_body(&p, &search), Some(json!({"route": "search"})));
        assert_eq!(hit_body(&p, &by_id), Some(json!({"route": "by id"})));
    }

    #[test]
    fn leftmost_literal_decides_between_parameters() {
        let p = pack(json!([
            {"method": "GET", "path": "/{a}/b/c", "json": 1},
            {"method": "GET", "path": "/a/{b}/c", "json": 2},
        ]));
        assert_eq!(
            hit_body(&p, &Request::new("GET", "h", "/a/b/c")),
            Some(json!(2))
        );
    }

    #[test]
    fn more_constraints_win_and_ties_go_to_the_first_written() {
        let p = pack(json!({"routes": [
            {"method": "GET", "path": "/v1/charges", "json": "plain"},
            {"method": "GET", "path": "/v1/charges", "json": "second plain"},
            {"method": "GET", "path": "/v1/charges", "query": {"limit": 3}, "json": "limited"},
        ]}));
        let limited = Request::new("GET", "h", "/v1/charges?limit=3&starting_after=x");
        let other = Request::new("GET", "h", "/v1/charges?limit=4");
        assert_eq!(hit_body(&p, &limited), Some(json!("limited")));
        assert_eq!(hit_body(&p, &other), Some(json!("plain")));
    }

    #[test]
    fn method_must_match() {
        let p = pack(json!([{"method": "post", "path": "/x", "json": {}}]));
        assert!(p.find(&Request::new("GET", "h", "/x").exchange()).is_none());
        assert!(
            p.find(&Request::new("POST", "h", "/x/").exchange())
                .is_some()
        );
    }

    #[test]
    fn path_parameters_fill_json_strings_text_and_only_known_names() {
        let p = pack(json!([
            {"method": "GET", "path": "/repos/{owner}/{repo}",
             "json": {"full_name": "{owner}/{repo}", "url": "/r/{repo}?x={unknown}", "id": 7,
                      "note": "{ {owner} }"}},
            {"method": "GET", "path": "/files/{name}.txt", "text": "file {name}"},
        ]));
        let repo = Request::new("GET", "h", "/repos/octo/{owner}");
        assert_eq!(
            hit_body(&p, &repo),
            Some(
                json!({"full_name": "octo/{owner}", "url": "/r/{owner}?x={unknown}", "id": 7,
                        "note": "{ octo }"})
            )
        );
        let file = Request::new("GET", "h", "/files/readme.txt");
        let answer = p.find(&file.exchange()).expect("a hit").answer();
        assert_eq!(answer.body, Bytes::from_static(b"file readme"));
        assert_eq!(
            answer.headers[header::CONTENT_TYPE],
            "text/plain; charset=utf-8"
        );
        assert!(
            p.find(&Request::new("GET", "h", "/files/.txt").exchange())
                .is_none()
        );
    }

    #[test]
    fn json_body_subset_must_hold() {
        let p = pack(json!([
            {"method": "POST", "path": "/v1/chat/completions",
             "body": {"model": "gpt-4o", "messages": [{"role": "user"}], "n": 1}, "json": "gpt-4o"},
            {"method": "POST", "path": "/v1/chat/completions", "json": "any"},
        ]));
        let matching = Request::new("POST", "h", "/v1/chat/completions").json(
            &json!({"model": "gpt-4o", "n": 1.0, "messages": [{"role": "user", "content": "hi"}]}),
        );
        let other_model = Request::new("POST", "h", "/v1/chat/completions")
            .json(&json!({"model": "o3", "n": 1, "messages": [{"role": "user"}]}));
        let two_messages = Request::new("POST", "h", "/v1/chat/completions").json(
            &json!({"model": "gpt-4o", "n": 1, "messages": [{"role": "user"}, {"role": "user"}]}),
        );
        assert_eq!(hit_body(&p, &matching), Some(json!("gpt-4o")));
        assert_eq!(hit_body(&p, &other_model), Some(json!("any")));
        assert_eq!(hit_body(&p, &two_messages), Some(json!("any")));
    }

    #[test]
    fn form_body_fields_must_hold() {
        let p = pack(json!([
            {"method": "POST", "path": "/v1/customers",
             "body": {"email": "a@example.com", "metadata[plan]": "pro"}, "json": "pro"},
        ]));
        let pro = Request::new("POST", "h", "/v1/customers")
            .form("email=a%40example.com&metadata%5Bplan%5D=pro&name=A");
        let free = Request::new("POST", "h", "/v1/customers").form("email=a%40example.com");
        assert_eq!(hit_body(&p, &pro), Some(json!("pro")));
        assert!(p.find(&free.exchange()).is_none());
    }

    #[test]
    fn status_headers_and_empty_bodies_are_answered_as_written() {
        let p = pack(json!([
            {"method": "DELETE", "path": "/x/{id}", "status": 204, "headers": {"x-request-id": "req_1"}},
        ]));
        let answer = p
            .find(&Request::new("DELETE", "h", "/x/1").exchange())
            .expect("a hit")
            .answer();
        assert_eq!(answer.status, StatusCode::NO_CONTENT);
        assert_eq!(answer.headers["x-request-id"], "req_1");
        assert!(answer.headers.get(header::CONTENT_TYPE).is_none());
        assert!(answer.body.is_empty());
    }

    #[test]
    fn errors_name_the_pack_and_the_route_field() {
        let cases = [
            (
                json!([{"method": "GET", "path": "/ok"}, {"method": "GET", "path": "x"}]),
                "fixture pack p.yaml: routes[1].path: must start with '/'",
            ),
            (
                json!({"routes": [{"method": "GTE", "path": "/"}]}),
                "routes[0].method: \"GTE\"",
            ),
            (
                json!({"routes": [{"method": "GET", "path": "/{a}/{a}"}]}),
                "routes[0].path: parameter {a} appears twice",
            ),
            (
                json!({"routes": [{"method": "GET", "path": "/{a"}]}),
                "routes[0].path: segment \"{a\"",
            ),
            (
                json!({"routes": [{"method": "GET", "path": "/", "status": 700}]}),
                "routes[0].status: 700",
            ),
            (
                json!({"routes": [{"method": "GET", "path": "/", "query": {"a": [1]}}]}),
                "routes[0].query.a: must be",
            ),
            (
                json!({"routes": [{"method": "GET", "path": "/", "headers": {"a b": "1"}}]}),
                "routes[0].headers.a b:",
            ),
            (
                json!({"routes": [{"method": "GET", "path": "/", "json": 1, "text": "1"}]}),
                "routes[0]: give the answer",
            ),
            (
                json!({"routes": [{"method": "GET", "path": "/", "jsno": 1}]}),
                "routes[0]: unknown field `jsno`",
            ),
            (json!({"name": "x"}), "document: missing field `routes`"),
        ];
        for (doc, expected) in cases {
            let error = Pack::from_value("p.yaml", &doc)
                .expect_err("refused")
                .to_string();
            assert!(
                error.contains(expected),
                "{error:?} should contain {expected:?}"
            );
        }
    }

    #[test]
    fn skeleton_is_a_route_of_the_format() {
        let request = Request::new("PATCH", "h", "/v2/widgets/w_9?expand=all");
        let route = serde_json::to_value(skeleton(&request.exchange())).expect("serialises");
        let p = pack(json!({"routes": [route]}));
        let answer = p
            .find(&request.exchange())
            .expect("the skeleton answers")
            .answer();
        assert_eq!(answer.status, StatusCode::OK);
        assert!(serde_json::from_slice::<Value>(&answer.body).is_ok_and(|v| v.is_object()));
    }

    #[test]
    fn template_parameters_and_display() {
        let template = PathTemplate::parse("/repos/{owner}/{repo}/issues/{number}").expect("valid");
        assert_eq!(
            template.parameters().collect::<Vec<_>>(),
            ["owner", "repo", "number"]
        );
        assert_eq!(
            template.to_string(),
            "/repos/{owner}/{repo}/issues/{number}"
        );
        assert_eq!(
            PathTemplate::parse("/").expect("valid").matches("/"),
            Some(vec![])
        );
        assert_eq!(PathTemplate::parse("/").expect("valid").matches("/a"), None);
    }
}
