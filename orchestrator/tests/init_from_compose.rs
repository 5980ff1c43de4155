//! `af init` on the Compose projects of `fixtures/compose/`: the af.yaml each gives, what is
//! listed as not carried over or refused, and that nothing is written or lost on a refusal.

#![allow(
    clippy::expect_used,
    reason = "test helpers fail the test by panicking, like #[test] functions"
)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use af_policy::manifest::{Capability, Manifest, ServiceKind};

/// A copy of `fixtures/compose/NAME` in a directory of its own.
struct Project {
    dir: PathBuf,
}

impl Project {
    /// `tag` keeps each test's copy apart from the others'.
    fn copy(name: &str, tag: &str) -> Project {
        let from = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../fixtures/compose")
            .join(name);
        let dir = std::env::temp_dir().join(format!("af-init-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        copy_dir(&from, &dir);
        Project { dir }
    }

    fn af(&self, args: &[&str]) -> Output {
        Command::new(env!("CARGO_BIN_EXE_af"))
            .args(args)
            .current_dir(&self.dir)
            .env("XDG_CONFIG_HOME", self.dir.join(".config"))
            .env_remove("AF_ORG_POLICY")
            .output()
            .expect("af runs")
    }

    fn manifest(&self) -> Manifest {
        Manifest::from_path(&self.dir.join("af.yaml"))
            .unwrap_or_else(|e| panic!("af.yaml reads: {e}"))
    }

    /// Every file in the project and its bytes.
    fn files(&self) -> Vec<(PathBuf, Vec<u8>)> {
        let mut files = Vec::new();
        let mut dirs = vec![self.dir.clone()];
        while let Some(dir) = dirs.pop() {
            for entry in std::fs::read_dir(&dir).expect("read dir").flatten() {
                let path = entry.path();
                if path.is_dir() {
                    dirs.push(path);
                } else {
                    files.push((path.clone(), std::fs::read(&path).expect("read")));
                }
            }
        }
        files.sort();
        files
    }
}

impl Drop for Project {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("mkdir");
    for entry in std::fs::read_dir(from).expect("fixture").flatten() {
        let target = to.join(entry.file_name());
        if entry.path().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).expect("copy");
        }
    }
}

