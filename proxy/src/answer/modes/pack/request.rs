//! The request as routes match it: query and body parsed once, on demand, and the
//! JSON-subset rule a body pattern uses.

use std::borrow::Cow;
use std::cell::OnceCell;

use serde_json::Value;

use super::super::Exchange;

/// The request as routes see it; query and body are parsed once, and only if a route asks.
pub(super) struct Request<'e> {
    pub(super) ex: &'e Exchange<'e>,
    query: OnceCell<Vec<(String, String)>>,
    body: OnceCell<Option<Body>>,
}

pub(super) enum Body {
    Form(Vec<(String, String)>),
    Json(Value),
}

impl<'e> Request<'e> {
    pub(super) fn new(ex: &'e Exchange<'e>) -> Self {
        Self {
            ex,
            query: OnceCell::new(),
            body: OnceCell::new(),
        }
    }

    pub(super) fn query(&self) -> &[(String, String)] {
        self.query.get_or_init(|| {
            self.ex
                .query
                .and_then(|q| serde_urlencoded::from_str(q).ok())
                .unwrap_or_default()
        })
    }

    pub(super) fn body(&self) -> Option<&Body> {
        self.body
            .get_or_init(|| {
                if self.ex.media_type().as_deref() == Some("application/x-www-form-urlencoded") {
                    serde_urlencoded::from_bytes(self.ex.body)
                        .ok()
                        .map(Body::Form)
                } else {
                    serde_json::from_slice(self.ex.body).ok().map(Body::Json)
                }
            })
            .as_ref()
    }
}

impl Body {
    pub(super) fn holds(&self, pattern: &Value) -> bool {
        match self {
            Body::Json(actual) => json_subset(pattern, actual),
            Body::Form(pairs) => pattern.as_object().is_some_and(|fields| {
                fields.iter().all(|(key, want)| {
                    scalar_text(want)
                        .is_some_and(|want| pairs.iter().any(|(k, v)| k == key && *v == want))
                })
            }),
        }
    }
}

/// Whether `actual` holds everything `pattern` says: objects may have more fields, arrays
/// match element by element, numbers compare by value.
fn json_subset(pattern: &Value, actual: &Value) -> bool {
    match (pattern, actual) {
        (Value::Object(want), Value::Object(have)) => want
            .iter()
            .all(|(k, w)| have.get(k).is_some_and(|h| json_subset(w, h))),
        (Value::Array(want), Value::Array(have)) => {
            want.len() == have.len() && want.iter().zip(have).all(|(w, h)| json_subset(w, h))
        }
        (Value::Number(want), Value::Number(have)) => want.as_f64() == have.as_f64(),
        _ => pattern == actual,
    }
}

/// How many values a body pattern pins down.
pub(super) fn leaves(pattern: &Value) -> usize {
    match pattern {
        Value::Object(map) if !map.is_empty() => map.values().map(leaves).sum(),
        Value::Array(items) if !items.is_empty() => items.iter().map(leaves).sum(),
        _ => 1,
    }
}

/// A scalar as the text a query string or form carries.
pub(super) fn scalar_text(value: &Value) -> Option<Cow<'_, str>> {
    match value {
        Value::String(s) => Some(Cow::Borrowed(s)),
        Value::Number(n) => Some(Cow::Owned(n.to_string())),
        Value::Bool(b) => Some(Cow::Owned(b.to_string())),
        Value::Null | Value::Array(_) | Value::Object(_) => None,
    }
}
