//! The matrix's protocol rows: Debian's python3-websockets, python3-grpcio and python3-httpx
//! over HTTP/2, through interception to the simulated internet's protocol host
//! (`af-sim-upstream --tls`: its leaf signed by a CA the manifest trusts in
//! `egress.upstream_roots`), under a rule that allows with paths, one that sandboxes and one
//! that blocks. Each row checks what the client got and what the journal holds.

use af_sidecar_api::journal::{DecisionRecord, Outcome, Record};
use serde_json::Value;

use super::{BY_DNS, Repo, run};
use crate::support::docker::DockerHarness;
use af_orchestrator::env_id::EnvId;

/// The rules the rows run under (after the matrix's three), as the manifest writes them.
pub(crate) const RULES: &str = "    - host: proto.allowed.test
      mode: allow
      paths: [/]
    - host: proto.sandbox.test
      mode: sandbox
      credential: PROTO_TEST_KEY
    - host: proto.blocked.test
      mode: block
";

/// The test credential sandbox puts in place of the service's own.
pub(crate) const TEST_KEY: (&str, &str) = ("PROTO_TEST_KEY", "sk_test_proto_sandbox_key");

/// The service's own credential, which must never reach the protocol host.
const OWN_KEY: &str = "Bearer the-services-own-key";

const ALLOWED: (&str, &str) = ("proto.allowed.test", "rules[3] proto.allowed.test");
const SANDBOX: (&str, &str) = ("proto.sandbox.test", "rules[4] proto.sandbox.test");
const BLOCKED: (&str, &str) = ("proto.blocked.test", "rules[5] proto.blocked.test");

/// `argv` with the proxy variables removed: the client goes by the environment's DNS alone.
fn by_dns(argv: &[&str]) -> Vec<String> {
    BY_DNS.iter().chain(argv).map(|a| (*a).to_owned()).collect()
}

fn owned(argv: &[&str]) -> Vec<String> {
    argv.iter().map(|a| (*a).to_owned()).collect()
}

/// Run a client and read its one JSON line.
async fn json(h: &DockerHarness, env: &EnvId, argv: &[String]) -> Value {
    let stdout = run(h, env, argv).await;
    serde_json::from_str(stdout.trim()).unwrap_or_else(|e| panic!("{argv:?}: {e}: {stdout:?}"))
}

/// Every row (see the module's documentation).
pub(crate) async fn rows(repo: &Repo, h: &DockerHarness, env: &EnvId) {
    websocket(h, env).await;
    grpc(h, env).await;
    http2_burst(h, env).await;
    check_journal(repo, h, env);
}

/// WebSocket (Debian's websockets 10.4 reads no proxy variables: by DNS only).
async fn websocket(h: &DockerHarness, env: &EnvId) {
    let echo = |host: &str, auth: &str| {
        owned(&[
            "python3",
            "/clients/ws_echo.py",
            &format!("wss://{host}/socket"),
            auth,
        ])
    };
    let expected = serde_json::json!({
        "text": "hello through af", "binary": "000102feff", "pong": true, "close": 1000
    });
    let allowed = json(h, env, &echo(ALLOWED.0, "")).await;
    assert_eq!(allowed, expected, "allow with paths");
    let sandboxed = json(h, env, &echo(SANDBOX.0, OWN_KEY)).await;
    assert_eq!(sandboxed, expected, "sandbox");
    let blocked = json(h, env, &echo(BLOCKED.0, "")).await;
    assert_eq!(blocked["status"], 403, "block: {blocked}");
}

/// gRPC: every kind of call, through the proxy (grpcio reads `https_proxy`) and by DNS.
async fn grpc(h: &DockerHarness, env: &EnvId) {
    let calls = |host: &str, auth: &str| {
        vec![
            "python3".to_owned(),
            "/clients/grpc_calls.py".to_owned(),
            format!("{host}:443"),
            auth.to_owned(),
        ]
    };
    for argv in [
        calls(ALLOWED.0, ""),
        by_dns(
            &calls(ALLOWED.0, "")
                .iter()
                .map(String::as_str)
                .collect::<Vec<_>>(),
        ),
        calls(SANDBOX.0, OWN_KEY),
    ] {
        let got = json(h, env, &argv).await;
        assert_eq!(got["unary"], "hello", "{argv:?}: {got}");
        assert_eq!(got["count"], serde_json::json!(["00", "01", "02"]), "{got}");
        assert_eq!(got["join"], "one two three", "{got}");
        assert_eq!(got["shout"], serde_json::json!(["PING", "PONG"]), "{got}");
        assert_eq!(got["slow"]["code"], "DEADLINE_EXCEEDED", "{got}");
        assert_eq!(got["fail"]["code"], "NOT_FOUND", "{got}");
        assert_eq!(got["fail"]["message"], "no such order", "{got}");
    }
    // Blocked, by DNS: the sidecar opens the TLS to answer the call in gRPC's terms.
    let blocked = json(
        h,
        env,
        &by_dns(
            &calls(BLOCKED.0, "")
                .iter()
                .map(String::as_str)
                .collect::<Vec<_>>(),
        ),
    )
    .await;
    assert_eq!(blocked["unary"]["code"], "PERMISSION_DENIED", "{blocked}");
    let message = blocked["unary"]["message"].as_str().unwrap_or_default();
    assert!(message.starts_with("AF-NET-010 "), "{blocked}");
}