fn text(out: &Output) -> (String, String) {
    (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn a_compose_project_becomes_an_af_yaml_that_validates_with_every_mapped_field() {
    let project = Project::copy("shop", "mapped");
    let out = project.af(&["init"]);
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stdout}{stderr}");
    assert!(stdout.contains("services web, worker, db"), "{stdout}");
    let manifest = project.manifest();
    assert_eq!(manifest.name, "shop");
    assert_eq!(
        manifest.egress.default_mode(),
        af_policy::egress::Mode::Block
    );
    assert!(manifest.egress.rules.is_empty());
    let web = &manifest.services[0];
    assert_eq!((web.name.as_str(), web.path.as_str()), ("web", "web"));
    assert_eq!(web.dockerfile.as_deref(), Some("Dockerfile"));
    assert_eq!(web.command, ["./serve", "--port", "8080"]);
    assert_eq!((web.kind, web.port), (ServiceKind::Web, Some(8080)));
    assert_eq!(web.health_path.as_deref(), Some("/healthz"));
    assert_eq!(web.env["DATABASE_URL"], "postgres://shop@db:5432/shop");
    assert_eq!(web.env_file, ["web.env"]);
    assert_eq!(web.depends_on, ["db", "worker"]);
    assert_eq!(web.capabilities, [Capability::Chown]);
    assert_eq!(web.replicas, Some(2));
    assert_eq!(web.resources.cpu.as_deref(), Some("0.5"));
    assert_eq!(web.resources.memory.as_deref(), Some("256Mi"));
    let worker = &manifest.services[1];
    assert_eq!(worker.entrypoint, ["/usr/bin/env"]);
    // A command line is split as a shell splits it, quotes kept together.
    assert_eq!(
        worker.command,
        ["python3", "-m", "worker", "--queue", "mail jobs"]
    );
    assert_eq!(worker.env["QUEUE"], "mail");
    assert_eq!((worker.kind, worker.port), (ServiceKind::Worker, None));
    let db = &manifest.services[2];
    assert_eq!(db.image.as_deref(), Some("af-postgres:local"));
    assert_eq!((db.kind, db.port), (ServiceKind::Worker, Some(5432)));
    // The env file's values stay in their file.
    let written = std::fs::read_to_string(project.dir.join("af.yaml")).expect("af.yaml");
    assert!(!written.contains("not-a-real-secret"), "{written}");
    assert!(written.contains("af net suggest"), "{written}");
    // What was not carried over is said, with why, in the output and in the file.
    assert!(
        stdout.contains(
            "services.web: healthcheck.interval/retries/start_period: a service has health_timeout"
        ),
        "{stdout}"
    );
    assert!(
        written.contains("#   web: healthcheck.interval/retries/start_period: "),
        "{written}"
    );
    let validate = project.af(&["validate"]);
    assert!(validate.status.success(), "{:?}", text(&validate));
}

#[test]
fn every_field_not_carried_over_is_listed_with_why_and_the_file_still_validates() {
    let project = Project::copy("unmapped", "unmapped");
    let out = project.af(&["init", "-o", "json"]);
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stdout}{stderr}");
    let doc: serde_json::Value = serde_json::from_str(&stdout).expect("json");
    let left: Vec<(String, String)> = doc["left"]
        .as_array()
        .expect("left")
        .iter()
        .map(|l| {
            (
                format!(
                    "{}: {}",
                    l["service"].as_str().unwrap_or("(top level)"),
                    l["field"].as_str().unwrap_or_default()
                ),
                l["why"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect();
    for expected in [
        "app: volumes",
        "app: networks",
        "app: extra_hosts",
        "app: restart",
        "app: container_name",
        "app: labels",
        "app: logging",
        "app: x-owner",
        "app: environment.FROM_SHELL",
        "app: environment.INTERPOLATED",
        "cache: network_mode",
        "cache: ports[1]",
        "cache: ports[2]",
        "(top level): volumes",
        "(top level): networks",
    ] {
        let found = left.iter().find(|(field, _)| field == expected);
        assert!(
            found.is_some_and(|(_, why)| why.len() > 20),
            "{expected} listed with why: {left:#?}"
        );
    }
    assert_eq!(doc["services"], serde_json::json!(["app", "cache"]));
    let manifest = project.manifest();
    assert_eq!(manifest.services[0].image.as_deref(), Some("app:dev"));
    assert!(
        manifest.services[0].env.is_empty(),
        "nothing interpolated or taken from the shell"
    );
    assert_eq!(manifest.services[1].port, Some(6379));
    assert!(project.af(&["validate"]).status.success());
}

#[test]
fn what_a_contained_service_cannot_have_is_refused_by_name_with_the_reason() {
    let project = Project::copy("refused", "refused");
    let out = project.af(&["init"]);
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stdout}{stderr}");
    let refused = stdout
        .split("Refused (a contained service cannot have it):")
        .nth(1)
        .expect("a refused section");
    for (field, why) in [
        ("privileged", "every capability"),
        ("cap_add: NET_RAW", "build its own packets"),
        ("cap_add: NET_ADMIN", "routes"),
        ("cap_add: CAP_SYS_ADMIN", "mount file systems"),
        ("cap_add: ALL", "NET_RAW"),
    ] {
        assert!(
            refused.lines().any(
                |l| l.contains(&format!("services.sniffer: {field}: refused: ")) && l.contains(why)
            ),
            "{field}: {stdout}"
        );
    }
    // The one it may have is kept, and nothing refused is.
    let sniffer = &project.manifest().services[0];
    assert_eq!(sniffer.capabilities, [Capability::Setuid]);
}

#[test]
fn an_existing_af_yaml_is_kept_unless_forced_and_then_the_difference_is_shown() {
    let project = Project::copy("shop", "force");
    let own = "version: 1\nname: mine\nservices:\n  - name: web\n    port: 8080\n";
    std::fs::write(project.dir.join("af.yaml"), own).expect("write");
    let before = project.files();
    let refused = project.af(&["init"]);
    let (stdout, stderr) = text(&refused);
    assert_eq!(refused.status.code(), Some(2), "{stdout}{stderr}");
    assert!(stderr.contains("AF-INI-003"), "{stderr}");
    assert!(stderr.contains("Next: "), "{stderr}");
    assert_eq!(project.files(), before, "nothing written, nothing lost");

    let forced = project.af(&["init", "--force"]);
    let (stdout, stderr) = text(&forced);
    assert!(forced.status.success(), "{stdout}{stderr}");
    assert!(stdout.contains("-name: mine"), "{stdout}");
    assert!(stdout.contains("+name: shop"), "{stdout}");
    assert_eq!(project.manifest().name, "shop");
}

#[test]
fn a_missing_or_unreadable_compose_file_is_refused_with_a_code_and_nothing_is_written() {
    let project = Project::copy("shop", "missing");
    std::fs::remove_file(project.dir.join("compose.yaml")).expect("rm");
    let before = project.files();
    let none = project.af(&["init"]);
    let (_, stderr) = text(&none);
    assert_eq!(none.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("AF-INI-001"), "{stderr}");
    assert!(stderr.contains("Next: "), "{stderr}");

    std::fs::write(
        project.dir.join("broken.yml"),
        "services: [this, is, not, compose]\n",
    )
    .expect("write");
    let before_broken = project.files();
    let broken = project.af(&["init", "--from", "broken.yml"]);
    let (_, stderr) = text(&broken);
    assert_eq!(broken.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("AF-INI-002"), "{stderr}");
    assert_eq!(project.files(), before_broken);
    assert_ne!(before, before_broken);

    // A Compose file whose services af cannot hold is refused whole.
    std::fs::write(
        project.dir.join("odd.yml"),
        "services:\n  web:\n    image: \"Not A Reference\"\n",
    )
    .expect("write");
    let before_odd = project.files();
    let odd = project.af(&["init", "--from", "odd.yml"]);
    let (_, stderr) = text(&odd);
    assert_eq!(odd.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("AF-INI-004") && stderr.contains("AF-MAN-007"),
        "{stderr}"
    );
    assert_eq!(project.files(), before_odd);
}

#[test]
fn a_compose_file_named_elsewhere_gives_paths_read_from_af_yaml() {
    let project = Project::copy("shop", "elsewhere");
    let deploy = project.dir.join("deploy");
    std::fs::create_dir_all(&deploy).expect("mkdir");
    let moved = std::fs::read_to_string(project.dir.join("compose.yaml"))
        .expect("read")
        .replace("./web", "../web")
        .replace("env_file: web.env", "env_file: ../web.env");
    std::fs::write(deploy.join("compose.yaml"), moved).expect("write");
    std::fs::remove_file(project.dir.join("compose.yaml")).expect("rm");
    let out = project.af(&["init", "--from", "deploy/compose.yaml"]);
    assert!(out.status.success(), "{:?}", text(&out));
    let manifest = project.manifest();
    assert_eq!(manifest.services[0].path, "web");
    assert_eq!(manifest.services[0].env_file, ["web.env"]);
}
