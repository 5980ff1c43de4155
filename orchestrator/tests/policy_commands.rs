//! `af validate`, `af net policy` and `af net explain` work with no runtime at all.

#![allow(
    clippy::expect_used,
    reason = "test helpers fail the test by panicking, like #[test] functions"
)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use af_orchestrator::runtime::org_policy;
use af_policy::placement::ecs::network::{PROBE_IMAGE_VARIABLE, VARIABLES};

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
        self.af_with(cwd, args, &[])
    }

    /// Run af in `cwd` with only `vars` of the variables that change placement: no
    /// organization policy but one the test writes, no AF_ECS_* network but the test's.
    fn af_with(&self, cwd: &Path, args: &[&str], vars: &[(&str, &str)]) -> Output {
        self.command(cwd, args, vars).output().expect("af runs")
    }

    /// The command [`Repo::af_with`] runs.
    fn command(&self, cwd: &Path, args: &[&str], vars: &[(&str, &str)]) -> Command {
        let mut command = Command::new(env!("CARGO_BIN_EXE_af"));
        command
            .args(args)
            .current_dir(cwd)
            .env("XDG_CONFIG_HOME", self.dir.join("config"));
        for name in VARIABLES
            .iter()
            .chain([&PROBE_IMAGE_VARIABLE, &org_policy::ENV])
        {
            command.env_remove(name);
        }
        command.envs(vars.iter().copied());
        command
    }

    /// Write `text` under the repository's directory and return its path.
    fn write(&self, name: &str, text: &str) -> PathBuf {
        let path = self.dir.join(name);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).expect("dir");
        }
        std::fs::write(&path, text).expect("write");
        path
    }

    /// Every file under the repository's directory, for telling that nothing was created.
    fn files(&self) -> Vec<PathBuf> {
        fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
            for entry in std::fs::read_dir(dir).expect("read dir").flatten() {
                let path = entry.path();
                if path.is_dir() {
                    walk(&path, out);
                } else {
                    out.push(path);
                }
            }
        }
        let mut out = Vec::new();
        walk(&self.dir, &mut out);
        out.sort();
        out
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
fn validate_says_where_the_environment_runs_in_words() {
    let repo = Repo::with_manifest("runtime-line", MANIFEST);
    let out = repo.af(&repo.dir, &["validate"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("  runtime:  local (no targets declared)\n"),
        "{text}"
    );
    let targeted = format!(
        "{MANIFEST}runtime:\n  provider: kubernetes\n  targets:\n    - name: staging\n      kubeconfig_context: staging\n"
    );
    let repo = Repo::with_manifest("runtime-target", &targeted);
    let out = repo.af(&repo.dir, &["validate"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        text.contains("  runtime:  kubernetes (target staging)\n"),
        "{text}"
    );
}

#[test]
fn validate_names_a_variable_whose_port_a_portless_rule_no_longer_covers() {
    let manifest = r#"version: 1
name: shop
services:
  - name: worker
    kind: worker
    env:
      DATABASE_URL: postgres://app:s3cret-pw@db.example.com:5432/app
      BROKERS: queue.example.com:9092,queue.example.com:9093
      API: https://api.example.com:443/v1
egress:
  default: block
  rules:
    - host: db.example.com
      mode: allow
    - host: api.example.com
      mode: allow
    - host: queue.example.com:9093
      mode: allow
"#;
    let repo = Repo::with_manifest("unnamed-ports", manifest);
    let out = repo.af(&repo.dir, &["validate"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        text.contains(
            "note:     services.worker.env.DATABASE_URL goes to db.example.com:5432, and rules[0] db.example.com names no port, so it covers 80 and 443 only; write `host: db.example.com:5432`"
        ),
        "{text}"
    );
    // 9092 has no rule naming its host without a port: nothing relied on the old meaning.
    // 9093 and 443 are covered; the password is never shown.
    assert_eq!(text.matches("note:").count(), 1, "{text}");
    assert!(!text.contains("s3cret-pw"), "{text}");
    let doc = json(&repo.af(&repo.dir, &["validate", "-o", "json"]));
    assert_eq!(doc["unnamed_ports"][0]["target"], "db.example.com:5432");
    assert_eq!(doc["unnamed_ports"][0]["rule"], "rules[0] db.example.com");
    assert_eq!(doc["unnamed_ports"].as_array().map(Vec::len), Some(1));
}

#[test]
fn net_explain_says_a_rule_without_a_port_covers_80_and_443_only() {
    let manifest = "version: 1\nname: shop\nservices:\n  - name: worker\n    kind: worker\negress:\n  default: block\n  rules:\n    - host: allowed.test\n      mode: allow\n";
    let repo = Repo::with_manifest("explain-port", manifest);
    let out = repo.af(&repo.dir, &["net", "explain", "CONNECT", "allowed.test:22"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        text.starts_with("CONNECT allowed.test:22  →  block  (default)"),
        "{text}"
    );
    assert!(
        text.contains("it names no port, so it covers 80 and 443 only")
            && text.contains("a rule for allowed.test:22 names it"),
        "{text}"
    );
    let web = repo.af(
        &repo.dir,
        &["net", "explain", "CONNECT", "allowed.test:443"],
    );
    let text = String::from_utf8_lossy(&web.stdout);
    assert!(
        text.starts_with("CONNECT allowed.test:443  →  allow"),
        "{text}"
    );
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

#[test]
fn net_explain_reads_a_connect_and_names_the_rule_a_path_lost() {
    let repo = Repo::with_manifest("explain-connect", MANIFEST);
    let out = repo.af(
        &repo.dir,
        &["net", "explain", "CONNECT", "api.stripe.com:443"],
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        text.starts_with("CONNECT api.stripe.com:443  →  sandbox"),
        "{text}"
    );
    assert!(
        text.contains("✗ rules[1] api.stripe.com")
            && text.contains("decides each request once TLS is opened"),
        "{text}"
    );

    let out = repo.af(
        &repo.dir,
        &[
            "net",
            "explain",
            "GET",
            "https://api.stripe.com/v1/refunds",
            "-o",
            "json",
        ],
    );
    let doc = json(&out);
    assert_eq!(doc["rule"], "rules[0] *.stripe.com");
    assert_eq!(doc["missed"][0]["index"], 1);
    assert_eq!(doc["missed"][0]["lost_on"], "path");
    // The control: the path the rule names wins.
    let out = repo.af(
        &repo.dir,
        &[
            "net",
            "explain",
            "GET",
            "https://api.stripe.com/v1/charges",
            "-o",
            "json",
        ],
    );
    assert_eq!(json(&out)["rule"], "rules[1] api.stripe.com");

    let out = repo.af(
        &repo.dir,
        &["net", "explain", "CONNECT", "api.stripe.com:443/x"],
    );
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("AF-NET-031"));
}

/// MANIFEST placed on one target, with `target` the target's extra lines.
fn placed(provider: &str, target: &str) -> String {
    format!(
        "{MANIFEST}runtime:\n  provider: {provider}\n  targets:\n    - name: frankfurt\n{target}"
    )
}

const EU: &str = "      tags: {region: eu-west-1}\n";

fn codes(output: &Output) -> Vec<String> {
    json(output)["errors"]
        .as_array()
        .expect("errors")
        .iter()
        .map(|e| e["code"].as_str().expect("code").to_owned())
        .collect()
}

#[test]
fn ecs_is_refused_by_validate_up_and_ecs_report_with_the_thirteen_paths() {
    let repo = Repo::with_manifest("ecs", &placed("ecs", EU));
    for args in [
        &["validate", "-o", "json"][..],
        &["up", "-o", "json"],
        &["ecs", "report", "-o", "json"],
    ] {
        let out = repo.af(&repo.dir, args);
        assert_eq!(out.status.code(), Some(3), "{args:?}");
        let doc = json(&out);
        assert_eq!(codes(&out), ["AF-SCH-006"], "{args:?}");
        assert_eq!(
            doc["ecs"]["counts"],
            serde_json::json!({"closed": 10, "open": 1, "unproven": 2}),
            "{args:?}"
        );
        let open: Vec<&str> = doc["ecs"]["paths"]
            .as_array()
            .expect("paths")
            .iter()
            .filter(|p| p["verdict"] != "closed")
            .map(|p| p["id"].as_str().expect("id"))
            .collect();
        assert_eq!(open, ["task-metadata", "instance-metadata", "time-sync"]);
    }
    let text = repo.af(&repo.dir, &["validate"]);
    let stdout = String::from_utf8_lossy(&text.stdout);
    assert!(
        stdout.starts_with("No AF_ECS_* variable is set"),
        "the placeholder notice comes first: {stdout}"
    );
    assert!(stdout.contains("OPEN     the task metadata endpoint"));
    assert!(String::from_utf8_lossy(&text.stderr).contains("AF-SCH-006"));

    // Positive control: the same manifest on kubernetes validates.
    let kube = Repo::with_manifest(
        "ecs-control",
        &placed(
            "kubernetes",
            "      kubeconfig_context: eu\n      tags: {region: eu-west-1}\n",
        ),
    );
    let out = kube.af(&kube.dir, &["validate", "-o", "json"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn ecs_report_is_made_for_the_network_the_variables_describe_and_writes_its_plan() {
    let repo = Repo::with_manifest("ecs-network", &placed("ecs", EU));
    let network = [
        ("AF_ECS_REGION", "eu-west-1"),
        ("AF_ECS_CLUSTER", "previews"),
        ("AF_ECS_VPC_ID", "vpc-0abc"),
        ("AF_ECS_VPC_CIDR", "10.20.0.0/16"),
        ("AF_ECS_SUBNET_IDS", "subnet-a,subnet-b"),
        ("AF_ECS_SUBNET_CIDRS", "10.20.1.0/24,10.20.2.0/24"),
    ];
    let plan = repo.dir.join("plan.json");
    let plan_arg = plan.display().to_string();
    let out = repo.af_with(
        &repo.dir,
        &["ecs", "report", "-o", "json", "--plan", &plan_arg],
        &network,
    );
    assert_eq!(out.status.code(), Some(3));
    let doc = json(&out);
    assert!(
        doc["ecs"].get("notice").is_none(),
        "a described network has no notice"
    );
    assert_eq!(doc["ecs"]["counts"]["closed"], 10);
    let plan: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&plan).expect("plan written")).expect("JSON");
    assert_eq!(
        plan["task"]["subnets"],
        serde_json::json!(["subnet-a", "subnet-b"])
    );
    assert_eq!(plan["dns_firewall"]["vpc_id"], "vpc-0abc");
    assert!(plan["vpc_endpoints"]["com.amazonaws.eu-west-1.ecr.dkr"].is_object());

    let mut mismatched = network;
    mismatched[5] = ("AF_ECS_SUBNET_CIDRS", "10.20.1.0/24");
    let out = repo.af_with(&repo.dir, &["ecs", "report", "-o", "json"], &mismatched);
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(codes(&out), ["AF-SCH-011"]);
}

#[test]
fn check_rule_group_accepts_a_closing_group_and_refuses_an_open_one_with_its_code() {
    let repo = Repo::with_manifest("rule-group", MANIFEST);
    let group = |allow_all: &str, fail_open: &str| {
        format!(
            r#"{{"FirewallRules":[{allow_all}
                {{"Name":"forwarded","Priority":100,"Action":"ALLOW","FirewallDomainListId":"named"}},
                {{"Name":"every-domain","Priority":10000,"Action":"BLOCK","BlockResponse":"NXDOMAIN","FirewallDomainListId":"all"}}],
              "DomainLists":{{"named":["api.stripe.com."],"all":["*"]}},
              "FirewallFailOpen":"{fail_open}"}}"#
        )
    };
    let good = repo.write("good.json", &group("", "DISABLED"));
    let out = repo.af(
        &repo.dir,
        &[
            "ecs",
            "check-rule-group",
            "-o",
            "json",
            &good.display().to_string(),
        ],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    assert_eq!(json(&out)["accepted"], true);

    let open = repo.write(
        "open.json",
        &group(
            r#"{"Name":"everything","Priority":5,"Action":"ALLOW","FirewallDomainListId":"all"},"#,
            "ENABLED",
        ),
    );
    let out = repo.af(
        &repo.dir,
        &[
            "ecs",
            "check-rule-group",
            "-o",
            "json",
            &open.display().to_string(),
        ],
    );
    assert_eq!(out.status.code(), Some(3));
    assert_eq!(codes(&out), ["AF-SCH-018", "AF-SCH-014"]);

    let broken = repo.write("broken.json", "{\"FirewallRules\": [");
    let out = repo.af(
        &repo.dir,
        &[
            "ecs",
            "check-rule-group",
            "-o",
            "json",
            &broken.display().to_string(),
        ],
    );
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(codes(&out), ["AF-SCH-013"]);
}

#[test]
fn validate_judges_the_target_region_by_the_organization_policy_it_names() {
    let repo = Repo::with_manifest("residency", &placed("local", EU));
    let policy = |name: &str, text: &str| repo.write(name, text).display().to_string();
    let allows_eu = policy("eu.yaml", "allowed_regions: [eu-west-1, eu-central-1]\n");
    let us_only = policy("us.yaml", "allowed_regions: [us-east-1]\n");
    let typo = policy("typo.yaml", "allowed_regions: [eu-west-1]\nalowed: [x]\n");

    let out = repo.af_with(
        &repo.dir,
        &["validate", "-o", "json"],
        &[("AF_ORG_POLICY", &allows_eu)],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    let residency = &json(&out)["residency"];
    assert_eq!(residency["policy"], "allowed");
    assert_eq!(residency["file"], allows_eu.as_str());
    assert_eq!(residency["region"], "eu-west-1");

    let out = repo.af_with(
        &repo.dir,
        &["validate", "-o", "json"],
        &[("AF_ORG_POLICY", &us_only)],
    );
    assert_eq!(out.status.code(), Some(3));
    let statement = json(&out)["errors"][0]["statement"]
        .as_str()
        .expect("statement")
        .to_owned();
    assert_eq!(codes(&out), ["AF-SCH-008"]);
    for named in ["frankfurt", "eu-west-1", us_only.as_str()] {
        assert!(statement.contains(named), "{named} in {statement}");
    }

    let no_region = Repo::with_manifest("residency-none", &placed("local", ""));
    let out = no_region.af_with(
        &no_region.dir,
        &["validate", "-o", "json"],
        &[("AF_ORG_POLICY", &allows_eu)],
    );
    assert_eq!(codes(&out), ["AF-SCH-009"]);

    let out = repo.af_with(
        &repo.dir,
        &["validate", "-o", "json"],
        &[("AF_ORG_POLICY", &typo)],
    );
    assert_eq!(out.status.code(), Some(2));
    let error = &json(&out)["errors"][0];
    assert_eq!(error["code"], "AF-SCH-010");
    assert_eq!(
        (error["file"].as_str(), error["line"].as_u64()),
        (Some(typo.as_str()), Some(2))
    );

    // No AF_ORG_POLICY: the user's configuration directory, then no policy at all.
    let out = repo.af(&repo.dir, &["validate"]);
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stdout).contains("residency: no organization policy"));
    repo.write(
        "config/af/org-policy.yaml",
        "allowed_regions: [us-east-1]\n",
    );
    let out = repo.af(&repo.dir, &["validate", "-o", "json"]);
    assert_eq!(codes(&out), ["AF-SCH-008"]);
}

#[test]
fn up_refused_by_residency_creates_nothing_and_an_allowed_region_goes_on_to_the_runtime() {
    let repo = Repo::with_manifest("residency-up", &placed("local", EU));
    let us_only = repo
        .write("us.yaml", "allowed_regions: [us-east-1]\n")
        .display()
        .to_string();
    let eu = repo
        .write("eu.yaml", "allowed_regions: [eu-west-1]\n")
        .display()
        .to_string();
    // A Docker daemon that is not there: reaching the runtime is AF-RUN-001, and no test
    // here talks to a real one.
    let docker = format!("unix://{}", repo.dir.join("no-docker.sock").display());
    let before = repo.files();
    let out = repo.af_with(
        &repo.dir,
        &["up", "-o", "json"],
        &[("AF_ORG_POLICY", &us_only), ("DOCKER_HOST", &docker)],
    );
    assert_eq!(out.status.code(), Some(3));
    assert_eq!(codes(&out), ["AF-SCH-008"]);
    assert_eq!(
        repo.files(),
        before,
        "a refused af up leaves no file behind"
    );

    for command in ["status", "down", "logs"] {
        let out = repo.af_with(
            &repo.dir,
            &[command, "-o", "json"],
            &[("AF_ORG_POLICY", &us_only), ("DOCKER_HOST", &docker)],
        );
        assert_eq!(codes(&out), ["AF-SCH-008"], "{command} decides the same");
    }

    // Positive control: allowed, the same af up gets past placement to the (absent) daemon.
    let out = repo.af_with(
        &repo.dir,
        &["up", "-o", "json"],
        &[("AF_ORG_POLICY", &eu), ("DOCKER_HOST", &docker)],
    );
    assert_eq!(codes(&out), ["AF-RUN-001"]);
}

#[test]
fn a_reader_that_stops_early_ends_the_output_quietly() {
    let repo = Repo::with_manifest("closed-stdout", MANIFEST);
    for args in [
        &["validate", "-o", "json"][..],
        &["net", "policy"],
        &["net", "explain", "GET", "https://api.stripe.com/v1/charges"],
        &["man"],
    ] {
        // The control: read to the end, each command prints something.
        let read = repo.af(&repo.dir, args);
        assert!(read.status.success() && !read.stdout.is_empty(), "{args:?}");
        // The reader gone before the first line (`af ... | head -0`): every write fails with
        // EPIPE, which `println!` turns into a panic.
        let (reader, writer) = std::io::pipe().expect("a pipe");
        drop(reader);
        let out = repo
            .command(&repo.dir, args, &[])
            .stdout(writer)
            .output()
            .expect("af runs");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(0), "{args:?}: {stderr}");
        assert_eq!(stderr, "", "{args:?}");
    }
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
