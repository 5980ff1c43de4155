//! OpenAPI loading and synth's answers from it: any document is a description or a refusal;
//! for an accepted one, a request to each path it lists (each method) gets a well-formed synth
//! answer, the same one every time.
#![no_main]

use af_fuzz::{check_synth_answer, concrete_path, document};
use af_proxy::fuzzing::Exchange;
use af_proxy::fuzzing::{OpenApi, synth};
use http::{HeaderMap, Method};
use libfuzzer_sys::fuzz_target;

const METHODS: [Method; 4] = [Method::GET, Method::POST, Method::PUT, Method::DELETE];

fuzz_target!(|bytes: &[u8]| {
    let Some(doc) = document(bytes) else {
        return;
    };
    let Ok(openapi) = OpenApi::from_value("openapi.yaml", &doc) else {
        return;
    };
    let headers = HeaderMap::new();
    let paths = doc
        .get("paths")
        .and_then(|p| p.as_object())
        .into_iter()
        .flatten();
    for (template, _) in paths {
        let path = concrete_path(template, "v1");
        for method in &METHODS {
            let ex = Exchange {
                method,
                host: "api.fuzz.test",
                path: &path,
                query: Some("limit=2"),
                headers: &headers,
                body: b"{\"name\":\"fuzz\"}",
            };
            let _ = openapi.response_schema(&ex);
            let answer = synth::answer(Some(&openapi), None, &ex);
            check_synth_answer(&answer);
            assert_eq!(
                answer,
                synth::answer(Some(&openapi), None, &ex),
                "synth is deterministic"
            );
        }
    }
});
