//! What the fuzz targets share: one runtime for the async parsers, and the promises every
//! captured message keeps whatever it was made from.

use std::sync::LazyLock;

use af_proxy::fuzzing::{MAX_BODY_BYTES, Message};

/// One current-thread runtime per fuzzing process (the targets run single-threaded).
pub fn runtime() -> &'static tokio::runtime::Runtime {
    static RUNTIME: LazyLock<tokio::runtime::Runtime> = LazyLock::new(|| {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("a Tokio runtime")
    });
    &RUNTIME
}

/// The marker a cut body ends with (`message::bounded`).
const CUT: &str = "\n[truncated by af]";

/// Panics unless `message` keeps the inbox's promises: bodies within their bound, lines ending
/// in LF, a one-time code of 4 to 8 digits, links that are in a body.
pub fn check_message(message: &Message) {
    assert!(!message.provider.is_empty(), "a message names its provider");
    for body in [&message.text, &message.html].into_iter().flatten() {
        assert!(
            body.len() <= MAX_BODY_BYTES + CUT.len(),
            "a body of {} bytes",
            body.len()
        );
    }
    if let Some(code) = &message.code {
        assert!(
            (4..=8).contains(&code.len()) && code.bytes().all(|b| b.is_ascii_digit()),
            "one-time code {code:?}"
        );
    }
    for link in &message.links {
        assert!(!link.is_empty(), "an empty link");
    }
}

/// A path that `template`'s text describes, each `{name}` filled with `value`
/// (`/v1/customers/{id}` → `/v1/customers/cus_1`).
pub fn concrete_path(template: &str, value: &str) -> String {
    let mut path = String::with_capacity(template.len());
    let mut rest = template;
    while let Some(open) = rest.find('{') {
        let Some(close) = rest[open..].find('}') else {
            break;
        };
        path.push_str(&rest[..open]);
        path.push_str(value);
        rest = &rest[open + close + 1..];
    }
    path.push_str(rest);
    path
}

/// A document as the orchestrator reads a pack or an OpenAPI file (YAML or JSON), or `None`.
pub fn document(bytes: &[u8]) -> Option<serde_json::Value> {
    let text = std::str::from_utf8(bytes).ok()?;
    serde_saphyr::from_str(text).ok()
}

/// Panics unless `answer` is one synth can send: marked with what made it, its JSON body JSON.
pub fn check_synth_answer(answer: &af_proxy::fuzzing::Answer) {
    assert!(
        answer.headers.contains_key(af_proxy::fuzzing::synth::HEADER),
        "a synth answer says what made it"
    );
    let json = answer
        .headers
        .get(http::header::CONTENT_TYPE)
        .is_some_and(|v| v.as_bytes().starts_with(b"application/json"));
    if json && !answer.body.is_empty() {
        assert!(
            serde_json::from_slice::<serde_json::Value>(&answer.body).is_ok(),
            "a JSON answer that is not JSON"
        );
    }
}
