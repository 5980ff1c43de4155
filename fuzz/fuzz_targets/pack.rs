//! Fixture packs as mock and synth read them: any document is a pack or a refusal; an accepted
//! pack's path templates read back as written, every route without query or body constraints
//! answers a request made from its own template (or a route that outranks it does), with the
//! route's status; synth's reshaped answer from the pack is deterministic and well formed.
#![no_main]

use af_fuzz::{check_synth_answer, concrete_path, document};
use af_proxy::fuzzing::Exchange;
use af_proxy::fuzzing::{Pack, PathTemplate};
use af_proxy::fuzzing::synth;
use http::HeaderMap;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|bytes: &[u8]| {
    let Some(doc) = document(bytes) else {
        return;
    };
    let Ok(pack) = Pack::from_value("fuzz.yaml", &doc) else {
        return;
    };
    let headers = HeaderMap::new();
    for route in pack.routes() {
        let template = route.path();
        assert_eq!(
            PathTemplate::parse(&template.to_string()).as_ref(),
            Ok(template),
            "a template reads back as written"
        );
        if !route.query().is_empty() || route.body().is_some() {
            continue;
        }
        let path = concrete_path(&template.to_string(), "v1");
        let ex = Exchange {
            method: route.method(),
            host: "api.fuzz.test",
            path: &path,
            query: None,
            headers: &headers,
            body: b"",
        };
        let hit = pack
            .find(&ex)
            .unwrap_or_else(|| panic!("{} {path} is not answered by {template}", route.method()));
        assert_eq!(hit.route().method(), route.method());
        assert!(
            hit.route().path().outranks(template).is_ge(),
            "a lesser route won"
        );
        assert_eq!(hit.answer().status, hit.route().status());
        let answer = synth::answer(None, Some(&pack), &ex);
        check_synth_answer(&answer);
        assert_eq!(
            answer,
            synth::answer(None, Some(&pack), &ex),
            "synth is deterministic"
        );
    }
});
