//! Mock mode: answer from the rule's fixture pack; a miss says what to paste into the pack.

use http::header::HeaderName;
use http::{HeaderValue, StatusCode};
use serde::Serialize;

use super::pack::{self, Pack, Skeleton};
use super::{Answer, Exchange};

/// Header saying whether a fixture answered (`hit`) or not (`miss`).
pub(crate) const HEADER: &str = "x-af-mock";

/// Answer `ex` from `pack`: the most specific route's answer, or a 404 with a skeleton route.
pub(crate) fn answer(pack: Option<&Pack>, ex: &Exchange<'_>) -> Answer {
    match pack.and_then(|p| p.find(ex)) {
        Some(hit) => marked(hit.answer(), HEADER, "hit"),
        None => marked(
            miss(
                pack,
                ex,
                "no route of the fixture pack matches this request",
            ),
            HEADER,
            "miss",
        ),
    }
}

/// The body of a miss, in the order people read it.
#[derive(Serialize)]
struct Miss<'a> {
    error: &'a str,
    asked: Asked<'a>,
    pack: Option<&'a str>,
    next: String,
    route: &'a Skeleton,
    route_yaml: Option<String>,
}

/// What the service asked.
#[derive(Serialize)]
struct Asked<'a> {
    method: &'a str,
    host: &'a str,
    path: &'a str,
    query: Option<&'a str>,
}

/// A 404 naming what was asked and why, with a route (as JSON and as YAML) that would answer it.
pub(super) fn miss(pack: Option<&Pack>, ex: &Exchange<'_>, why: &str) -> Answer {
    let route = pack::skeleton(ex);
    let next = match pack {
        Some(p) => format!(
            "Add the route below to the fixture pack {:?} (under `routes:`), then run `af up` again.",
            p.name()
        ),
        None => "Write a fixture pack with the route below and name it in the rule's `fixtures`, \
                 then run `af up` again."
            .to_owned(),
    };
    let body = Miss {
        error: why,
        asked: Asked {
            method: ex.method.as_str(),
            host: ex.host,
            path: ex.path,
            query: ex.query,
        },
        pack: pack.map(Pack::name),
        next,
        route: &route,
        route_yaml: serde_saphyr::to_string(&[&route]).ok(),
    };
    let json = serde_json::to_vec(&body).unwrap_or_default();
    Answer::new(StatusCode::NOT_FOUND, "application/json", json)
}

/// `answer` with the header `name: value` added.
pub(super) fn marked(mut answer: Answer, name: &'static str, value: &'static str) -> Answer {
    answer.headers.insert(
        HeaderName::from_static(name),
        HeaderValue::from_static(value),
    );
    answer
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::*;
    use crate::answer::modes::pack::testing::Request;

    fn demo_pack() -> Pack {
        Pack::from_value(
            "mocks/shop.yaml",
            &json!({"name": "shop", "routes": [
                {"method": "GET", "path": "/orders/{id}", "headers": {"x-shop": "1"},
                 "json": {"id": "{id}", "state": "paid"}},
            ]}),
        )
        .expect("a valid pack")
    }

    fn body(answer: &Answer) -> Value {
        serde_json::from_slice(&answer.body).expect("a JSON body")
    }

    #[test]
    fn hit_answers_the_route_and_says_hit() {
        let pack = demo_pack();
        let request = Request::new("GET", "shop.example.com", "/orders/o_42");
        let answer = answer(Some(&pack), &request.exchange());
        assert_eq!(answer.status, StatusCode::OK);
        assert_eq!(answer.headers[HEADER], "hit");
        assert_eq!(answer.headers["x-shop"], "1");
        assert_eq!(body(&answer), json!({"id": "o_42", "state": "paid"}));
    }

    #[test]
    fn miss_is_404_naming_the_request_with_a_skeleton_that_parses_back_and_answers_it() {
        let pack = demo_pack();
        let request = Request::new("POST", "shop.example.com", "/orders?dry_run=1");
        let answer = answer(Some(&pack), &request.exchange());
        assert_eq!(answer.status, StatusCode::NOT_FOUND);
        assert_eq!(answer.headers[HEADER], "miss");
        let miss = body(&answer);
        assert_eq!(
            miss["asked"],
            json!({"method": "POST", "host": "shop.example.com", "path": "/orders", "query": "dry_run=1"})
        );
        assert_eq!(miss["pack"], "shop");
        assert!(
            miss["next"]
                .as_str()
                .is_some_and(|n| n.contains("\"shop\""))
        );

        let from_json = Pack::from_value("pasted", &json!([miss["route"]])).expect("route parses");
        let yaml = miss["route_yaml"].as_str().expect("a YAML route");
        let from_yaml: Value = serde_saphyr::from_str(yaml).expect("route YAML parses");
        let from_yaml = Pack::from_value("pasted", &from_yaml).expect("route YAML is a pack");
        for pasted in [from_json, from_yaml] {
            let answered = super::answer(Some(&pasted), &request.exchange());
            assert_eq!(answered.status, StatusCode::OK);
            assert_eq!(answered.headers[HEADER], "hit");
        }
    }

    #[test]
    fn no_pack_is_a_miss_that_says_to_write_one() {
        let request = Request::new("GET", "api.example.com", "/v1/things");
        let answer = answer(None, &request.exchange());
        assert_eq!(answer.status, StatusCode::NOT_FOUND);
        assert_eq!(answer.headers[HEADER], "miss");
        let miss = body(&answer);
        assert_eq!(miss["pack"], Value::Null);
        assert!(
            miss["next"]
                .as_str()
                .is_some_and(|n| n.contains("`fixtures`"))
        );
        assert_eq!(miss["route"]["method"], "GET");
        assert_eq!(miss["route"]["path"], "/v1/things");
    }
}
