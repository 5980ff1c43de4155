//! Finding and reading a manifest that is right.

mod common;

use std::path::Path;

use af_policy::manifest::{MAX_MANIFEST_BYTES, Manifest, ManifestError, ServiceKind};
use af_policy::placement::Provider;
use common::{FULL, load};

#[test]
fn a_full_manifest_is_read_with_every_field() {
    let manifest = load(FULL).expect("the full manifest is valid");
    assert_eq!(manifest.name, "shop");
    let api = &manifest.services[1];
    assert_eq!(api.name, "api");
    assert_eq!(api.command, ["bin/server", "--port", "8080"]);
    assert_eq!(api.port, Some(8080));
    assert_eq!(api.health_timeout, Some(30));
    assert_eq!(api.env["LOG_LEVEL"], "debug");
    assert_eq!(api.resources.memory.as_deref(), Some("512Mi"));
    assert_eq!(api.depends_on, ["db"]);
    assert_eq!(api.migrate, ["bin/migrate", "up"]);
    assert_eq!(manifest.services[0].path, "./db");
    assert_eq!(manifest.services[2].kind, ServiceKind::Cron);
    assert_eq!(manifest.services[2].path, ".");
    assert_eq!(manifest.egress.rules.len(), 2);
    let placement = manifest.placement().expect("places");
    assert_eq!(placement.target.as_deref(), Some("frankfurt"));
    assert_eq!(placement.provider, Provider::Kubernetes);
}

#[test]
fn a_full_manifest_round_trips_through_yaml() {
    let manifest = load(FULL).expect("valid");
    let written = serde_saphyr::to_string(&manifest).expect("serializes");
    assert_eq!(load(&written).expect("reads back"), manifest);
}

#[test]
fn a_minimal_manifest_needs_only_version_and_name() {
    let manifest = load("version: 1\nname: shop\n").expect("valid");
    assert!(manifest.services.is_empty());
    let placement = manifest.placement().expect("places");
    assert_eq!(placement.provider, Provider::Local);
    assert_eq!(placement.target, None);
}

#[test]
fn discovery_walks_up_from_a_subdirectory_to_the_manifest() {
    let repo = tempfile::tempdir().expect("temp dir");
    std::fs::write(repo.path().join("af.yaml"), FULL).expect("write");
    let deep = repo.path().join("src").join("api").join("handlers");
    std::fs::create_dir_all(&deep).expect("mkdir");
    let (path, manifest) = Manifest::discover(&deep).expect("found");
    assert_eq!(path, repo.path().join("af.yaml"));
    assert_eq!(manifest.name, "shop");
}

#[test]
fn discovery_takes_the_nearest_manifest() {
    let repo = tempfile::tempdir().expect("temp dir");
    std::fs::write(repo.path().join("af.yaml"), FULL).expect("write");
    let inner = repo.path().join("inner");
    std::fs::create_dir_all(inner.join("deeper")).expect("mkdir");
    std::fs::write(inner.join("af.yaml"), "version: 1\nname: inner\n").expect("write");
    let (path, manifest) = Manifest::discover(&inner.join("deeper")).expect("found");
    assert_eq!(path, inner.join("af.yaml"));
    assert_eq!(manifest.name, "inner");
}

#[test]
fn discovery_without_a_manifest_anywhere_above_is_af_man_001() {
    let empty = tempfile::tempdir().expect("temp dir");
    match Manifest::discover(empty.path()) {
        Err(error @ ManifestError::NotFound { .. }) => {
            assert_eq!(error.reports()[0].code.code, "AF-MAN-001");
            assert_eq!(error.exit_status().code(), 2);
        }
        // A manifest above the temporary directory belongs to the machine, not to this test.
        Ok((path, _)) => assert!(!path.starts_with(empty.path())),
        Err(other) => panic!("unexpected {other}"),
    }
}

#[test]
fn discovery_reports_problems_with_the_path_it_found() {
    let repo = tempfile::tempdir().expect("temp dir");
    std::fs::write(
        repo.path().join("af.yaml"),
        "version: 1\nname: shop\nsevices: []\n",
    )
    .expect("write");
    let error = Manifest::discover(repo.path()).expect_err("refused");
    let shown = error.to_string();
    assert!(shown.starts_with(&format!(
        "{}:3:1: AF-MAN-006",
        repo.path().join("af.yaml").display()
    )));
}

#[test]
fn a_manifest_over_one_mib_is_refused_before_it_is_parsed() {
    let repo = tempfile::tempdir().expect("temp dir");
    let path = repo.path().join("af.yaml");
    // Not YAML at all: a parse would report a syntax error instead.
    let oversized = "[".repeat(usize::try_from(MAX_MANIFEST_BYTES).expect("fits") + 1);
    std::fs::write(&path, &oversized).expect("write");
    let error = Manifest::from_path(&path).expect_err("too large");
    assert!(
        matches!(error, ManifestError::TooLarge { bytes, .. } if bytes == MAX_MANIFEST_BYTES + 1)
    );
    assert_eq!(error.reports()[0].code.code, "AF-MAN-003");
    assert!(matches!(
        Manifest::from_str(&oversized, Path::new("af.yaml")),
        Err(ManifestError::TooLarge { .. })
    ));
}

#[test]
fn a_manifest_of_exactly_one_mib_is_read() {
    let head = "version: 1\nname: shop\n#";
    let padding = usize::try_from(MAX_MANIFEST_BYTES).expect("fits") - head.len() - 1;
    let text = format!("{head}{}\n", "x".repeat(padding));
    assert_eq!(text.len() as u64, MAX_MANIFEST_BYTES);
    assert!(load(&text).is_ok());
}

#[test]
fn an_unreadable_manifest_is_af_man_002() {
    let repo = tempfile::tempdir().expect("temp dir");
    let error = Manifest::from_path(&repo.path().join("missing.yaml")).expect_err("no file");
    assert!(matches!(error, ManifestError::Unreadable { .. }));
    assert_eq!(error.reports()[0].code.code, "AF-MAN-002");
}

#[test]
fn the_schema_names_every_key_the_reader_accepts() {
    let schema = af_policy::manifest::json_schema();
    let service = &schema["$defs"]["Service"]["properties"];
    for key in [
        "name",
        "path",
        "dockerfile",
        "command",
        "port",
        "health_path",
        "health_timeout",
        "env",
        "replicas",
        "resources",
        "depends_on",
        "migrate",
        "kind",
        "schedule",
    ] {
        assert!(service.get(key).is_some(), "{key}");
    }
    assert_eq!(schema["additionalProperties"], false);
}
