//! `af validate`, `af net policy` and `af net explain` work with no runtime at all.

#![allow(
    clippy::expect_used,
    reason = "test helpers fail the test by panicking, like #[test] functions"
)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

const MANIFEST: &str = r#"version: 1
name: shop
services:
  - name: web
    port: 8080
    depends_on: [worker]
  - name: worker
    kind: worker
egress:
  rules:
    - host: "*.stripe.com"
      mode: sandbox
    - host: api.stripe.com
      mode: allow
      paths: [/v1/charges]
    - host: "*"
      mode: block
"#;

struct Repo {
    dir: PathBuf,
}

impl Repo {
    fn with_manifest(name: &str, text: &str) -> Repo {
        let dir = std::env::temp_dir().join(format!("af-cli-{name}-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("nested/deeper")).expect("temp dir");
        std::fs::write(dir.join("af.yaml"), text).expect("write manifest");
        Repo { dir }
    }

    fn af(&self, cwd: &Path, args: &[&str]) -> Output {
        Command::new(env!("CARGO_BIN_EXE_af"))
            .args(args)
            .current_dir(cwd)
            .output()
            .expect("af runs")
    }
}

impl Drop for Repo {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn json(output: &Output) -> serde_json::Value {
    serde_json::from_slice(&output.stdout).expect("stdout is JSON")
}

#[test]
fn validate_finds_the_manifest_from_a_subdirectory_and_reports_it() {
    let repo = Repo::with_manifest("valid", MANIFEST);
    let out = repo.af(&repo.dir.join("nested/deeper"), &["validate", "-o", "json"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let doc = json(&out);
    assert_eq!(doc["valid"], true);
    assert_eq!(doc["services"], serde_json::json!(["web", "worker"]));
    assert_eq!(doc["placement"]["provider"], "local");
}

#[test]
fn validate_refuses_with_codes_positions_and_exit_status_2() {
    let bad = MANIFEST.replace("kind: worker", "kind: worker\n    helth_path: /x");
    let repo = Repo::with_manifest("invalid", &bad);
    let out = repo.af(&repo.dir, &["validate"]);
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("af.yaml:9:5: AF-MAN-006"), "{stderr}");
    assert!(stderr.contains("did you mean health_path?"), "{stderr}");
    assert!(stderr.contains("Next: "), "{stderr}");

    let out = repo.af(&repo.dir, &["validate", "-o", "json"]);
    let doc = json(&out);
    assert_eq!(doc["errors"][0]["code"], "AF-MAN-006");
    assert_eq!(doc["errors"][0]["line"], 9);
}

#[test]
fn missing_manifest_is_af_man_001() {
    let dir = std::env::temp_dir().join(format!("af-cli-none-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let out = Command::new(env!("CARGO_BIN_EXE_af"))
        .args(["net", "policy", "--file"])
        .arg(dir.join("af.yaml"))
        .output()
        .expect("af runs");
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("AF-MAN-002"));
}

#[test]
fn net_policy_lists_rules_most_specific_first() {
    let repo = Repo::with_manifest("policy", MANIFEST);
    let out = repo.af(&repo.dir, &["net", "policy", "-o", "json"]);
    assert!(out.status.success());
    let doc = json(&out);
    let order: Vec<_> = doc["rules"]
        .as_array()
        .expect("rules")
        .iter()
        .map(|r| r["rule"].as_str().expect("rule").to_owned())
        .collect();
    assert_eq!(order, ["rules[1]", "rules[0]", "rules[2]"]);
    assert_eq!(doc["default"], "block");
}

#[test]
fn net_explain_names_the_winner_and_every_match() {
    let repo = Repo::with_manifest("explain", MANIFEST);
    let out = repo.af(
        &repo.dir,
        &[
            "net",
            "explain",
            "GET",
            "https://API.stripe.com/v1/charges/ch_1",
            "-o",
            "json",
        ],
    );
    assert!(out.status.success());
    let doc = json(&out);
    assert_eq!(doc["mode"], "allow");
    assert_eq!(doc["rule"], "rules[1] api.stripe.com");
    assert_eq!(doc["matched"].as_array().map(Vec::len), Some(3));

    let out = repo.af(
        &repo.dir,
        &["net", "explain", "GET", "https://dashboard.stripe.com/"],
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("sandbox"), "{text}");

    let out = repo.af(&repo.dir, &["net", "explain", "GET", "not a url"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("AF-NET-031"));
}

/// `af` run with `args` anywhere: these commands read no manifest.
fn af_anywhere(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_af"))
        .args(args)
        .output()
        .expect("af runs")
}

#[test]
fn completions_for_bash_zsh_and_fish_name_the_subcommands() {
    for shell in ["bash", "zsh", "fish"] {
        let out = af_anywhere(&["completions", shell]);
        assert_eq!(out.status.code(), Some(0), "{shell}");
        let script = String::from_utf8_lossy(&out.stdout);
        for command in ["up", "down", "inbox", "suggest", "completions"] {
            assert!(script.contains(command), "{shell} completes {command}");
        }
    }
    // The control: a shell clap_complete does not know is refused by the parser.
    let out = af_anywhere(&["completions", "tcsh"]);
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn the_man_page_is_roff_listing_every_command() {
    let out = af_anywhere(&["man"]);
    assert_eq!(out.status.code(), Some(0));
    let page = String::from_utf8_lossy(&out.stdout);
    assert!(
        page.starts_with(".ie \\n(.g .ds Aq"),
        "roff: {}",
        &page[..page.len().min(80)]
    );
    assert!(page.contains(".TH af 1"), "{page}");
    let listed = page
        .split(".SH SUBCOMMANDS")
        .nth(1)
        .expect("a SUBCOMMANDS section");
    for command in [
        "validate",
        "net",
        "up",
        "down",
        "status",
        "logs",
        "inbox",
        "webhook",
        "doctor",
        "completions",
        "man",
    ] {
        assert!(
            listed.contains(&format!("af\\-{command}(1)")),
            "{command}: {listed}"
        );
    }
}
