//! The lifecycle commands against a runtime that answers from a script (and, for the commands
//! that read the sidecar, a fake admin API on loopback): what they print, the codes and exit
//! statuses they end with. No Docker needed; this is also the smallest example of plugging
//! another runtime into the trait.

#![allow(
    clippy::expect_used,
    reason = "test helpers fail the test by panicking, like #[test] functions"
)]

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use af_orchestrator::lifecycle::inbox::Wait;
use af_orchestrator::lifecycle::interrupt::Interrupt;
use af_orchestrator::lifecycle::webhook::{Prepared, Trigger};
use af_orchestrator::modes::ModesInput;
use af_orchestrator::webhook::{Provider, WebhookSecrets};
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use af_orchestrator::env_id::EnvId;
use af_orchestrator::lifecycle::{self, output::Display, output::Format};
use af_orchestrator::plan::{EnvPlan, Kind, ServicePlan};
use af_orchestrator::runtime::{
    AdminEndpoint, DownReport, EnvStatus, JournalPlace, JournalStorage, ServiceStatus,
};
use af_policy::egress::{EgressSpec, Mode};
use af_policy::error::ExitStatus;
use af_sidecar_api::admin::{
    DEFAULT_LIMIT, DecisionsQuery, Delivered, Delivery, InboxQuery, JournalLosses, Page, Refusal,
};
use af_sidecar_api::journal::{DecisionRecord, Entry, Message, MessageKind, MessageRecord, Record};
mod scripted;

use scripted::Scripted;

#[tokio::test]
async fn restart_names_what_it_restarted_and_refuses_a_service_that_does_not_run() {
    let runtime = Scripted {
        admin: None,
        ctrl_c_during: None,
        status: None,
        down: Mutex::new(None),
    };
    let mut out = Vec::new();
    lifecycle::restart::run(&runtime, &env(), None, false, Format::Human, &mut out)
        .await
        .expect("the sidecar restarted");
    assert_eq!(
        String::from_utf8_lossy(&out),
        "restarted sidecar\nenv demo-main-abc123\n"
    );
    let mut out = Vec::new();
    lifecycle::restart::run(&runtime, &env(), Some("web"), true, Format::Json, &mut out)
        .await
        .expect("web restarted");
    let doc: Value = serde_json::from_slice(&out).expect("json");
    assert_eq!(doc, json!({"env": "demo-main-abc123", "restarted": "web"}));
    let mut out = Vec::new();
    let refused =
        lifecycle::restart::run(&runtime, &env(), Some("db"), false, Format::Human, &mut out)
            .await
            .expect_err("db does not run");
    assert_eq!(refused.code.code, "AF-RUN-031", "{refused}");
    assert!(refused.statement.contains("db"), "{refused}");
    assert!(out.is_empty(), "nothing printed but the refusal");
}

fn env() -> EnvId {
    EnvId::parse("demo-main-abc123").expect("id")
}

#[tokio::test]
async fn down_that_leaves_something_names_it_and_ends_with_af_run_030_status_5() {
    let runtime = Scripted {
        admin: None,
        ctrl_c_during: None,
        status: None,
        down: Mutex::new(Some(DownReport {
            removed: vec!["container af-demo-main-abc123-sidecar".to_owned()],
            failed: vec![(
                "network af-demo-main-abc123-internal".to_owned(),
                "endpoints attached".to_owned(),
            )],
        })),
    };
    let mut out = Vec::new();
    let refusal = lifecycle::down::run(&runtime, &env(), Format::Human, &mut out)
        .await
        .expect_err("incomplete");
    assert_eq!(refusal.code.code, "AF-RUN-030");
    assert_eq!(refusal.exit_status(), ExitStatus::TeardownIncomplete);
    assert_eq!(refusal.exit_status().code(), 5);
    assert!(
        refusal.statement.contains("af-demo-main-abc123-internal"),
        "{refusal}"
    );
    let text = String::from_utf8_lossy(&out);
    assert!(
        text.contains("removed container af-demo-main-abc123-sidecar"),
        "{text}"
    );
    assert!(
        text.contains("could not remove network af-demo-main-abc123-internal"),
        "{text}"
    );
}

#[tokio::test]
async fn up_as_json_is_one_document_with_every_service_and_the_env() {
    let runtime = Scripted::new();
    let web = ServicePlan::new("web", Kind::Web, "/x");
    let worker = ServicePlan::new("worker", Kind::Worker, "/x");
    let plan = EnvPlan::new(env(), "demo", vec![web, worker], EgressSpec::default()).expect("plan");
    let mut out = Vec::new();
    lifecycle::up::run(&runtime, &plan, Format::Json, &Interrupt::new(), &mut out)
        .await
        .expect("up");
    let doc: serde_json::Value = serde_json::from_slice(&out).expect("one JSON document");
    assert_eq!(doc["env"], "demo-main-abc123");
    assert_eq!(doc["services"][0]["name"], "web");
    assert_eq!(doc["services"][0]["url"], "http://127.0.0.1:40000/");
    assert_eq!(doc["services"][1]["name"], "worker");
    assert!(doc["services"][1]["url"].is_null());
}

