//! Reaching an environment against the fake API server: what `admin` refuses and why, that a
//! forward that fails finds the sidecar's pod again, whose logs are read, and that nothing
//! here ever writes to the cluster. (The port-forward and exec streams themselves need a
//! kubelet: `tests/kubernetes_runtime.rs` carries them on a real cluster.)

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use serde_json::{Value, json};
use tokio::io::AsyncReadExt;

use super::inspect::tests::{Shape, UP, pod_json};
use super::mock::Fake;
use super::names::kind;
use super::sequence::{NS, changes, env, runtime};
use crate::runtime::{Runtime, RuntimeError};

const PODS: &str = "/api/v1/namespaces/af-pr-42/pods";
const SECRET: &str = "/api/v1/namespaces/af-pr-42/secrets/af-sidecar-config";
const TOKEN: &str = "a-token-long-enough-0123456789";

fn put_pod(fake: &Fake, name: &str, service: &str, kind: &str, shape: Shape) {
    fake.with(|s| {
        s.objects.insert(
            format!("{PODS}/{name}"),
            pod_json(name, service, kind, shape),
        )
    });
}

fn put_secret(fake: &Fake, data: Value) {
    fake.with(|s| {
        s.objects.insert(
            SECRET.to_owned(),
            json!({"apiVersion": "v1", "kind": "Secret",
                   "metadata": {"name": "af-sidecar-config", "namespace": "af-pr-42"},
                   "data": data}),
        )
    });
}

fn document(token: &str) -> Value {
    json!({"sidecar.json": STANDARD.encode(json!({"admin": {"token": token}}).to_string())})
}

async fn admin_refusal(fake: &Fake) -> RuntimeError {
    runtime(fake)
        .admin(&env())
        .await
        .map(|_| ())
        .expect_err("refused")
}

