//! Test helpers: a request as an SDK sends it, and the capture's parts.

use std::time::{Duration, SystemTime};

use http::{HeaderMap, HeaderValue, Method, header};
use serde_json::Value;

use super::{Answer, Captured, Exchange, capture};
use crate::record::message::Message;

/// The clock the tests capture at: Thu, 30 Jul 2015 20:12:31 UTC.
pub(super) fn now() -> SystemTime {
    SystemTime::UNIX_EPOCH + Duration::from_secs(1_438_287_151)
}

/// Capture a request; `named_exactly` says whether its rule names the host exactly.
pub(super) fn request(
    method: Method,
    host: &str,
    path: &str,
    content_type: &'static str,
    body: &[u8],
    named_exactly: bool,
) -> Captured {
    let mut headers = HeaderMap::new();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    let ex = Exchange {
        method: &method,
        host,
        path,
        query: None,
        headers: &headers,
        body,
    };
    capture(&ex, named_exactly, now())
}

/// A POST with `content_type` and `body` to a host its rule names exactly.
pub(super) fn post(host: &str, path: &str, content_type: &'static str, body: &[u8]) -> Captured {
    request(Method::POST, host, path, content_type, body, true)
}

/// A JSON POST.
pub(super) fn post_json(host: &str, path: &str, payload: &Value) -> Captured {
    post(
        host,
        path,
        "application/json",
        payload.to_string().as_bytes(),
    )
}

/// A URL-encoded form POST, encoded as the SDKs encode it.
pub(super) fn post_form(host: &str, path: &str, fields: &[(&str, &str)]) -> Captured {
    let body = serde_urlencoded::to_string(fields).expect("encodable");
    post(
        host,
        path,
        "application/x-www-form-urlencoded; charset=utf-8",
        body.as_bytes(),
    )
}

/// The answer and messages of a capture that succeeded.
pub(super) fn sent(captured: Captured) -> (Answer, Vec<Message>) {
    match captured {
        Captured::Messages { answer, messages } => (answer, messages),
        Captured::Refused(error) => panic!("refused: {error}"),
        Captured::NoHandler => panic!("no handler"),
    }
}

/// The sentence of a refused capture.
pub(super) fn refusal(captured: Captured) -> String {
    match captured {
        Captured::Refused(error) => error.to_string(),
        other => panic!("not refused: {other:?}"),
    }
}

/// The body of a JSON answer (which must say it is JSON).
pub(super) fn json_body(answer: &Answer) -> Value {
    assert_eq!(answer.headers[header::CONTENT_TYPE], "application/json");
    serde_json::from_slice(&answer.body).expect("JSON answer")
}