#[tokio::test]
async fn ctrl_c_during_a_step_of_up_stops_before_the_next_with_af_run_032() {
    let interrupt = Interrupt::new();
    let runtime = Scripted {
        ctrl_c_during: Some(("starting sidecar", interrupt.clone())),
        ..Scripted::new()
    };
    let web = ServicePlan::new("web", Kind::Web, "/x");
    let plan = EnvPlan::new(env(), "demo", vec![web], EgressSpec::default()).expect("plan");
    let mut out = Vec::new();
    let refusal = lifecycle::up::run(&runtime, &plan, Format::Json, &interrupt, &mut out)
        .await
        .expect_err("interrupted");
    assert_eq!(refusal.code.code, "AF-RUN-032");
    assert_eq!(refusal.exit_status(), ExitStatus::Runtime);
    assert!(
        refusal.statement.contains("before starting web"),
        "the step under way finished, the next never began: {refusal}"
    );
    assert!(refusal.next.contains("af down"), "{refusal}");
    assert!(out.is_empty(), "no report of an environment that is not up");
}

#[tokio::test]
async fn status_of_an_unknown_environment_says_it_is_not_running() {
    let runtime = Scripted::new();
    let mut out = Vec::new();
    let status = lifecycle::status::run(&runtime, &env(), Format::Human, &mut out)
        .await
        .expect("status");
    assert!(!status.exists);
    assert!(String::from_utf8_lossy(&out).contains("not running"));
}

fn running(name: &str, state: &str, running: bool) -> ServiceStatus {
    ServiceStatus {
        name: name.to_owned(),
        state: state.to_owned(),
        running,
        url: None,
        addresses: Vec::new(),
    }
}

#[tokio::test]
async fn status_names_each_state_and_where_the_journal_lives() {
    let claim = JournalPlace {
        storage: JournalStorage::PersistentVolumeClaim,
        name: "af-sidecar-journal".to_owned(),
        reason: None,
    };
    let pod = JournalPlace {
        storage: JournalStorage::Pod,
        name: "af-sidecar-5d8f".to_owned(),
        reason: Some("the cluster has no default StorageClass".to_owned()),
    };
    for (journal, says) in [
        (
            claim,
            "  journal: PersistentVolumeClaim af-sidecar-journal (kept when the sidecar is restarted or replaced)\n",
        ),
        (
            pod,
            "  journal: in the pod af-sidecar-5d8f (lost when the sidecar's pod is restarted or replaced; the cluster has no default StorageClass)\n",
        ),
    ] {
        let mut runtime = Scripted::new();
        runtime.status = Some(EnvStatus {
            env: env(),
            exists: true,
            sidecar: Some(running("sidecar", "running", true)),
            services: vec![
                running("api", "crashloop", false),
                running("web", "pending (gate running)", false),
            ],
            journal: Some(journal),
            watched: None,
            on_loss: None,
            containment: None,
        });
        let mut out = Vec::new();
        lifecycle::status::run(&runtime, &env(), Format::Human, &mut out)
            .await
            .expect("status");
        let text = String::from_utf8_lossy(&out);
        assert!(text.contains("✓ sidecar          running\n"), "{text}");
        assert!(text.contains("✗ api              crashloop"), "{text}");
        assert!(
            text.contains("✗ web              pending (gate running)"),
            "{text}"
        );
        assert!(text.contains(says), "{text}");
        let mut json = Vec::new();
        lifecycle::status::run(&runtime, &env(), Format::Json, &mut json)
            .await
            .expect("status");
        let value: Value = serde_json::from_slice(&json).expect("json");
        assert!(value["journal"]["storage"].is_string(), "{value}");
    }
}

const TOKEN: &str = "fake-admin-token-0123456789";

/// The sidecar's admin API as far as `af inbox` and `af webhook trigger` use it.
#[derive(Default)]
struct FakeSidecar {
    messages: Mutex<Vec<Record>>,
    decisions: Mutex<Vec<Record>>,
    delivered: Mutex<Vec<Delivery>>,
    /// The status the service "answers" deliveries with.
    service_status: u16,
}

/// A status and the JSON body to answer it with.
fn answer(status: u16, body: &impl Serialize) -> (u16, String) {
    (status, serde_json::to_string(body).expect("serializes"))
}

fn refusal(status: u16, code: &str, statement: &str, next: &str) -> (u16, String) {
    let body = Refusal {
        code: code.to_owned(),
        statement: statement.to_owned(),
        next: next.to_owned(),
    };
    answer(status, &body)
}

fn record(seq: u64, entry: Entry) -> Record {
    Record {
        seq,
        at: "2025-06-01T14:03:01.000Z".to_owned(),
        env: "demo-main-abc123".to_owned(),
        entry,
    }
}

fn page(records: &[Record], next_since: u64, committed: u64) -> Page {
    Page {
        records: records.to_vec(),
        next_since,
        committed,
        losses: JournalLosses::default(),
    }
}

impl FakeSidecar {
    fn add(&self, seq: u64, to: &str, subject: &str, code: &str) {
        let message = MessageRecord {
            via: "capture".to_owned(),
            client: "10.213.0.5:40000".parse().expect("addr"),
            host: "api.sendgrid.com".to_owned(),
            rule: Some("rules[0] api.sendgrid.com".to_owned()),
            message: Message {
                provider: "sendgrid".to_owned(),
                kind: MessageKind::Email,
                from: Some("noreply@shop.test".to_owned()),
                to: vec![to.to_owned()],
                subject: Some(subject.to_owned()),
                text: Some(format!("Your code is {code}.")),
                html: None,
                links: vec!["https://shop.test/verify?t=1".to_owned()],
                code: Some(code.to_owned()),
            },
        };
        if let Ok(mut m) = self.messages.lock() {
            m.push(record(seq, Entry::Message(message)));
        }
    }