/// A hundred concurrent requests on one HTTP/2 connection (httpx), which reach the upstream
/// over HTTP/2 themselves; the sandboxed host sees the test credential only.
async fn http2_burst(h: &DockerHarness, env: &EnvId) {
    let burst = |host: &str, n: &str, auth: &str| {
        owned(&[
            "python3",
            "/clients/h2_burst.py",
            &format!("https://{host}/burst"),
            n,
            auth,
        ])
    };
    let allowed = json(h, env, &burst(ALLOWED.0, "100", "")).await;
    assert_eq!(
        allowed["statuses"],
        serde_json::json!({"200": 100}),
        "{allowed}"
    );
    assert_eq!(
        allowed["versions"],
        serde_json::json!(["HTTP/2"]),
        "{allowed}"
    );
    let body = format!("upstream {} saw GET /burst HTTP/2.0 auth=\n", ALLOWED.0);
    assert_eq!(allowed["bodies"], serde_json::json!([body]), "{allowed}");

    let sandboxed = json(h, env, &burst(SANDBOX.0, "3", OWN_KEY)).await;
    let body = format!(
        "upstream {} saw GET /burst HTTP/2.0 auth=Bearer {}\n",
        ALLOWED.0, TEST_KEY.1
    );
    assert_eq!(
        sandboxed["bodies"],
        serde_json::json!([body]),
        "{sandboxed}"
    );

    let blocked = json(
        h,
        env,
        &by_dns(
            &burst(BLOCKED.0, "3", "")
                .iter()
                .map(String::as_str)
                .collect::<Vec<_>>(),
        ),
    )
    .await;
    assert_eq!(
        blocked["statuses"],
        serde_json::json!({"403": 3}),
        "{blocked}"
    );
}

/// The records of the rows: each call and upgrade under its rule, with its status.
fn check_journal(repo: &Repo, h: &DockerHarness, env: &EnvId) {
    let log = repo.af_json(h, env, &["net", "log"]);
    let records: Vec<Record> = serde_json::from_value(log["records"].clone())
        .unwrap_or_else(|e| panic!("journal records: {e}: {log}"));
    let decisions: Vec<&DecisionRecord> = records
        .iter()
        .filter_map(|r| r.entry.as_decision())
        .filter(|d| d.host.starts_with("proto."))
        .collect();
    let find = |host: &str, path: &str| -> Vec<&DecisionRecord> {
        decisions
            .iter()
            .copied()
            .filter(|d| d.host == host && d.path == path)
            .collect()
    };
    for (host, rule) in [ALLOWED, SANDBOX] {
        let sockets = find(host, "/socket");
        assert_eq!(sockets.len(), 1, "{host}: {sockets:#?}");
        let socket = sockets[0];
        assert_eq!(socket.via, "intercept", "{socket:?}");
        assert_eq!(socket.rule.as_deref(), Some(rule), "{socket:?}");
        assert_eq!(socket.status, Some(101), "{socket:?}");
        assert_eq!(
            socket.outcome(),
            Outcome::Tunnel,
            "relayed after its 101: {socket:?}"
        );
        for (path, grpc_status) in [
            ("/af.test.Echo/Unary", Some(0)),
            ("/af.test.Echo/Count", Some(0)),
            ("/af.test.Echo/Join", Some(0)),
            ("/af.test.Echo/Shout", Some(0)),
            ("/af.test.Echo/Fail", Some(5)),
        ] {
            for call in find(host, path) {
                assert_eq!(call.rule.as_deref(), Some(rule), "{call:?}");
                assert_eq!(call.status, Some(200), "{call:?}");
                assert_eq!(call.grpc_status, grpc_status, "{call:?}");
            }
        }
        let bursts = find(host, "/burst?n=0");
        assert_eq!(bursts.len(), 1, "{host}: {bursts:#?}");
        assert_eq!(bursts[0].status, Some(200), "{:?}", bursts[0]);
    }
    // Allowed calls came both through the proxy and by DNS.
    let unary = find(ALLOWED.0, "/af.test.Echo/Unary");
    let arrived: Vec<_> = unary.iter().filter_map(|d| d.arrived.as_deref()).collect();
    assert!(
        arrived.contains(&"proxy") && arrived.contains(&"tls"),
        "{unary:#?}"
    );
    let refused: Vec<_> = decisions
        .iter()
        .filter(|d| d.host == BLOCKED.0 && d.outcome() == Outcome::Refused)
        .collect();
    assert!(
        refused
            .iter()
            .all(|d| d.code.as_deref() == Some("AF-NET-010")),
        "{refused:#?}"
    );
    assert!(
        refused.len() >= 3,
        "each blocked client was refused: {refused:#?}"
    );
}
