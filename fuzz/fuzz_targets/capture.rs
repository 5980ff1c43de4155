//! Capture mode's body parsers, every send route of SendGrid, Resend, Postmark, Mailgun,
//! Twilio, SES v1/v2 and Slack, and the generic capture of an exactly named host: any body is
//! answered as the provider would (a 2xx with messages of that provider) or refused with a
//! sentence naming the provider; the same request always gets the same answer; every message
//! keeps the inbox's bounds.
#![no_main]

use std::time::{Duration, SystemTime};

use af_fuzz::check_message;
use af_proxy::fuzzing::Exchange;
use af_proxy::fuzzing::capture_routes::{FORM, JSON, SEND_ROUTES};
use af_proxy::fuzzing::{Captured, Provider, capture};
use http::{HeaderMap, HeaderValue, Method, header};
use libfuzzer_sys::fuzz_target;

/// A host with no provider, captured generically (its rule names it exactly).
const GENERIC: (&str, &str, &str) = ("hooks.crm.example", "/v1/events", JSON);
/// Every send route, then the generic host.
const ROUTE_COUNT: usize = SEND_ROUTES.len() + 1;

fn route_at(route: usize) -> (&'static str, &'static str, &'static str) {
    SEND_ROUTES.get(route).copied().unwrap_or(GENERIC)
}

fn post(route: usize, content_type: &'static str, body: &[u8]) -> Captured {
    let (host, path, _) = route_at(route);
    let mut headers = HeaderMap::new();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    let ex = Exchange {
        method: &Method::POST,
        host,
        path,
        query: None,
        headers: &headers,
        body,
    };
    // Postmark and Twilio stamp their answers with the time: a fixed one.
    let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_438_287_151);
    capture(&ex, true, now)
}

fuzz_target!(|input: &[u8]| {
    let Some((&pick, body)) = input.split_first() else {
        return;
    };
    let route = usize::from(pick & 0x7f) % ROUTE_COUNT;
    // Mostly the route's own content type; sometimes the other one.
    let content_type = match (pick & 0x80 != 0, route_at(route).2) {
        (true, JSON) => FORM,
        (true, _) => JSON,
        (false, own) => own,
    };
    let provider = Provider::for_host(route_at(route).0);
    let captured = post(route, content_type, body);
    match &captured {
        Captured::Messages { answer, messages } => {
            assert!(answer.status.is_success(), "{}", answer.status);
            if answer
                .headers
                .get(header::CONTENT_TYPE)
                .is_some_and(|v| v == JSON)
            {
                assert!(serde_json::from_slice::<serde_json::Value>(&answer.body).is_ok());
            }
            let id = provider.map_or("request", Provider::id);
            for message in messages {
                assert_eq!(message.provider, id);
                check_message(message);
            }
        }
        Captured::Refused(error) => {
            let provider = provider.expect("only a provider's payload is refused");
            let sentence = error.to_string();
            assert!(
                sentence.starts_with(&format!("the {provider} payload")),
                "{sentence}"
            );
        }
        // SES v1 picks the operation from the body and posts every one to `/`.
        Captured::NoHandler => assert_eq!(route_at(route).1, "/", "a send route went unanswered"),
    }
    let again = post(route, content_type, body);
    assert_eq!(
        format!("{captured:?}"),
        format!("{again:?}"),
        "the same request, another answer"
    );
});