    /// As the sidecar answers: matches after `since` whose recipient and subject contain `to`
    /// and `subject` (case-insensitive), the newest `limit` of them, and the committed position.
    fn inbox(&self, query: &str) -> (u16, String) {
        let q: InboxQuery = serde_urlencoded::from_str(query).unwrap_or_default();
        let since = q.since.unwrap_or(0);
        let limit = q.limit.unwrap_or(DEFAULT_LIMIT);
        let all = self.messages.lock().map(|m| m.clone()).unwrap_or_default();
        let committed = all.iter().map(|r| r.seq).max().unwrap_or(0);
        let matching: Vec<Record> = all
            .into_iter()
            .filter(|r| r.seq > since)
            .filter(|r| {
                r.entry
                    .as_message()
                    .is_some_and(|m| m.message.matches(q.to.as_deref(), q.subject.as_deref()))
            })
            .collect();
        let records = &matching[matching.len().saturating_sub(limit)..];
        answer(200, &page(records, committed.max(since), committed))
    }

    /// As the sidecar answers `/v1/decisions`: after `since`, the first `limit`, or with
    /// `newest=true` the last `limit`.
    fn decisions(&self, query: &str) -> (u16, String) {
        let q: DecisionsQuery = serde_urlencoded::from_str(query).unwrap_or_default();
        let since = q.since.unwrap_or(0);
        let limit = q.limit.unwrap_or(DEFAULT_LIMIT);
        let all = self.decisions.lock().map(|d| d.clone()).unwrap_or_default();
        let after: Vec<Record> = all.into_iter().filter(|r| r.seq > since).collect();
        let records = if q.newest {
            &after[after.len().saturating_sub(limit)..]
        } else {
            &after[..after.len().min(limit)]
        };
        let next = records.last().map_or(since, |r| r.seq);
        answer(200, &page(records, next, next))
    }

    async fn answer(&self, req: Request<Incoming>) -> (u16, String) {
        let authorized = req
            .headers()
            .get("authorization")
            .is_some_and(|v| v.as_bytes() == format!("Bearer {TOKEN}").as_bytes());
        if !authorized {
            return refusal(401, "AF-NET-020", "No token.", "Send it.");
        }
        let path = req.uri().path().to_owned();
        let query = req.uri().query().unwrap_or("").to_owned();
        if path == "/v1/inbox" {
            return self.inbox(&query);
        }
        if path == "/v1/decisions" {
            return self.decisions(&query);
        }
        if let Some(seq) = path.strip_prefix("/v1/inbox/") {
            let all = self.messages.lock().map(|m| m.clone()).unwrap_or_default();
            return match all.iter().find(|r| r.seq.to_string() == seq) {
                Some(record) => answer(200, record),
                None => refusal(
                    404,
                    "AF-NET-021",
                    &format!("There is no captured message {seq}."),
                    "Run `af inbox list` to see the messages.",
                ),
            };
        }
        if path == "/v1/deliver" && req.method() == hyper::Method::POST {
            let body = req
                .into_body()
                .collect()
                .await
                .map(|b| b.to_bytes())
                .unwrap_or_default();
            let Ok(delivery) = serde_json::from_slice::<Delivery>(&body) else {
                return refusal(400, "AF-NET-021", "Not a delivery.", "-");
            };
            if let Ok(mut d) = self.delivered.lock() {
                d.push(delivery);
            }
            let body = if self.service_status == 200 {
                "received\n"
            } else {
                "bad signature\n"
            };
            let delivered = Delivered {
                status: self.service_status,
                headers: [("content-type".to_owned(), "text/plain".to_owned())].into(),
                body: body.to_owned(),
            };
            return answer(200, &delivered);
        }
        refusal(404, "AF-NET-021", "No route.", "-")
    }
}

/// What `af net log -o json` and `af inbox list -o json` print.
#[derive(Deserialize)]
struct Listing {
    env: String,
    records: Vec<Record>,
}

/// The captured message of `record`.
fn message_of(record: &Record) -> &Message {
    &record.entry.as_message().expect("a message record").message
}

/// Serve `fake` on a loopback port; the scripted runtime points `admin` at it.
async fn serve(fake: Arc<FakeSidecar>) -> Scripted {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr: SocketAddr = listener.local_addr().expect("addr");
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let fake = fake.clone();
            tokio::spawn(async move {
                let service = hyper::service::service_fn(move |req| {
                    let fake = fake.clone();
                    async move {
                        let (status, body) = fake.answer(req).await;
                        let mut resp = Response::new(Full::new(Bytes::from(body)));
                        *resp.status_mut() = hyper::StatusCode::from_u16(status).expect("status");
                        Ok::<_, Infallible>(resp)
                    }
                });
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), service)
                    .await;
            });
        }
    });
    Scripted {
        down: Mutex::new(None),
        admin: Some(AdminEndpoint::direct(addr, TOKEN.to_owned())),
        ctrl_c_during: None,
        status: None,
    }
}

