//! Issue 17's matrix with real clients: Debian's own curl, python3-requests and Node in a
//! service made from a Debian root filesystem (`fixtures/images/debian-clients`), each asking a
//! mock, a capture and a synth host over HTTPS through the proxy (`HTTPS_PROXY`, CONNECT) and
//! through the transparent path (no proxy variables: the environment's DNS answers the sidecar,
//! its TLS listener takes the connection), verifying TLS against the environment CA from the
//! variables `af` sets. Then a mail over SMTP with STARTTLS, the inbox read message by message,
//! the journal read record by record ([`journal`]), `af up` again (nothing changed) and
//! `af down` (nothing left with the environment's label). Everything runs through the `af`
//! command line, as a user would. The protocol rows ([`protocols`]) run Python's WebSocket,
//! gRPC and HTTP/2 clients through interception to a real upstream of the simulated internet.

pub(crate) mod journal;
mod protocols;

use std::collections::HashMap;
use std::path::PathBuf;
use std::process::{Command, Output};
use std::time::SystemTime;

use af_orchestrator::env_id::EnvId;
use af_orchestrator::runtime::labels::ENV;
use af_orchestrator::trust::EnvCa;
use af_policy::egress::Mode;
use af_sidecar_api::journal::{Entry, Record};
use bollard::Docker;
use bollard::query_parameters::{
    ListContainersOptionsBuilder, ListNetworksOptionsBuilder, ListVolumesOptionsBuilder,
};
use serde_json::Value;

use crate::support::docker::DockerHarness;
use crate::support::{Harness, debian_clients_image, repo_root};

/// A host of the manifest's catalogue, answered by the sidecar itself.
#[derive(Debug)]
pub(crate) struct Api {
    pub host: &'static str,
    pub mode: Mode,
    /// The rule as the journal names it.
    pub rule: &'static str,
}

const MOCK: Api = Api {
    host: "api.github.com",
    mode: Mode::Mock,
    rule: "rules[0] api.github.com",
};
const CAPTURE: Api = Api {
    host: "api.sendgrid.com",
    mode: Mode::Capture,
    rule: "rules[1] api.sendgrid.com",
};
const SYNTH: Api = Api {
    host: "api.shop.example",
    mode: Mode::Synth,
    rule: "rules[2] api.shop.example",
};

/// The name the SMTP client sends its mail to (any outside name reaches the sidecar).
const SMTP_HOST: &str = "smtp.mail.test";

const SERVICE: &str = "clients";

/// The manifest: one service from the Debian image, the three hosts answered here, the
/// protocol host's three rules ([`protocols::RULES`]) trusting its CA, the rest refused.
fn manifest() -> String {
    format!(
        "version: 1
name: clients
services:
  - name: clients
    kind: worker
egress:
  default: block
  upstream_roots: [{SIM_CA}]
  rules:
    - host: api.github.com
      mode: mock
    - host: api.sendgrid.com
      mode: capture
    - host: api.shop.example
      mode: synth
      openapi: shop.yaml
{}",
        protocols::RULES
    )
}

/// The simulated internet's CA, as the repository keeps it for `egress.upstream_roots`.
const SIM_CA: &str = "sim-ca.pem";

/// The start of a command that runs without the proxy variables: its client goes by the
/// environment's DNS alone.
const BY_DNS: [&str; 9] = [
    "env",
    "-u",
    "HTTP_PROXY",
    "-u",
    "HTTPS_PROXY",
    "-u",
    "http_proxy",
    "-u",
    "https_proxy",
];

/// How a client reaches the sidecar.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Route {
    /// `HTTPS_PROXY` as `af` sets it: CONNECT to the proxy listener.
    Proxy,
    /// No proxy variables: the name resolves to the sidecar, TLS goes to its port 443.
    Transparent,
}

/// A client the image carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Client {
    Curl,
    Requests,
    Node,
}

