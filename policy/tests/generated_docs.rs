//! `docs/errors.md` and `docs/af.schema.json` are generated; these tests fail while either
//! differs from what the code generates. `AF_BLESS=1 cargo test -p af-policy --test
//! generated_docs` rewrites both.

#![allow(
    clippy::expect_used,
    reason = "test helpers fail the test by panicking, like #[test] functions"
)]

use std::path::PathBuf;

fn docs(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join("docs")
        .join(name)
}

fn assert_generated(name: &str, generated: &str) {
    let path = docs(name);
    if std::env::var_os("AF_BLESS").is_some() {
        std::fs::create_dir_all(path.parent().expect("docs has a parent")).expect("create docs/");
        std::fs::write(&path, generated).expect("write the generated file");
        return;
    }
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        committed == generated,
        "docs/{name} is out of date with the code that generates it; regenerate it with \
         `AF_BLESS=1 cargo test -p af-policy --test generated_docs` and commit the result"
    );
}

#[test]
fn errors_md_is_rendered_from_the_catalogue() {
    assert_generated("errors.md", &af_policy::error::render_markdown());
}

#[test]
fn af_schema_json_is_generated_from_the_manifest_types() {
    let schema = serde_json::to_string_pretty(&af_policy::manifest::json_schema())
        .expect("a schema serializes");
    assert_generated("af.schema.json", &(schema + "\n"));
}