fn fake(service_status: u16) -> Arc<FakeSidecar> {
    Arc::new(FakeSidecar {
        service_status,
        ..FakeSidecar::default()
    })
}

#[tokio::test]
async fn net_log_limit_shows_the_newest_records_oldest_first_like_tail() {
    let fake = fake(200);
    if let Ok(mut d) = fake.decisions.lock() {
        for seq in 1..=5u64 {
            let decision = DecisionRecord {
                via: "proxy".into(),
                method: "GET".into(),
                host: "api.x.test".to_owned(),
                port: 80,
                path: format!("/{seq}"),
                mode: Some(Mode::Allow),
                allowed: true,
                status: Some(200),
                ..DecisionRecord::default()
            };
            d.push(record(seq, Entry::Decision(decision)));
        }
    }
    let runtime = serve(fake).await;
    let paths = |out: &[u8]| -> Vec<String> {
        let doc: Listing = serde_json::from_slice(out).expect("one JSON document");
        doc.records
            .iter()
            .filter_map(|r| r.entry.as_decision().map(|d| d.path.clone()))
            .collect()
    };
    let query = |limit| DecisionsQuery {
        limit,
        ..DecisionsQuery::default()
    };
    let mut out = Vec::new();
    lifecycle::net_log::run(
        &runtime,
        &env(),
        query(Some(2)),
        false,
        Format::Json,
        &mut out,
    )
    .await
    .expect("net log --limit 2");
    assert_eq!(paths(&out), ["/4", "/5"]);
    // The control: without --limit, every record, oldest first.
    let mut out = Vec::new();
    lifecycle::net_log::run(&runtime, &env(), query(None), false, Format::Json, &mut out)
        .await
        .expect("net log");
    assert_eq!(paths(&out), ["/1", "/2", "/3", "/4", "/5"]);
}

#[tokio::test]
async fn inbox_list_prints_one_row_per_message_and_json_is_one_document() {
    let fake = fake(200);
    fake.add(3, "alice@example.com", "Welcome", "");
    fake.add(7, "bob@example.com", "Your code is 481516", "481516");
    let runtime = serve(fake).await;
    let mut out = Vec::new();
    lifecycle::inbox::list(
        &runtime,
        &env(),
        InboxQuery::default(),
        Format::Human,
        &mut out,
    )
    .await
    .expect("list");
    let text = String::from_utf8_lossy(&out);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 3, "{text}");
    assert!(lines[0].contains("SEQ") && lines[0].contains("SUBJECT") && lines[0].ends_with("CODE"));
    assert!(lines[1].trim_start().starts_with("3 ") && lines[1].contains("alice@example.com"));
    assert!(
        lines[2].contains("bob@example.com") && lines[2].ends_with("481516"),
        "{text}"
    );

    let mut out = Vec::new();
    let query = InboxQuery {
        to: Some("BOB@".to_owned()),
        ..InboxQuery::default()
    };
    lifecycle::inbox::list(&runtime, &env(), query, Format::Json, &mut out)
        .await
        .expect("list --to");
    let doc: Listing = serde_json::from_slice(&out).expect("one JSON document");
    assert_eq!(doc.env, "demo-main-abc123");
    assert_eq!(doc.records.len(), 1);
    assert_eq!(message_of(&doc.records[0]).code.as_deref(), Some("481516"));

    let newest = InboxQuery {
        limit: Some(1),
        ..InboxQuery::default()
    };
    let records = lifecycle::inbox::list(&runtime, &env(), newest, Format::Json, &mut Vec::new())
        .await
        .expect("list --limit 1");
    assert_eq!(records.len(), 1);
    assert_eq!(records[0].seq, 7, "--limit keeps the newest");
}

#[tokio::test]
async fn inbox_list_cuts_a_long_recipient_and_keeps_the_subject_in_its_own_column() {
    let fake = fake(200);
    let long = "a-very-long-recipient-name@accounts.example.com";
    fake.add(3, long, "Welcome aboard", "");
    fake.add(12, "bob@example.com", "Your code is 481516", "481516");
    let runtime = serve(fake).await;
    let mut out = Vec::new();
    lifecycle::inbox::list(
        &runtime,
        &env(),
        InboxQuery::default(),
        Format::Human,
        &mut out,
    )
    .await
    .expect("list");
    let text = String::from_utf8_lossy(&out);
    let lines: Vec<&str> = text.lines().collect();
    let subject_at = lines[0].find("SUBJECT").expect("a SUBJECT heading");
    for line in &lines[1..] {
        let (before, after) = line.split_at(
            line.char_indices()
                .nth(lines[0][..subject_at].chars().count())
                .map_or(line.len(), |(i, _)| i),
        );
        assert!(before.ends_with("  "), "two spaces before SUBJECT: {text}");
        assert!(
            !after.starts_with(' '),
            "the subject starts under its heading: {text}"
        );
    }
    assert!(
        lines[1].contains("a-very-long-recipient-name@acco…"),
        "{text}"
    );
    assert!(!text.contains(long), "{text}");
    // The control: a short recipient is shown whole.
    assert!(lines[2].contains("bob@example.com  "), "{text}");
}