impl Client {
    fn name(self) -> &'static str {
        match self {
            Client::Curl => "curl",
            Client::Requests => "requests",
            Client::Node => "node",
        }
    }

    /// The command that makes one request and prints the body, then `{"status", "synth"}`.
    fn argv(self, route: Route, method: &str, url: &str, body: Option<&str>) -> Vec<String> {
        let mut argv: Vec<&str> = match route {
            Route::Proxy => Vec::new(),
            Route::Transparent => BY_DNS.to_vec(),
        };
        match self {
            Client::Curl => {
                argv.extend([
                    "curl",
                    "--silent",
                    "--show-error",
                    "--request",
                    method,
                    "--write-out",
                    "\n{\"status\":%{http_code},\"synth\":\"%header{x-af-synth}\"}\n",
                ]);
                if let Some(body) = body {
                    argv.extend(["--header", "content-type: application/json", "--data", body]);
                }
                argv.push(url);
            }
            Client::Requests | Client::Node => {
                argv.extend(match self {
                    Client::Node => ["node", "/clients/fetch.js"],
                    _ => ["python3", "/clients/fetch.py"],
                });
                argv.extend([method, url]);
                argv.extend(body);
            }
        }
        argv.into_iter().map(str::to_owned).collect()
    }
}

/// One request of the matrix and what its client must get.
#[derive(Debug)]
pub(crate) struct Request {
    client: Client,
    route: Route,
    pub api: &'static Api,
    pub method: &'static str,
    /// Path and query, as the journal records it.
    pub path: String,
    body: Option<String>,
    pub status: u16,
    /// For a capture: the recipient, code and first link its mail must land with.
    mail: Option<Mail>,
}

#[derive(Debug, Clone)]
struct Mail {
    to: String,
    code: String,
    link: String,
}

/// Every client, both routes, each host: a request whose answer names its client and route.
fn matrix() -> Vec<Request> {
    let mut out = Vec::new();
    for (n, (client, route)) in [Client::Curl, Client::Requests, Client::Node]
        .into_iter()
        .flat_map(|c| [(c, Route::Proxy), (c, Route::Transparent)])
        .enumerate()
    {
        let tag = format!("{}-{}", client.name(), format!("{route:?}").to_lowercase());
        out.push(Request {
            client,
            route,
            api: &MOCK,
            method: "GET",
            path: format!("/users/{tag}"),
            body: None,
            status: 200,
            mail: None,
        });
        let mail = Mail {
            to: format!("{tag}@inbox.test"),
            code: (731_940 + n).to_string(),
            link: format!("https://shop.test/verify?token={tag}"),
        };
        let body = serde_json::json!({
            "personalizations": [{ "to": [{ "email": mail.to }] }],
            "from": { "email": "hello@shop.test" },
            "subject": "Verify your email",
            "content": [{
                "type": "text/plain",
                "value": format!("Code {}. Verify: {}", mail.code, mail.link),
            }],
        });
        out.push(Request {
            client,
            route,
            api: &CAPTURE,
            method: "POST",
            path: "/v3/mail/send".to_owned(),
            body: Some(body.to_string()),
            status: 202,
            mail: Some(mail),
        });
        out.push(Request {
            client,
            route,
            api: &SYNTH,
            method: "GET",
            path: format!("/v1/orders/{tag}"),
            body: None,
            status: 200,
            mail: None,
        });
    }
    out
}

/// What a client printed: the body, then its trailer line.
#[derive(Debug)]
struct Answer {
    body: String,
    status: u16,
    synth: String,
}

impl Answer {
    fn parse(stdout: &str) -> Option<Answer> {
        let (body, trailer) = stdout.trim_end().rsplit_once('\n')?;
        let trailer: Value = serde_json::from_str(trailer).ok()?;
        Some(Answer {
            body: body.to_owned(),
            status: u16::try_from(trailer["status"].as_u64()?).ok()?,
            synth: trailer["synth"].as_str()?.to_owned(),
        })
    }
}

/// A repository holding the manifest, the OpenAPI description synth answers from, and the
/// service's build context: the Debian image with the client programs added.
struct Repo {
    dir: PathBuf,
}

