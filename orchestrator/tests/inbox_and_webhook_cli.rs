//! `af inbox`, `af webhook trigger` and the modes' inputs of `af up` as the command line reads
//! them: every case here is refused before any runtime is reached, so no Docker is needed.

#![allow(
    clippy::expect_used,
    reason = "test helpers fail the test by panicking, like #[test] functions"
)]

use std::path::PathBuf;
use std::process::{Command, Output};

const MANIFEST: &str = r#"version: 1
name: shop
services:
  - name: web
    port: 8080
  - name: admin
    port: 9090
egress:
  rules:
    - host: api.stripe.com
      mode: mock
      webhook_path: /hooks/stripe
"#;

struct Repo {
    dir: PathBuf,
}

impl Repo {
    fn with_manifest(name: &str, text: &str) -> Repo {
        let dir = std::env::temp_dir().join(format!("af-cli-hooks-{name}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("temp dir");
        std::fs::write(dir.join("af.yaml"), text).expect("write manifest");
        Repo { dir }
    }

    fn af(&self, args: &[&str]) -> Output {
        Command::new(env!("CARGO_BIN_EXE_af"))
            .args(args)
            .current_dir(&self.dir)
            .output()
            .expect("af runs")
    }
}

impl Drop for Repo {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn errors(output: &Output) -> serde_json::Value {
    serde_json::from_slice(&output.stdout).expect("stdout is JSON")
}

#[test]
fn a_bad_set_is_af_run_051_with_exit_status_2() {
    let repo = Repo::with_manifest("set", MANIFEST);
    let out = repo.af(&[
        "webhook",
        "trigger",
        "stripe",
        "invoice.paid",
        "--service",
        "web",
        "--set",
        "type.x=1",
        "-o",
        "json",
    ]);
    assert_eq!(out.status.code(), Some(2));
    let doc = errors(&out);
    assert_eq!(doc["errors"][0]["code"], "AF-RUN-051");
    let statement = doc["errors"][0]["statement"].as_str().unwrap_or("");
    assert!(statement.contains("--set type.x=1"), "{statement}");
}

#[test]
fn two_web_services_without_service_are_refused_naming_both() {
    let repo = Repo::with_manifest("two", MANIFEST);
    let out = repo.af(&["webhook", "trigger", "github", "push"]);
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("AF-RUN-051"), "{stderr}");
    assert!(stderr.contains("(web, admin)"), "{stderr}");
    assert!(stderr.contains("Pass --service NAME"), "{stderr}");
}

#[test]
fn unknown_providers_and_durations_are_refused_by_the_parser() {
    let repo = Repo::with_manifest("parse", MANIFEST);
    let out = repo.af(&["webhook", "trigger", "paypal", "x"]);
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("stripe, github and svix"), "{stderr}");
    let out = repo.af(&["inbox", "wait", "--to", "a@b.test", "--timeout", "soon"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--timeout"));
    let out = repo.af(&["inbox", "wait"]);
    assert_eq!(out.status.code(), Some(2), "--to is required");
}

#[test]
fn up_with_a_missing_fixtures_file_is_af_run_052_before_anything_is_made() {
    let manifest = MANIFEST.replace(
        "      webhook_path: /hooks/stripe\n",
        "      fixtures: mocks/stripe.yaml\n",
    );
    let repo = Repo::with_manifest("fixtures", &manifest);
    let out = repo.af(&["up", "--env", "never-made"]);
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("AF-RUN-052 egress rules[0].fixtures names mocks/stripe.yaml"),
        "{stderr}"
    );
    assert!(stderr.contains("Next: Fix rules[0].fixtures"), "{stderr}");
}