#[tokio::test]
async fn inbox_get_shows_a_message_and_refuses_an_unknown_number_as_not_found() {
    let fake = fake(200);
    fake.add(4, "alice@example.com", "Sign in", "123456");
    let runtime = serve(fake).await;
    let mut out = Vec::new();
    let record = lifecycle::inbox::get(&runtime, &env(), 4, Format::Human, &mut out)
        .await
        .expect("get");
    assert_eq!(record.seq, 4);
    let text = String::from_utf8_lossy(&out);
    assert!(
        text.contains("code     123456\nlink     https://shop.test/verify?t=1"),
        "{text}"
    );

    let err = lifecycle::inbox::get(&runtime, &env(), 99, Format::Human, &mut Vec::new())
        .await
        .expect_err("unknown");
    assert_eq!(err.code.code, "AF-RUN-054");
    assert_eq!(err.exit_status(), ExitStatus::NotFound);
    assert!(
        err.statement.contains("has no captured message 99"),
        "{}",
        err.statement
    );
    assert!(err.next.contains("af inbox list"), "{}", err.next);
}

fn waiting_for(to: &str, timeout: Duration) -> Wait {
    Wait {
        to: to.to_owned(),
        subject: None,
        timeout,
        poll: Duration::from_millis(50),
    }
}

#[tokio::test]
async fn inbox_wait_takes_the_newest_message_already_captured() {
    let fake = fake(200);
    fake.add(1, "alice@example.com", "First", "111111");
    fake.add(2, "bob@example.com", "Other", "222222");
    fake.add(5, "alice@example.com", "Second", "555555");
    let runtime = serve(fake).await;
    let mut out = Vec::new();
    let wait = waiting_for("alice@example.com", Duration::from_secs(5));
    let found = lifecycle::inbox::wait(&runtime, &env(), &wait, Format::Json, &mut out)
        .await
        .expect("already there");
    assert_eq!(found.seq, 5);
    let doc: Record = serde_json::from_slice(&out).expect("JSON");
    assert_eq!(
        message_of(&doc).code.as_deref(),
        Some("555555"),
        "`jq .message.code` gives the code"
    );
}

#[tokio::test]
async fn inbox_wait_picks_up_a_later_message_and_times_out_with_af_run_050() {
    let fake = fake(200);
    fake.add(1, "bob@example.com", "Not for alice", "999999");
    let runtime = serve(fake.clone()).await;
    let later = fake.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(300)).await;
        later.add(2, "alice@example.com", "Your code", "424242");
    });
    let wait = waiting_for("alice@example.com", Duration::from_secs(10));
    let found = lifecycle::inbox::wait(&runtime, &env(), &wait, Format::Human, &mut Vec::new())
        .await
        .expect("arrives");
    assert_eq!(message_of(&found).code.as_deref(), Some("424242"));

    let wait = waiting_for("carol@example.com", Duration::from_millis(300));
    let started = std::time::Instant::now();
    let err = lifecycle::inbox::wait(&runtime, &env(), &wait, Format::Human, &mut Vec::new())
        .await
        .expect_err("nothing for carol");
    assert!(started.elapsed() >= Duration::from_millis(300));
    assert_eq!(err.code.code, "AF-RUN-050");
    assert_eq!(err.exit_status(), ExitStatus::Runtime);
    assert!(
        err.statement.contains("carol@example.com") && err.statement.contains("300ms"),
        "{err}"
    );
}

fn shop_plan() -> EnvPlan {
    let mut web = ServicePlan::new("web", Kind::Web, "/x");
    web.port = Some(8080);
    let egress: EgressSpec = serde_json::from_value(json!({
        "rules": [{"host": "api.stripe.com", "mode": "mock", "webhook_path": "/hooks/stripe"}],
    }))
    .expect("egress");
    let worker = ServicePlan::new("jobs", Kind::Worker, "/x");
    EnvPlan::new(env(), "shop", vec![worker, web], egress).expect("plan")
}

fn stripe_trigger(sets: &[&str]) -> Trigger {
    Trigger {
        provider: Provider::Stripe,
        event: "payment_intent.succeeded".to_owned(),
        sets: sets.iter().map(|s| (*s).to_owned()).collect(),
        service: None,
        path: None,
    }
}

/// Stripe's own check: `v1` is HMAC-SHA256 of `t.body` under the whole `whsec_` secret.
fn stripe_verifies(secret: &str, header: &str, body: &str) -> bool {
    use hmac::{Hmac, Mac};
    let field = |k: &str| {
        header
            .split(',')
            .find_map(|part| part.strip_prefix(&format!("{k}=")))
            .unwrap_or("")
    };
    let mut mac = Hmac::<sha2::Sha256>::new_from_slice(secret.as_bytes()).expect("key");
    mac.update(format!("{}.{body}", field("t")).as_bytes());
    let expected: String = mac
        .finalize()
        .into_bytes()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    field("v1") == expected
}