impl Repo {
    fn new(env: &EnvId, image: &str, sim_ca_pem: &str) -> Repo {
        let dir = std::env::temp_dir().join(format!("af-real-clients-{env}"));
        let root = repo_root();
        let clients = root.join("fixtures/images/debian-clients/clients");
        std::fs::create_dir_all(dir.join("clients")).unwrap_or_else(|e| panic!("{e}"));
        for file in [
            "fetch.py",
            "fetch.js",
            "send_mail.py",
            "ws_echo.py",
            "grpc_calls.py",
            "h2_burst.py",
        ] {
            std::fs::copy(clients.join(file), dir.join("clients").join(file))
                .unwrap_or_else(|e| panic!("{file}: {e}"));
        }
        std::fs::copy(
            root.join("fixtures/openapi/shop.yaml"),
            dir.join("shop.yaml"),
        )
        .unwrap_or_else(|e| panic!("shop.yaml: {e}"));
        std::fs::write(dir.join("af.yaml"), manifest()).unwrap_or_else(|e| panic!("{e}"));
        std::fs::write(dir.join(SIM_CA), sim_ca_pem).unwrap_or_else(|e| panic!("{e}"));
        std::fs::write(
            dir.join("Dockerfile"),
            format!("FROM {image}\nCOPY clients/ /clients/\nCMD [\"sleep\", \"infinity\"]\n"),
        )
        .unwrap_or_else(|e| panic!("{e}"));
        Repo { dir }
    }

    /// Run `af ARGS --env ENV -o json` here with the harness's runtime; its output.
    fn af(&self, h: &DockerHarness, env: &EnvId, args: &[&str]) -> Output {
        Command::new(env!("CARGO_BIN_EXE_af"))
            .args(args)
            .args(["--env", env.as_str(), "-o", "json"])
            .current_dir(&self.dir)
            .envs(h.af_variables().iter().map(|(k, v)| (k, v)))
            // Synth stays offline: no model is asked.
            .env_remove("AF_SYNTH_MODEL_URL")
            .env(protocols::TEST_KEY.0, protocols::TEST_KEY.1)
            .output()
            .unwrap_or_else(|e| panic!("af {args:?}: {e}"))
    }

    /// `af ARGS` that must succeed; its JSON.
    fn af_json(&self, h: &DockerHarness, env: &EnvId, args: &[&str]) -> Value {
        let out = self.af(h, env, args);
        assert!(
            out.status.success(),
            "af {args:?} exited {:?}: {} {}",
            out.status.code(),
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
            panic!(
                "af {args:?} printed {}: {e}",
                String::from_utf8_lossy(&out.stdout)
            )
        })
    }
}

