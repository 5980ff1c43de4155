//! `--set a.b.c=value`: change one field of a webhook's payload. Numbers, `true`, `false` and
//! `null` are JSON scalars; anything else is a string. Missing objects on the way are made;
//! a number segment indexes an existing array (`commits.0.message=Fix`).

use serde_json::Value;

use super::WebhookError;

/// Apply one assignment to `doc`.
pub fn apply(doc: &mut Value, assignment: &str) -> Result<(), WebhookError> {
    let bad = |why: String| WebhookError::BadSet {
        assignment: assignment.to_owned(),
        why,
    };
    let (path, text) = assignment
        .split_once('=')
        .ok_or_else(|| bad("expected path=value".to_owned()))?;
    let segments: Vec<&str> = path.split('.').collect();
    if segments.iter().any(|s| s.is_empty()) {
        return Err(bad(format!("{path:?} has an empty segment")));
    }
    let mut here = doc;
    for (depth, segment) in segments.iter().enumerate() {
        let last = depth + 1 == segments.len();
        here = match here {
            Value::Object(map) => {
                if last {
                    map.insert((*segment).to_owned(), scalar(text));
                    return Ok(());
                }
                map.entry(*segment)
                    .or_insert_with(|| Value::Object(serde_json::Map::new()))
            }
            Value::Array(items) => {
                let len = items.len();
                let slot = segment
                    .parse::<usize>()
                    .ok()
                    .and_then(|i| items.get_mut(i))
                    .ok_or_else(|| {
                        bad(format!(
                            "{} is a list of {len}; {segment} is not an index in it",
                            segments[..depth].join(".")
                        ))
                    })?;
                if last {
                    *slot = scalar(text);
                    return Ok(());
                }
                slot
            }
            other => {
                return Err(bad(format!(
                    "{} is {other}, not an object",
                    segments[..depth].join(".")
                )));
            }
        };
    }
    Ok(())
}

/// `text` as a JSON number, boolean or null, else as a string.
pub fn scalar(text: &str) -> Value {
    match serde_json::from_str::<Value>(text) {
        Ok(v @ (Value::Number(_) | Value::Bool(_) | Value::Null)) => v,
        _ => Value::String(text.to_owned()),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn dotted_paths_set_nested_fields_making_objects_on_the_way() {
        let mut doc = json!({"data": {"object": {"amount": 2000, "currency": "usd"}}});
        apply(&mut doc, "data.object.amount=5000").expect("number");
        apply(&mut doc, "data.object.metadata.order_id=ord_42").expect("new objects");
        apply(&mut doc, "data.object.livemode=false").expect("bool");
        apply(&mut doc, "data.object.customer=null").expect("null");
        apply(&mut doc, "data.object.note=a=b").expect("value with =");
        assert_eq!(
            doc,
            json!({"data": {"object": {
                "amount": 5000, "currency": "usd", "livemode": false, "customer": null,
                "metadata": {"order_id": "ord_42"}, "note": "a=b",
            }}})
        );
    }

    #[test]
    fn scalars_are_json_only_for_numbers_booleans_and_null() {
        assert_eq!(scalar("12.5"), json!(12.5));
        assert_eq!(scalar("-3"), json!(-3));
        assert_eq!(scalar("true"), json!(true));
        assert_eq!(scalar("null"), Value::Null);
        assert_eq!(scalar("007x"), json!("007x"));
        assert_eq!(scalar("[1,2]"), json!("[1,2]"), "lists stay text");
        assert_eq!(scalar("\"q\""), json!("\"q\""));
        assert_eq!(scalar(""), json!(""));
    }

    #[test]
    fn arrays_are_indexed_and_bad_assignments_are_refused() {
        let mut doc = json!({"commits": [{"message": "a"}], "ref": "main"});
        apply(&mut doc, "commits.0.message=Fix it").expect("index");
        assert_eq!(doc["commits"][0]["message"], "Fix it");
        for bad in [
            "commits.3.message=x",
            "ref.name=x",
            "no-equals",
            "a..b=1",
            "=1",
        ] {
            let err = apply(&mut doc, bad).expect_err(bad);
            assert_eq!(err.report().code.code, "AF-RUN-051", "{bad}");
        }
        let err = apply(&mut doc, "ref.name=x").expect_err("scalar");
        assert!(
            err.to_string().contains("ref is \"main\", not an object"),
            "{err}"
        );
    }
}