#[tokio::test]
async fn webhook_trigger_delivers_a_stripe_event_the_service_can_verify() {
    let fake = fake(200);
    let runtime = serve(fake.clone()).await;
    let plan = shop_plan();
    let prepared = Prepared::new(
        &plan,
        &stripe_trigger(&["data.object.amount=5000"]),
        SystemTime::now(),
    )
    .expect("prepared");
    let mut out = Vec::new();
    let answer = lifecycle::webhook::run(&runtime, &env(), &prepared, Format::Human, &mut out)
        .await
        .expect("delivered");
    assert_eq!(answer.status, 200);
    let text = String::from_utf8_lossy(&out);
    assert!(
        text.contains("→ stripe payment_intent.succeeded to web:8080/hooks/stripe"),
        "{text}"
    );
    assert!(text.contains("← 200\n  received"), "{text}");

    let delivered = fake.delivered.lock().map(|d| d.clone()).unwrap_or_default();
    assert_eq!(delivered.len(), 1);
    let d = &delivered[0];
    assert_eq!(
        (d.service.as_str(), d.port, d.path.as_str()),
        ("web", 8080, "/hooks/stripe")
    );
    let body = d.body.as_str();
    assert_eq!(
        body,
        prepared.body(),
        "the exact bytes signed are the bytes sent"
    );
    let event: Value = serde_json::from_str(body).expect("JSON body");
    assert_eq!(event["type"], "payment_intent.succeeded");
    assert_eq!(event["data"]["object"]["amount"], 5000);
    // The secret every service has in STRIPE_WEBHOOK_SECRET.
    let secret = WebhookSecrets::derive(TOKEN);
    let header = d.headers.get("stripe-signature").expect("signature header");
    assert!(
        stripe_verifies(secret.get(Provider::Stripe), header, body),
        "{header}"
    );
    assert!(!stripe_verifies("whsec_other", header, body));
}

#[tokio::test]
async fn webhook_trigger_answered_with_an_error_is_af_run_051_showing_the_answer() {
    let runtime = serve(fake(400)).await;
    let prepared =
        Prepared::new(&shop_plan(), &stripe_trigger(&[]), SystemTime::now()).expect("prepared");
    let mut out = Vec::new();
    let err = lifecycle::webhook::run(&runtime, &env(), &prepared, Format::Json, &mut out)
        .await
        .expect_err("400");
    assert_eq!(err.code.code, "AF-RUN-051");
    assert!(
        err.statement
            .contains("web:8080/hooks/stripe answered the webhook with 400"),
        "{err}"
    );
    assert!(err.statement.contains("bad signature"), "{err}");
    assert!(out.is_empty(), "only the refusal is printed");
}

#[test]
fn webhook_with_a_bad_set_or_no_such_service_is_refused_before_delivery() {
    let plan = shop_plan();
    let err = Prepared::new(&plan, &stripe_trigger(&["type.x=1"]), SystemTime::now())
        .expect_err("bad --set");
    assert_eq!(err.code.code, "AF-RUN-051");
    let mut trigger = stripe_trigger(&[]);
    trigger.service = Some("nope".to_owned());
    let err = Prepared::new(&plan, &trigger, SystemTime::now()).expect_err("no service");
    assert!(
        err.statement.contains("the services are jobs, web"),
        "{err}"
    );
}

#[test]
fn up_warns_about_each_missing_test_credential() {
    let mut plan = EnvPlan::new(env(), "shop", Vec::new(), EgressSpec::default()).expect("plan");
    assert!(lifecycle::up::warnings(&plan).is_empty());
    plan.modes = ModesInput {
        missing_credentials: vec!["STRIPE_TEST_KEY".to_owned()],
        ..ModesInput::default()
    };
    let warnings = lifecycle::up::warnings(&plan);
    assert_eq!(warnings.len(), 1);
    assert!(
        warnings[0].starts_with("STRIPE_TEST_KEY is not set") && warnings[0].contains("AF-NET-044")
    );
}