impl Drop for Repo {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Run `argv` in the clients' service; its output, failing on a non-zero exit.
async fn run(h: &DockerHarness, env: &EnvId, argv: &[String]) -> String {
    let out = h
        .runtime()
        .exec(env, SERVICE, argv)
        .await
        .unwrap_or_else(|e| panic!("exec {argv:?}: {}", e.report()));
    assert_eq!(
        out.exit,
        Some(0),
        "{argv:?} exited {:?}: {} {}",
        out.exit,
        out.stdout,
        out.stderr
    );
    out.stdout
}

/// The matrix itself (see the module's documentation).
pub(crate) async fn real_debian_clients_are_answered_by_proxy_and_by_dns_and_journaled_record_by_record(
    h: &DockerHarness,
) {
    let image = tokio::task::spawn_blocking(debian_clients_image)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let env = h.env("clients");
    let sim_ca = EnvCa::generate(&env, SystemTime::now()).unwrap_or_else(|e| panic!("{e}"));
    h.start_protocol_host(sim_ca.cert_pem(), sim_ca.key_pem())
        .await;
    let repo = Repo::new(&env, &image, sim_ca.cert_pem());

    let first = repo.af_json(h, &env, &["up"]);
    assert!(
        services(&first)
            .iter()
            .all(|(_, action)| action == "created"),
        "first up creates: {first}"
    );

    let requests = matrix();
    for r in &requests {
        let url = format!("https://{}{}", r.api.host, r.path);
        let argv = r.client.argv(r.route, r.method, &url, r.body.as_deref());
        let stdout = run(h, &env, &argv).await;
        let answer = Answer::parse(&stdout)
            .unwrap_or_else(|| panic!("{:?} {:?}: {stdout:?}", r.client, r.route));
        assert_eq!(answer.status, r.status, "{r:?}: {answer:?}");
        match r.api.mode {
            Mode::Mock => {
                let body: Value = serde_json::from_str(&answer.body)
                    .unwrap_or_else(|e| panic!("the pack's JSON for {r:?}: {e}: {answer:?}"));
                let login = r.path.trim_start_matches("/users/");
                assert_eq!(body["login"], login, "the GitHub pack answered {r:?}");
            }
            Mode::Synth => {
                assert_eq!(answer.synth, "openapi", "{r:?}: {answer:?}");
                let body: Value = serde_json::from_str(&answer.body)
                    .unwrap_or_else(|e| panic!("synth's JSON for {r:?}: {e}: {answer:?}"));
                assert!(body.is_object(), "{r:?}: {answer:?}");
            }
            // SendGrid answers 202 with no body; the mail is checked in the inbox.
            _ => {}
        }
    }

    let sent = run(
        h,
        &env,
        &[
            "python3",
            "/clients/send_mail.py",
            SMTP_HOST,
            "smtp@inbox.test",
            "Your sign-in code",
            "Use 482913 to sign in: https://shop.test/login?token=smtp",
        ]
        .map(str::to_owned),
    )
    .await;
    assert_eq!(sent.trim(), "sent");

    check_inbox(&repo, h, &env, &requests);
    check_journal(&repo, h, &env, &requests);
    protocols::rows(&repo, h, &env).await;
    // TLS really is verified: given one public root and not the environment CA, curl refuses
    // the sidecar's certificate (60: peer certificate cannot be authenticated).
    let refused = h
        .runtime()
        .exec(
            &env,
            SERVICE,
            &[
                "curl",
                "--silent",
                "--cacert",
                "/usr/share/ca-certificates/mozilla/ISRG_Root_X1.crt",
                "https://api.github.com/users/control",
            ]
            .map(str::to_owned),
        )
        .await
        .unwrap_or_else(|e| panic!("exec curl: {}", e.report()));
    assert_eq!(refused.exit, Some(60), "the control refuses: {refused:?}");

    let second = repo.af_json(h, &env, &["up"]);
    assert!(
        services(&second)
            .iter()
            .all(|(_, action)| action == "reused"),
        "second up changes nothing: {second}"
    );
    assert_eq!(services(&first).len(), services(&second).len());

    let down = repo.af_json(h, &env, &["down"]);
    assert!(left_with_label(&env).await.is_empty(), "after down: {down}");
}

/// Each service of an `af up -o json` report and what `up` did to it.
fn services(report: &Value) -> Vec<(String, String)> {
    report["services"]
        .as_array()
        .unwrap_or_else(|| panic!("no services in {report}"))
        .iter()
        .map(|s| {
            let field = |k: &str| s[k].as_str().unwrap_or_default().to_owned();
            (field("name"), field("action"))
        })
        .collect()
}

/// Every capture's mail and the SMTP mail are in `af inbox`, with their codes and links.
fn check_inbox(repo: &Repo, h: &DockerHarness, env: &EnvId, requests: &[Request]) {
    let inbox = repo.af_json(h, env, &["inbox", "list"]);
    let records: Vec<Record> = serde_json::from_value(inbox["records"].clone())
        .unwrap_or_else(|e| panic!("inbox records: {e}: {inbox}"));
    let messages: Vec<_> = records
        .iter()
        .filter_map(|r| r.entry.as_message())
        .collect();
    let mails = requests.iter().filter_map(|r| r.mail.clone());
    let smtp = Mail {
        to: "smtp@inbox.test".to_owned(),
        code: "482913".to_owned(),
        link: "https://shop.test/login?token=smtp".to_owned(),
    };
    for mail in mails.chain([smtp]) {
        let found: Vec<_> = messages
            .iter()
            .filter(|m| m.message.to.contains(&mail.to))
            .collect();
        assert_eq!(found.len(), 1, "one message to {}: {messages:?}", mail.to);
        let (m, smtp) = (&found[0], mail.to.starts_with("smtp@"));
        let (via, host, provider) = if smtp {
            ("smtp", SMTP_HOST, "smtp")
        } else {
            ("capture", CAPTURE.host, "sendgrid")
        };
        assert_eq!((m.via.as_str(), m.host.as_str()), (via, host), "{m:?}");
        assert_eq!(m.message.provider, provider, "{m:?}");
        assert_eq!(m.message.code.as_deref(), Some(mail.code.as_str()), "{m:?}");
        assert_eq!(
            m.message.links.first().map(String::as_str),
            Some(mail.link.as_str()),
            "{m:?}"
        );
    }
    assert_eq!(
        messages.len(),
        7,
        "six captures and one SMTP mail: {messages:?}"
    );
}

/// The journal's decisions are exactly [`journal::expected_records`] of each request, in
/// order; the transparent path's names were answered by the environment's DNS.
fn check_journal(repo: &Repo, h: &DockerHarness, env: &EnvId, requests: &[Request]) {
    let log = repo.af_json(h, env, &["net", "log"]);
    let records: Vec<Record> = serde_json::from_value(log["records"].clone())
        .unwrap_or_else(|e| panic!("journal records: {e}: {log}"));
    let decisions: Vec<_> = records
        .iter()
        .filter_map(|r| r.entry.as_decision())
        .filter(|d| d.reason != "synth_model")
        .collect();
    let expected: Vec<_> = requests
        .iter()
        .flat_map(|r| {
            journal::expected_records(r, r.route)
                .into_iter()
                .map(move |e| (r, e))
        })
        .collect();
    let mut wrong = Vec::new();
    for (n, ((r, want), got)) in expected.iter().zip(&decisions).enumerate() {
        let differences = want.differences(got);
        if !differences.is_empty() {
            wrong.push(format!(
                "record {n} ({:?} by {:?}, {} {}): {}",
                r.client,
                r.route,
                r.method,
                r.api.host,
                differences.join("; ")
            ));
        }
    }
    assert!(wrong.is_empty(), "{}\n{decisions:#?}", wrong.join("\n"));
    assert_eq!(decisions.len(), expected.len(), "{decisions:#?}");

    for host in [MOCK.host, CAPTURE.host, SYNTH.host, SMTP_HOST] {
        let answered = records.iter().any(|r| {
            matches!(&r.entry, Entry::DnsSighting(s)
                if s.host == host && s.qtype == "A" && s.answer == "outside")
        });
        assert!(
            answered,
            "the DNS answered {host} with the sidecar: {records:?}"
        );
    }
}

/// Containers, networks and volumes still carrying the environment's label.
async fn left_with_label(env: &EnvId) -> Vec<String> {
    let docker = Docker::connect_with_local_defaults()
        .unwrap_or_else(|e| panic!("docker: {e}"))
        .negotiate_version()
        .await
        .unwrap_or_else(|e| panic!("docker: {e}"));
    let filters = HashMap::from([("label".to_owned(), vec![format!("{ENV}={env}")])]);
    let mut left = Vec::new();
    let containers = ListContainersOptionsBuilder::default()
        .all(true)
        .filters(&filters)
        .build();
    for c in docker
        .list_containers(Some(containers))
        .await
        .unwrap_or_default()
    {
        left.push(format!("container {:?}", c.names));
    }
    let networks = ListNetworksOptionsBuilder::default()
        .filters(&filters)
        .build();
    for n in docker
        .list_networks(Some(networks))
        .await
        .unwrap_or_default()
    {
        left.push(format!("network {:?}", n.name));
    }
    let volumes = ListVolumesOptionsBuilder::default()
        .filters(&filters)
        .build();
    let volumes = docker.list_volumes(Some(volumes)).await.ok();
    for v in volumes.and_then(|l| l.volumes).unwrap_or_default() {
        left.push(format!("volume {}", v.name));
    }
    left
}
