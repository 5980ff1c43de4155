//! From a Compose project to a running environment: `af init`, then `af up` on the local
//! runtime. A web service built from its Dockerfile asks a prebuilt PostgreSQL image (made here
//! from Debian's `postgresql`, tagged locally: no registry is reachable) over the internal
//! network, and the database's container is confined as a built service's is, read from its
//! own `/proc`.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::process::{Command, Output};
use std::time::Duration;

use af_orchestrator::env_id::EnvId;
use serde_json::json;

use crate::process::{fed, in_terminal};
use crate::support::docker::DockerHarness;
use crate::support::{Harness, debian_image};

/// The web service: HTTP on 8080, `/` answering with what psql got from the database.
const SERVE: &str = r#"import http.server, subprocess
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        if self.path == "/healthz":
            body = b"ok"
        else:
            run = subprocess.run(["psql", "-h", "db", "-U", "postgres", "-tAc", "select 'answer:' || 6 * 7"], capture_output=True)
            body = run.stdout + run.stderr
        self.send_response(200)
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
http.server.HTTPServer(("0.0.0.0", 8080), H).serve_forever()
"#;

/// A Compose project in a directory of its own.
struct Project {
    dir: PathBuf,
}

impl Project {
    fn write(image: &str) -> Project {
        let dir = std::env::temp_dir().join(format!("af-adoption-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("web")).unwrap_or_else(|e| panic!("{e}"));
        let compose = format!(
            "name: shop\nservices:\n  web:\n    build: ./web\n    ports: [\"8000:8080\"]\n    healthcheck:\n      test: [\"CMD\", \"curl\", \"-f\", \"http://localhost:8080/healthz\"]\n    depends_on:\n      db:\n        condition: service_healthy\n  db:\n    image: {image}\n    expose: [\"5432\"]\n    volumes: [\"pgdata:/var/lib/postgresql\"]\nvolumes:\n  pgdata: {{}}\n"
        );
        std::fs::write(dir.join("compose.yaml"), compose).unwrap_or_else(|e| panic!("{e}"));
        std::fs::write(
            dir.join("web/Dockerfile"),
            format!(
                "FROM {image}\nCOPY serve.py /srv/serve.py\nCMD [\"python3\", \"/srv/serve.py\"]\n"
            ),
        )
        .unwrap_or_else(|e| panic!("{e}"));
        std::fs::write(dir.join("web/serve.py"), SERVE).unwrap_or_else(|e| panic!("{e}"));
        Project { dir }
    }

    /// `af ARGS --env ENV` here, with the harness's runtime (`--env` before any `--`, so a
    /// command's own arguments stay last).
    fn command(&self, h: &DockerHarness, env: Option<&EnvId>, args: &[&str]) -> Command {
        let at = args.iter().position(|a| *a == "--").unwrap_or(args.len());
        let mut command = Command::new(env!("CARGO_BIN_EXE_af"));
        command
            .args(&args[..at])
            .args(env.map(|e| ["--env", e.as_str()]).into_iter().flatten())
            .args(&args[at..])
            .current_dir(&self.dir)
            .envs(h.af_variables().iter().map(|(k, v)| (k, v)));
        command
    }

    /// `af ARGS` here, its stdin empty.
    fn af(&self, h: &DockerHarness, env: Option<&EnvId>, args: &[&str]) -> Output {
        self.af_fed(h, env, args, b"")
    }

    /// `af ARGS` here, `input` on its stdin.
    fn af_fed(
        &self,
        h: &DockerHarness,
        env: Option<&EnvId>,
        args: &[&str],
        input: &[u8],
    ) -> Output {
        fed(self.command(h, env, args), input)
    }
}

impl Drop for Project {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn said(out: &Output) -> String {
    format!(
        "exit {:?}\n{}{}",
        out.status.code(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// `GET /` of the web service through the address af published it on.
fn get(url: &str) -> String {
    let authority = url
        .trim_start_matches("http://")
        .trim_end_matches('/')
        .to_owned();
    let mut stream = TcpStream::connect(&authority).unwrap_or_else(|e| panic!("{url}: {e}"));
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap_or_else(|e| panic!("{e}"));
    write!(
        stream,
        "GET / HTTP/1.1\r\nHost: {authority}\r\nConnection: close\r\n\r\n"
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let mut answer = String::new();
    stream
        .read_to_string(&mut answer)
        .unwrap_or_else(|e| panic!("{e}"));
    answer
}

/// `/proc/self/status` fields of a process in `service` and whether IPv6 is off (its last
/// line), and its network interfaces.
async fn confinement(h: &DockerHarness, env: &EnvId, service: &str) -> (Vec<String>, String) {
    let argv: Vec<String> = ["sh", "-c", "grep -E '^(CapEff|CapBnd|CapPrm|NoNewPrivs|Uid):' /proc/self/status; cat /proc/sys/net/ipv6/conf/all/disable_ipv6; echo; cut -d: -f1 /proc/net/dev | tail -n +3 | tr -d ' ' | sort"]
        .iter()
        .map(|s| (*s).to_owned())
        .collect();
    let out = h
        .runtime()
        .exec(env, service, &argv)
        .await
        .unwrap_or_else(|e| panic!("exec in {service}: {e}"));
    let mut parts = out.stdout.splitn(2, "\n\n");
    let status = parts
        .next()
        .unwrap_or_default()
        .lines()
        .map(|l| l.split_whitespace().collect::<Vec<_>>().join(" "))
        .collect();
    (status, parts.next().unwrap_or_default().to_owned())
}

pub(crate) async fn a_compose_project_with_a_prebuilt_database_runs_contained(h: &DockerHarness) {
    let image = tokio::task::spawn_blocking(|| debian_image("debian-postgresql"))
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let project = Project::write(&image);
    let env = h.env("adopt");

    let init = project.af(h, None, &["init"]);
    assert!(init.status.success(), "{}", said(&init));
    let init_said = said(&init);
    assert!(init_said.contains("services.db: volumes: "), "{init_said}");
    let manifest =
        std::fs::read_to_string(project.dir.join("af.yaml")).unwrap_or_else(|e| panic!("{e}"));
    assert!(manifest.contains(&format!("image: {image}")), "{manifest}");

    let up = project.af(h, Some(&env), &["up", "-o", "json"]);
    assert!(up.status.success(), "{}", said(&up));
    let report: serde_json::Value =
        serde_json::from_slice(&up.stdout).unwrap_or_else(|e| panic!("{e}: {}", said(&up)));
    let url = report["services"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|s| s["name"] == "web")
        .and_then(|s| s["url"].as_str())
        .unwrap_or_else(|| panic!("web's url: {report}"))
        .to_owned();
    // The web service asked the database over the internal network.
    let answer = get(&url);
    assert!(answer.contains("answer:42"), "{answer}");

    // `af ls` lists it, running, with the repository it came from.
    let listed = project.af(h, None, &["ls", "-o", "json"]);
    assert!(listed.status.success(), "{}", said(&listed));
    let listed: serde_json::Value =
        serde_json::from_slice(&listed.stdout).unwrap_or_else(|e| panic!("{e}: {}", said(&listed)));
    let ours = listed["environments"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|e| e["env"] == env.as_str())
        .unwrap_or_else(|| panic!("{env} in {listed}"));
    let repository = std::fs::canonicalize(&project.dir).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        (
            &ours["runtime"],
            &ours["state"],
            &ours["project"],
            &ours["repository"]
        ),
        (
            &json!("local"),
            &json!("running"),
            &json!("shop"),
            &json!(repository.to_string_lossy())
        ),
        "{ours}"
    );
    assert_eq!(
        ours["services"],
        json!([{"name": "db", "running": true}, {"name": "web", "running": true}])
    );
    assert!(
        ours["age_seconds"].as_u64().is_some_and(|age| age < 3600),
        "{ours}"
    );

    // `af exec`: the command's input, its output and error apart, and its exit status.
    let ran = project.af_fed(
        h,
        Some(&env),
        &[
            "exec",
            "web",
            "--",
            "sh",
            "-c",
            "read line; echo got:$line; echo err >&2; exit 3",
        ],
        b"hello\n",
    );
    assert_eq!(
        (
            ran.status.code(),
            &*String::from_utf8_lossy(&ran.stdout),
            &*String::from_utf8_lossy(&ran.stderr)
        ),
        (Some(3), "got:hello\n", "err\n"),
        "{}",
        said(&ran)
    );
    // With no command, a shell, here reading its commands from stdin, in the database's
    // container as its image's user.
    let ran = project.af_fed(
        h,
        Some(&env),
        &["exec", "db"],
        b"echo shell:$((6 * 7)); id -un\n",
    );
    assert_eq!(
        (ran.status.code(), &*String::from_utf8_lossy(&ran.stdout)),
        (Some(0), "shell:42\npostgres\n"),
        "{}",
        said(&ran)
    );
    // In a terminal the command has one too, and `-T` runs it without.
    let shown = in_terminal(&project.command(h, Some(&env), &["exec", "web", "--", "tty"]));
    let screen = String::from_utf8_lossy(&shown.stdout);
    assert!(
        shown.status.success() && screen.contains("/dev/pts/"),
        "{}",
        said(&shown)
    );
    let shown = in_terminal(&project.command(h, Some(&env), &["exec", "-T", "web", "--", "tty"]));
    let screen = String::from_utf8_lossy(&shown.stdout);
    assert!(
        shown.status.code() == Some(1) && screen.contains("not a tty"),
        "{}",
        said(&shown)
    );
    // A service the environment does not run is a coded refusal.
    let ran = project.af(h, Some(&env), &["exec", "cache", "--", "true"]);
    assert!(
        ran.status.code() != Some(0) && String::from_utf8_lossy(&ran.stderr).contains("AF-RUN-031"),
        "{}",
        said(&ran)
    );

    // The database runs as its image says (the postgres user), with every capability dropped,
    // no privilege to gain, IPv6 off and one interface besides loopback: the built service's
    // confinement, to the line.
    let (db, db_links) = confinement(h, &env, "db").await;
    let (web, web_links) = confinement(h, &env, "web").await;
    for field in [
        "CapEff: 0000000000000000",
        "CapBnd: 0000000000000000",
        "NoNewPrivs: 1",
    ] {
        assert!(db.iter().any(|l| l == field), "db: {field} in {db:?}");
    }
    assert_eq!(db.last().map(String::as_str), Some("1"), "IPv6 off: {db:?}");
    assert_eq!(
        db, web,
        "the prebuilt image's container is confined as the built one's"
    );
    assert_eq!(
        db_links.split_whitespace().collect::<Vec<_>>(),
        ["eth0", "lo"],
        "{db_links}"
    );
    assert_eq!(db_links, web_links);

    let down = project.af(h, Some(&env), &["down"]);
    assert!(down.status.success(), "{}", said(&down));
    let listed = project.af(h, None, &["ls", "-o", "json"]);
    assert!(
        listed.status.success() && !String::from_utf8_lossy(&listed.stdout).contains(env.as_str()),
        "after af down: {}",
        said(&listed)
    );
}