/// What HAR 1.2 (<http://www.softwareishard.com/blog/har-12-spec/>) requires of `doc`, as a list
/// of what is missing or of the wrong type; empty when every required field is there.
fn har_1_2_problems(doc: &Value) -> Vec<String> {
    fn need(problems: &mut Vec<String>, at: &str, v: &Value, field: &str, ok: fn(&Value) -> bool) {
        if !v.get(field).is_some_and(ok) {
            problems.push(format!("{at}.{field}"));
        }
    }
    let string = Value::is_string as fn(&Value) -> bool;
    let number = Value::is_number as fn(&Value) -> bool;
    let array = Value::is_array as fn(&Value) -> bool;
    let object = Value::is_object as fn(&Value) -> bool;
    let pairs = |v: &Value| {
        v.as_array().is_some_and(|a| {
            a.iter()
                .all(|p| p["name"].is_string() && p["value"].is_string())
        })
    };
    let mut p = Vec::new();
    let log = &doc["log"];
    need(&mut p, "", doc, "log", object);
    need(&mut p, "log", log, "version", |v| v == "1.2");
    need(&mut p, "log", log, "creator", object);
    need(&mut p, "log.creator", &log["creator"], "name", string);
    need(&mut p, "log.creator", &log["creator"], "version", string);
    need(&mut p, "log", log, "entries", array);
    for (i, e) in log["entries"].as_array().into_iter().flatten().enumerate() {
        let at = format!("log.entries[{i}]");
        need(&mut p, &at, e, "startedDateTime", |v| {
            v.as_str()
                .is_some_and(|t| humantime::parse_rfc3339(t).is_ok())
        });
        need(&mut p, &at, e, "time", number);
        need(&mut p, &at, e, "cache", object);
        let (req, res, timings) = (&e["request"], &e["response"], &e["timings"]);
        let at_req = format!("{at}.request");
        for field in ["method", "url", "httpVersion"] {
            need(&mut p, &at_req, req, field, string);
        }
        need(&mut p, &at_req, req, "cookies", array);
        need(&mut p, &at_req, req, "headers", pairs);
        need(&mut p, &at_req, req, "queryString", pairs);
        need(&mut p, &at_req, req, "headersSize", number);
        need(&mut p, &at_req, req, "bodySize", number);
        if let Some(post) = req.get("postData") {
            need(
                &mut p,
                &format!("{at_req}.postData"),
                post,
                "mimeType",
                string,
            );
        }
        let at_res = format!("{at}.response");
        need(&mut p, &at_res, res, "status", number);
        for field in ["statusText", "httpVersion", "redirectURL"] {
            need(&mut p, &at_res, res, field, string);
        }
        need(&mut p, &at_res, res, "cookies", array);
        need(&mut p, &at_res, res, "headers", pairs);
        need(&mut p, &at_res, res, "content", object);
        need(
            &mut p,
            &format!("{at_res}.content"),
            &res["content"],
            "size",
            number,
        );
        need(
            &mut p,
            &format!("{at_res}.content"),
            &res["content"],
            "mimeType",
            string,
        );
        need(&mut p, &at_res, res, "headersSize", number);
        need(&mut p, &at_res, res, "bodySize", number);
        for field in ["send", "wait", "receive"] {
            need(&mut p, &format!("{at}.timings"), timings, field, number);
        }
        // `time` is the sum of the timings that apply (-1 means "does not apply").
        let sum: f64 = timings
            .as_object()
            .into_iter()
            .flatten()
            .filter_map(|(_, v)| v.as_f64())
            .filter(|t| *t >= 0.0)
            .sum();
        if e["time"].as_f64() != Some(sum) {
            p.push(format!("{at}.time is not the sum of its timings"));
        }
    }
    p
}

