//! Reading a manifest never panics, whatever it is given: arbitrary bytes, YAML punctuation
//! soup, and structures generated from the manifest's own schema with mistakes mixed in.
//! Whatever is accepted round-trips; whatever is refused comes with sorted, positioned problems.

#![allow(
    clippy::expect_used,
    reason = "test helpers fail the test by panicking, like #[test] functions"
)]

mod common;

use std::path::Path;

use af_policy::manifest::{Manifest, ManifestError};
use proptest::prelude::*;
use proptest::strategy::Union;
use serde_json::{Map, Value as Json};

/// Strings that mean something somewhere in a manifest, and some that are near misses.
const WORDS: &[&str] = &[
    "api",
    "db",
    "worker",
    "web",
    "cron",
    "Api",
    "a_b",
    "frankfurt",
    "eu-prod",
    "eu-west-1",
    "ecs",
    "kubernetes",
    "local",
    "nomad",
    "localhost",
    "app.localhost",
    "*.example.com",
    "api.example.com",
    "10/s",
    "/healthz",
    "healthz",
    "0 3 * * *",
    "500m",
    "1Gi",
    "allow",
    "block",
    "mock",
    "sevices",
    "helth_path",
    "",
    "-",
    "1",
];

fn word() -> impl Strategy<Value = String> {
    prop::sample::select(WORDS).prop_map(str::to_owned)
}

/// Any scalar, of any type.
fn wild() -> BoxedStrategy<Json> {
    prop_oneof![
        Just(Json::Null),
        any::<bool>().prop_map(Json::Bool),
        any::<i64>().prop_map(Json::from),
        (-2i64..70_000).prop_map(Json::from),
        any::<f64>().prop_map(|f| serde_json::Number::from_f64(f).map_or(Json::Null, Json::Number)),
        word().prop_map(Json::String),
        "\\PC{0,12}".prop_map(Json::String),
    ]
    .boxed()
}

fn resolve<'s>(schema: &'s Json, defs: &'s Map<String, Json>) -> &'s Json {
    match schema
        .get("$ref")
        .and_then(Json::as_str)
        .and_then(|r| r.strip_prefix("#/$defs/"))
        .and_then(|name| defs.get(name))
    {
        Some(target) => resolve(target, defs),
        None => schema,
    }
}

/// Values shaped by `schema`, each node now and then replaced by a wild scalar and each
/// mapping now and then given a key that does not belong.
fn shaped(schema: &Json, defs: &Map<String, Json>) -> BoxedStrategy<Json> {
    let s = resolve(schema, defs);
    let conforming: BoxedStrategy<Json> = if let Some(c) = s.get("const") {
        Just(c.clone()).boxed()
    } else if let Some(branches) = s
        .get("anyOf")
        .or_else(|| s.get("oneOf"))
        .and_then(Json::as_array)
    {
        Union::new(branches.iter().map(|b| shaped(b, defs))).boxed()
    } else {
        let first_type = match s.get("type") {
            Some(Json::Array(types)) => types.first().and_then(Json::as_str),
            Some(t) => t.as_str(),
            None => None,
        };
        match first_type {
            Some("object") => object(s, defs),
            Some("array") => {
                let items = s.get("items").map_or_else(wild, |i| shaped(i, defs));
                prop::collection::vec(items, 0..4)
                    .prop_map(Json::Array)
                    .boxed()
            }
            Some("string") => word().prop_map(Json::String).boxed(),
            Some("integer") => prop_oneof![0i64..3, 1i64..100, 65_530i64..65_540]
                .prop_map(Json::from)
                .boxed(),
            Some("boolean") => any::<bool>().prop_map(Json::Bool).boxed(),
            _ => wild(),
        }
    };
    prop_oneof![12 => conforming, 1 => wild()].boxed()
}

