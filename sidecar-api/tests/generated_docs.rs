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