#[tokio::test]
async fn net_log_har_is_har_1_2_with_one_entry_per_decision_in_journal_order() {
    let fake = fake(200);
    let decision = |seq: u64, d: DecisionRecord| record(seq, Entry::Decision(d));
    let client: SocketAddr = "10.213.0.5:40000".parse().expect("addr");
    let journal = [
        decision(
            1,
            DecisionRecord {
                via: "proxy".into(),
                client,
                method: "GET".into(),
                host: "api.x.test".to_owned(),
                port: 80,
                path: "/v1/items?page=2".to_owned(),
                mode: Some(Mode::Allow),
                rule: Some("rules[1] api.x.test".into()),
                reason: "rule".into(),
                allowed: true,
                status: Some(200),
                bytes_down: 512,
                duration_ms: 12,
                ..DecisionRecord::default()
            },
        ),
        decision(
            2,
            DecisionRecord {
                via: "proxy".into(),
                client,
                method: "CONNECT".into(),
                host: "tracker.test".to_owned(),
                port: 443,
                mode: Some(Mode::Block),
                reason: "default".into(),
                status: Some(403),
                code: Some("AF-NET-010".into()),
                ..DecisionRecord::default()
            },
        ),
        record(
            3,
            Entry::Message(MessageRecord {
                via: "capture".to_owned(),
                client,
                host: "api.sendgrid.com".to_owned(),
                rule: Some("rules[0] api.sendgrid.com".to_owned()),
                message: Message {
                    provider: "sendgrid".to_owned(),
                    kind: MessageKind::Email,
                    from: None,
                    to: vec!["ada@shop.test".to_owned()],
                    subject: Some("Your code".to_owned()),
                    text: Some("Your code is 424242.".to_owned()),
                    html: None,
                    links: Vec::new(),
                    code: Some("424242".to_owned()),
                },
            }),
        ),
        decision(
            4,
            DecisionRecord {
                via: "intercept".into(),
                client,
                method: "POST".into(),
                host: "api.sendgrid.com".to_owned(),
                port: 443,
                path: "/v3/mail/send".to_owned(),
                mode: Some(Mode::Capture),
                rule: Some("rules[0] api.sendgrid.com".into()),
                reason: "rule".into(),
                status: Some(202),
                bytes_up: 300,
                duration_ms: 3,
                ..DecisionRecord::default()
            },
        ),
    ];
    if let Ok(mut d) = fake.decisions.lock() {
        d.extend(journal.iter().cloned());
    }
    let runtime = serve(fake).await;
    let dir = std::env::temp_dir().join(format!("af-har-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let path = dir.join("run.har");
    let mut out = Vec::new();
    lifecycle::net_log::write_har(
        &runtime,
        &env(),
        DecisionsQuery::default(),
        &path,
        Format::Human,
        &mut out,
    )
    .await
    .expect("net log --har");
    assert_eq!(
        String::from_utf8_lossy(&out).trim(),
        format!("3 requests written to {}", path.display())
    );
    let text = std::fs::read(&path).expect("the HAR file");
    let _ = std::fs::remove_dir_all(&dir);
    let doc: Value = serde_json::from_slice(&text).expect("JSON");
    assert_eq!(har_1_2_problems(&doc), Vec::<String>::new(), "{doc:#}");
    // One entry per decision, in journal order, each naming its record.
    let entries = doc["log"]["entries"].as_array().expect("entries");
    let decisions: Vec<(u64, &DecisionRecord)> = journal
        .iter()
        .filter_map(|r| r.entry.as_decision().map(|d| (r.seq, d)))
        .collect();
    assert_eq!(entries.len(), decisions.len());
    for (e, (seq, d)) in entries.iter().zip(&decisions) {
        assert_eq!(e["_af"]["seq"], *seq);
        assert_eq!(e["request"]["method"], &*d.method);
        let url = e["request"]["url"].as_str().expect("url");
        assert!(url.contains(&d.host), "{url} names {}", d.host);
        assert_eq!(e["response"]["status"], d.status.unwrap_or(0));
        assert_eq!(e["request"]["bodySize"], d.bytes_up);
        assert_eq!(e["response"]["bodySize"], d.bytes_down);
        assert_eq!(e["time"], d.duration_ms as f64);
    }
    assert_eq!(
        entries[0]["request"]["url"],
        "http://api.x.test/v1/items?page=2"
    );
    assert_eq!(entries[0]["request"]["queryString"][0]["value"], "2");
    assert_eq!(entries[0]["_af"]["verdict"], "forwarded");
    assert_eq!(entries[1]["_af"]["verdict"], "refused");
    assert_eq!(entries[1]["_af"]["code"], "AF-NET-010");
    assert_eq!(entries[2]["_af"]["verdict"], "answered");
    assert_eq!(entries[2]["_af"]["messages"], json!([3]));
    assert_eq!(
        entries[2]["request"]["postData"]["text"],
        "Your code is 424242."
    );
    assert!(entries[0]["request"].get("postData").is_none());
}

#[tokio::test]
async fn net_suggest_prints_rules_that_compile_with_the_manifest_and_cover_what_was_refused() {
    let fake = fake(200);
    let refused = |seq: u64, host: &str| {
        record(
            seq,
            Entry::Decision(DecisionRecord {
                via: "proxy".into(),
                method: "CONNECT".into(),
                host: host.to_owned(),
                port: 443,
                mode: Some(Mode::Block),
                reason: "default".into(),
                status: Some(403),
                code: Some("AF-NET-010".into()),
                ..DecisionRecord::default()
            }),
        )
    };
    if let Ok(mut d) = fake.decisions.lock() {
        d.extend([refused(1, "api.new.test"), refused(2, "api.new.test")]);
    }
    let runtime = serve(fake).await;
    let spec = EgressSpec {
        rules: vec![af_policy::egress::RuleSpec::new(
            "api.known.test",
            Mode::Allow,
        )],
        ..EgressSpec::default()
    };
    let mut out = Vec::new();
    lifecycle::net_suggest::run(
        &runtime,
        &env(),
        &spec,
        Mode::Allow,
        None,
        Format::Human,
        &mut out,
    )
    .await
    .expect("net suggest");
    let text = String::from_utf8(out).expect("utf-8");
    assert!(
        text.starts_with("# 2 request(s) went to the default"),
        "{text}"
    );
    let rules: Vec<af_policy::egress::RuleSpec> =
        serde_saphyr::from_str(&text).expect("the fragment is YAML rules");
    assert_eq!(rules.len(), 1, "{text}");
    let mut merged = spec.clone();
    merged.rules.extend(rules);
    let catalogue = af_policy::egress::Catalogue::compile(&merged).expect("compiles");
    let decision = catalogue.decide_host("api.new.test", 443);
    assert_eq!(decision.mode, Mode::Allow);
    assert_eq!(decision.rule.map(|r| r.index()), Some(1));
}

/// What `af up` of a web service and a worker prints on stdout as `format`, with the display
/// `af up -o FORMAT [--quiet]` gets on a terminal.
async fn up_on_a_terminal(format: Format, quiet: bool) -> String {
    let web = ServicePlan::new("web", Kind::Web, "/x");
    let worker = ServicePlan::new("worker", Kind::Worker, "/x");
    let plan = EnvPlan::new(env(), "demo", vec![web, worker], EgressSpec::default()).expect("plan");
    let display = Display::choose(format, quiet, true);
    let mut out = Vec::new();
    let interrupt = Interrupt::new();
    lifecycle::up::run_shown(
        &Scripted::new(),
        &plan,
        format,
        display,
        &interrupt,
        &mut out,
    )
    .await
    .expect("up");
    String::from_utf8(out).expect("utf-8")
}

#[tokio::test]
async fn up_quiet_prints_only_each_service_line_and_the_env() {
    assert_eq!(
        up_on_a_terminal(Format::Human, true).await,
        "✓ web              http://127.0.0.1:40000/\n✓ worker\nenv demo-main-abc123\n"
    );
}

#[tokio::test]
async fn up_as_json_on_a_terminal_is_still_one_document_and_no_progress() {
    let text = up_on_a_terminal(Format::Json, false).await;
    let doc: serde_json::Value = serde_json::from_str(&text).expect("one JSON document");
    assert_eq!(doc["services"][1]["name"], "worker");
    assert!(
        !text.contains('·') && !text.contains('✓') && !text.contains('\r'),
        "{text}"
    );
}