fn unreachable_saying(refused: &RuntimeError, words: &[&str]) {
    match refused {
        RuntimeError::AdminUnreachable(m) => {
            for w in words {
                assert!(m.contains(w), "{w:?} in {m}");
            }
            assert_eq!(refused.report().code.code, "AF-NET-022", "{refused}");
        }
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn admin_refuses_naming_what_is_missing_and_changes_nothing() {
    let fake = Fake::new();
    assert!(matches!(
        admin_refusal(&fake).await,
        RuntimeError::NoEnvironment(_)
    ));

    fake.with(|s| {
        s.objects.insert(
            NS.to_owned(),
            json!({"apiVersion": "v1", "kind": "Namespace",
                   "metadata": {"name": "af-pr-42", "labels": {"team": "payments"}}}),
        )
    });
    let foreign = admin_refusal(&fake).await;
    assert_eq!(foreign.report().code.code, "AF-RUN-045", "{foreign}");

    super::sequence::ours(&fake);
    unreachable_saying(
        &admin_refusal(&fake).await,
        &["af-sidecar", "running and ready (0 found)", "af up"],
    );
    let starting = Shape { ready: false, ..UP };
    put_pod(&fake, "af-sidecar-1", "sidecar", kind::SIDECAR, starting);
    // A service's pod is never taken for the sidecar's, even a service named sidecar.
    put_pod(&fake, "web", "web", kind::SERVICE, UP);
    put_pod(&fake, "sidecar-1", "sidecar", kind::SERVICE, UP);
    unreachable_saying(
        &admin_refusal(&fake).await,
        &["running and ready (1 found)", "af up"],
    );

    put_pod(&fake, "af-sidecar-1", "sidecar", kind::SIDECAR, UP);
    unreachable_saying(
        &admin_refusal(&fake).await,
        &["af-sidecar-config", "does not exist", "af up"],
    );
    put_secret(&fake, json!({}));
    unreachable_saying(&admin_refusal(&fake).await, &["has no key sidecar.json"]);
    put_secret(&fake, json!({"sidecar.json": STANDARD.encode("not json")}));
    unreachable_saying(&admin_refusal(&fake).await, &["holds no sidecar document"]);
    put_secret(&fake, document("short"));
    unreachable_saying(
        &admin_refusal(&fake).await,
        &["without a usable admin token"],
    );
    assert_eq!(changes(&fake.calls()), Vec::<String>::new());
}

#[tokio::test]
async fn a_forward_that_fails_finds_the_sidecars_pod_again_and_stops_with_the_endpoint() {
    let fake = Fake::new();
    super::sequence::ours(&fake);
    put_pod(&fake, "af-sidecar-1", "sidecar", kind::SIDECAR, UP);
    put_secret(&fake, document(TOKEN));
    let rt = runtime(&fake);
    let endpoint = rt.admin(&env()).await.expect("endpoint");
    assert_eq!(endpoint.token, TOKEN);
    assert!(endpoint.addr.ip().is_loopback());
    assert!(
        !fake.calls().iter().any(|c| c.contains("/portforward")),
        "no forward before a connection: {:?}",
        fake.calls()
    );

    // The pod is replaced; the fake serves no forward, so the connection is closed after the
    // forward to the old pod and one to the pod found again both fail.
    fake.with(|s| s.objects.remove(&format!("{PODS}/af-sidecar-1")));
    put_pod(
        &fake,
        "af-sidecar-2",
        "sidecar",
        kind::SIDECAR,
        Shape { created: 9, ..UP },
    );
    let mut conn = tokio::net::TcpStream::connect(endpoint.addr)
        .await
        .expect("the listener accepts");
    let mut read = Vec::new();
    let n = tokio::time::timeout(
        std::time::Duration::from_secs(5),
        conn.read_to_end(&mut read),
    )
    .await
    .expect("closed in time")
    .unwrap_or(0);
    assert_eq!(n, 0, "nothing but the close");
    let asked: Vec<String> = fake
        .calls()
        .into_iter()
        .skip_while(|c| !c.contains("/portforward"))
        .collect();
    assert_eq!(
        asked,
        vec![
            format!("GET {PODS}/af-sidecar-1/portforward"),
            format!("GET {PODS}"),
            format!("GET {PODS}/af-sidecar-2/portforward"),
        ]
    );

    let addr = endpoint.addr;
    drop(endpoint);
    let mut closed = false;
    for _ in 0..100 {
        if tokio::net::TcpStream::connect(addr).await.is_err() {
            closed = true;
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    assert!(closed, "the listener went with the endpoint");
}

#[tokio::test]
async fn logs_read_every_started_pod_of_the_sidecar_and_services_each_under_its_service() {
    let fake = Fake::new();
    super::sequence::ours(&fake);
    let rt = runtime(&fake);
    let none = rt
        .logs(&env(), None, false, None)
        .await
        .map(|_| ())
        .expect_err("nothing runs");
    assert!(
        matches!(&none, RuntimeError::NoService { service, .. } if service == "sidecar"),
        "{none:?}"
    );

    put_pod(&fake, "af-sidecar-1", "sidecar", kind::SIDECAR, UP);
    put_pod(&fake, "web-1", "web", kind::SERVICE, UP);
    let pending = Shape {
        phase: "Pending",
        running: false,
        ready: false,
        ..UP
    };
    put_pod(&fake, "worker-1", "worker", kind::SERVICE, pending);
    put_pod(&fake, "af-probe-1", "", kind::PROBE, UP);
    // A service's migration and its cron runs are its pods too, read under its name.
    let done = Shape {
        phase: "Succeeded",
        running: false,
        ready: false,
        ..UP
    };
    put_pod(&fake, "web-migrate-1", "web", kind::MIGRATION, done);
    put_pod(&fake, "report-1", "report", kind::CRON, done);
    fake.with(|s| {
        s.logs
            .insert("sidecar".to_owned(), "sidecar says".to_owned());
        s.logs.insert("web".to_owned(), "web says".to_owned());
        s.logs.insert("report".to_owned(), "report ran".to_owned());
    });
    use futures_util::StreamExt;
    let mut lines: Vec<(String, String)> = rt
        .logs(&env(), None, false, Some(5))
        .await
        .expect("logs")
        .map(|l| {
            let l = l.expect("line");
            (l.service, l.line)
        })
        .collect()
        .await;
    lines.sort();
    assert_eq!(
        lines,
        vec![
            ("report".to_owned(), "report ran".to_owned()),
            ("sidecar".to_owned(), "sidecar says".to_owned()),
            ("web".to_owned(), "web says".to_owned()),
            ("web".to_owned(), "web says".to_owned()),
        ]
    );
    let read: Vec<String> = fake
        .calls()
        .into_iter()
        .filter(|c| c.ends_with("/log"))
        .collect();
    assert_eq!(
        read,
        vec![
            format!("GET {PODS}/report-1/log"),
            format!("GET {PODS}/af-sidecar-1/log"),
            format!("GET {PODS}/web-1/log"),
            format!("GET {PODS}/web-migrate-1/log"),
        ],
        "the pending pod and the probe are not read"
    );
    // A cron service has no Deployment: its runs are what `af logs SERVICE` shows.
    let runs: Vec<String> = rt
        .logs(&env(), Some("report"), false, None)
        .await
        .expect("the cron service's runs")
        .map(|l| l.expect("line").line)
        .collect()
        .await;
    assert_eq!(runs, ["report ran"]);
    let worker = rt
        .logs(&env(), Some("worker"), false, None)
        .await
        .map(|_| ())
        .expect_err("not started");
    assert!(
        matches!(worker, RuntimeError::NoService { .. }),
        "{worker:?}"
    );
    assert_eq!(changes(&fake.calls()), Vec::<String>::new());
}

#[tokio::test]
async fn exec_needs_a_running_pod_of_the_service() {
    let fake = Fake::new();
    super::sequence::ours(&fake);
    let starting = Shape {
        running: false,
        ready: false,
        ..UP
    };
    put_pod(&fake, "web-1", "web", kind::SERVICE, starting);
    let rt = runtime(&fake);
    let argv = ["true".to_owned()];
    for service in ["web", "worker"] {
        let refused = rt
            .exec(&env(), service, &argv)
            .await
            .map(|_| ())
            .expect_err("refused");
        assert!(
            matches!(&refused, RuntimeError::NoService { service: s, .. } if s == service),
            "{refused:?}"
        );
    }
    assert!(!fake.calls().iter().any(|c| c.contains("/exec")));
    assert_eq!(changes(&fake.calls()), Vec::<String>::new());
}