fn object(s: &Json, defs: &Map<String, Json>) -> BoxedStrategy<Json> {
    let required: Vec<&str> = s
        .get("required")
        .and_then(Json::as_array)
        .map(|r| r.iter().filter_map(Json::as_str).collect())
        .unwrap_or_default();
    let fields: Vec<BoxedStrategy<Option<(String, Json)>>> = s
        .get("properties")
        .and_then(Json::as_object)
        .into_iter()
        .flatten()
        .map(|(key, property)| {
            let key = key.clone();
            let weight = if required.contains(&key.as_str()) {
                0.95
            } else {
                0.5
            };
            prop::option::weighted(
                weight,
                shaped(property, defs).prop_map(move |v| (key.clone(), v)),
            )
            .boxed()
        })
        .collect();
    let additional = match s.get("additionalProperties") {
        Some(schema) if schema.is_object() => shaped(schema, defs),
        _ => wild(),
    };
    let extra = prop::collection::vec((word(), additional), 0..2);
    (fields, extra)
        .prop_map(|(fields, extra)| {
            let mut map: Map<String, Json> = fields.into_iter().flatten().collect();
            map.extend(extra);
            Json::Object(map)
        })
        .boxed()
}

fn manifests() -> BoxedStrategy<Json> {
    let schema = af_policy::manifest::json_schema();
    let defs = schema
        .get("$defs")
        .and_then(Json::as_object)
        .cloned()
        .unwrap_or_default();
    shaped(&schema, &defs)
}

/// Whatever reading `text` answers, it must be coherent.
fn read_coherently(text: &str) -> Result<(), TestCaseError> {
    match Manifest::from_str(text, Path::new("af.yaml")) {
        Ok(manifest) => {
            prop_assert!(manifest.placement().is_ok(), "an accepted manifest places");
            let written =
                serde_saphyr::to_string(&manifest).expect("an accepted manifest serializes");
            let again = common::load(&written);
            prop_assert_eq!(again.ok(), Some(manifest), "round trip of {}", written);
        }
        Err(ManifestError::Invalid { problems, .. }) => {
            prop_assert!(!problems.is_empty());
            prop_assert!(problems.windows(2).all(|w| w[0].location <= w[1].location));
            let lines = text.lines().count().max(1) + 1;
            for problem in &problems {
                prop_assert!(problem.location.line >= 1 && problem.location.line <= lines);
                prop_assert!(problem.location.column >= 1);
                prop_assert!(!problem.report.statement.is_empty());
                // The shape check and deserialization are derived from the same types.
                prop_assert!(
                    !problem.report.next.contains("bug in af"),
                    "shape check and types disagree: {}",
                    problem.report
                );
            }
        }
        Err(other) => prop_assert!(matches!(other, ManifestError::TooLarge { .. }), "{other}"),
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn arbitrary_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..600)) {
        let _ = Manifest::from_bytes(&bytes, Path::new("af.yaml"));
    }

    #[test]
    fn yaml_punctuation_soup_is_read_coherently(text in "[-:{}\\[\\],&*!|>'\"#%@? \n\ta-z0-9]{0,300}") {
        read_coherently(&text)?;
    }

    #[test]
    fn structures_built_from_the_known_keys_are_read_coherently(value in manifests()) {
        read_coherently(&serde_json::to_string(&value).expect("json"))?;
        if let Ok(block) = serde_saphyr::to_string(&value) {
            read_coherently(&block)?;
        }
    }
}

#[test]
fn the_generator_reaches_accepted_manifests() {
    use proptest::strategy::ValueTree;
    use proptest::test_runner::TestRunner;
    let strategy = manifests();
    let mut runner = TestRunner::deterministic();
    let accepted = (0..2000)
        .filter(|_| {
            let value = strategy.new_tree(&mut runner).expect("a value").current();
            common::load(&serde_json::to_string(&value).expect("json")).is_ok()
        })
        .count();
    assert!(
        accepted > 0,
        "the generator never produced a valid manifest"
    );
}
