//! `docs/sidecar.schema.json` is generated from the configuration types; this test fails while
//! the committed file differs. `AF_BLESS=1 cargo test -p af-sidecar-api --test generated_docs`
//! rewrites it.

use std::path::PathBuf;

#[test]
fn sidecar_schema_json_is_generated_from_the_configuration_types() {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join("docs")
        .join("sidecar.schema.json");
    let generated = serde_json::to_string_pretty(&af_sidecar_api::config::json_schema())
        .expect("a schema serializes")
        + "\n";
    if std::env::var_os("AF_BLESS").is_some() {
        std::fs::write(&path, &generated).expect("write the generated file");
        return;
    }
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        committed == generated,
        "docs/sidecar.schema.json is out of date with the configuration types; regenerate it with \
         `AF_BLESS=1 cargo test -p af-sidecar-api --test generated_docs` and commit the result"
    );
}

/// Every key of the document, dotted (`listeners.dns.listen`): the leaves of the schema, with
/// `egress` left whole (it is the manifest's section, documented with it).
fn keys(schema: &serde_json::Value) -> Vec<String> {
    fn resolve<'a>(defs: &'a serde_json::Value, s: &'a serde_json::Value) -> &'a serde_json::Value {
        if let Some(name) = s["$ref"].as_str().and_then(|r| r.rsplit('/').next()) {
            return resolve(defs, &defs[name]);
        }
        match s["anyOf"].as_array() {
            Some(alternatives) => alternatives
                .iter()
                .find(|a| a["type"] != "null")
                .map_or(s, |a| resolve(defs, a)),
            None => s,
        }
    }
    fn walk(defs: &serde_json::Value, s: &serde_json::Value, prefix: &str, out: &mut Vec<String>) {
        let s = resolve(defs, s);
        match s["properties"].as_object() {
            Some(properties) if prefix != "egress" => {
                for (name, property) in properties {
                    let key = if prefix.is_empty() {
                        name.clone()
                    } else {
                        format!("{prefix}.{name}")
                    };
                    walk(defs, property, &key, out);
                }
            }
            _ => out.push(prefix.to_owned()),
        }
    }
    let mut out = Vec::new();
    walk(&schema["$defs"], schema, "", &mut out);
    out
}

#[test]
fn every_key_of_the_document_is_in_sidecar_config_md() {
    let keys = keys(&af_sidecar_api::config::json_schema());
    // The walk reaches the leaves (a control: an empty walk would pass anything).
    for known in [
        "version",
        "egress",
        "listeners.dns.seen_capacity",
        "modes.model.api_key",
    ] {
        assert!(keys.iter().any(|k| k == known), "{known}: {keys:?}");
    }
    let page = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join("docs")
        .join("sidecar-config.md");
    let page = std::fs::read_to_string(page).expect("docs/sidecar-config.md");
    let missing: Vec<&String> = keys
        .iter()
        .filter(|k| !page.contains(&format!("`{k}`")))
        .collect();
    assert!(
        missing.is_empty(),
        "docs/sidecar-config.md does not document {missing:?}"
    );
}
