//! Property tests: whatever a service posts to a send route, capture answers (a provider
//! success or a coded refusal) and never panics. Bodies are arbitrary bytes, arbitrary JSON
//! values and arbitrary form fields, in each route's own content type. SES v1 is the one API
//! that picks the operation from the body (`Action`), so for it "no handler" (an operation
//! that sends nothing) is an answer too.

use proptest::prelude::*;
use serde_json::Value;

use super::routes::SEND_ROUTES as ROUTES;
use super::testing::post;
use super::{Captured, Provider};

/// Route `route`'s answer is a success, or a refusal that names the provider whose payload
/// it is not; "no handler" only where the body names the operation.
fn answered(route: usize, captured: &Captured) -> bool {
    let provider = Provider::for_host(ROUTES[route].0).map(|p| p.to_string());
    match captured {
        Captured::Messages { answer, .. } => answer.status.is_success(),
        Captured::Refused(error) => {
            provider.is_some_and(|p| error.to_string().starts_with(&format!("the {p} payload")))
        }
        // SES v1 posts every operation to `/`.
        Captured::NoHandler => ROUTES[route].1 == "/",
    }
}

fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        ".{0,40}".prop_map(Value::String),
        "[a-z]{1,8}@[a-z]{1,8}\\.test".prop_map(Value::String),
    ];
    leaf.prop_recursive(4, 48, 6, |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            proptest::collection::btree_map(
                prop_oneof![
                    Just("to".to_owned()),
                    Just("from".to_owned()),
                    Just("personalizations".to_owned()),
                    Just("content".to_owned()),
                    Just("Content".to_owned()),
                    Just("Destination".to_owned()),
                    Just("text".to_owned()),
                    Just("html".to_owned()),
                    Just("subject".to_owned()),
                    "[A-Za-z]{1,10}",
                ],
                inner,
                0..6
            )
            .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn arbitrary_bytes_are_answered_or_refused(route in 0..ROUTES.len(), body in proptest::collection::vec(any::<u8>(), 0..512)) {
        let (host, path, content_type) = ROUTES[route];
        prop_assert!(answered(route, &post(host, path, content_type, &body)));
    }

    #[test]
    fn arbitrary_json_is_answered_or_refused(route in 0..ROUTES.len(), value in json_value()) {
        let (host, path, content_type) = ROUTES[route];
        prop_assert!(answered(route, &post(host, path, content_type, value.to_string().as_bytes())));
    }

    #[test]
    fn arbitrary_form_fields_are_answered_or_refused(
        route in 0..ROUTES.len(),
        fields in proptest::collection::vec(
            (
                prop_oneof![
                    Just("to".to_owned()), Just("from".to_owned()), Just("To".to_owned()),
                    Just("From".to_owned()), Just("Body".to_owned()), Just("message".to_owned()),
                    Just("Action".to_owned()), Just("RawMessage.Data".to_owned()),
                    Just("Destination.ToAddresses.member.1".to_owned()), "[A-Za-z.]{1,12}",
                ],
                prop_oneof![Just("SendEmail".to_owned()), Just("SendRawEmail".to_owned()), ".{0,40}"],
            ),
            0..8,
        ),
    ) {
        let (host, path, content_type) = ROUTES[route];
        let body = serde_urlencoded::to_string(&fields).unwrap_or_default();
        prop_assert!(answered(route, &post(host, path, content_type, body.as_bytes())));
    }
}
