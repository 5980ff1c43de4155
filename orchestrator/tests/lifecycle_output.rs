//! The lifecycle commands against a runtime that answers from a script: what they print, the
//! codes and exit statuses they end with. No Docker needed; this is also the smallest example
//! of plugging another runtime into the trait.

use std::sync::Mutex;

use af_orchestrator::env_id::EnvId;
use af_orchestrator::lifecycle::{self, output::Format};
use af_orchestrator::plan::{EnvPlan, Kind, ServicePlan};
use af_orchestrator::runtime::{
    Action, AdminEndpoint, Capabilities, DownReport, EnvStatus, ExecOutput, LineStream,
    OwnedObject, Progress, Runtime, RuntimeError, ServiceUp, UpReport,
};
use af_policy::egress::EgressSpec;
use af_policy::error::ExitStatus;
use futures_util::future::BoxFuture;

struct Scripted {
    down: Mutex<Option<DownReport>>,
}

impl Runtime for Scripted {
    fn name(&self) -> &'static str {
        "scripted"
    }
    fn capabilities(&self) -> Capabilities {
        Capabilities {
            published_urls: true,
            admin_api: false,
            restart_sidecar: false,
        }
    }
    fn up<'a>(
        &'a self,
        plan: &'a EnvPlan,
        progress: &'a dyn Progress,
    ) -> BoxFuture<'a, Result<UpReport, RuntimeError>> {
        Box::pin(async move {
            let services: Vec<ServiceUp> = plan
                .services
                .iter()
                .map(|s| ServiceUp {
                    name: s.name.clone(),
                    kind: s.kind,
                    ready: true,
                    url: (s.kind == Kind::Web).then(|| "http://127.0.0.1:40000/".to_owned()),
                    action: Action::Created,
                })
                .collect();
            for s in &services {
                progress.service(s);
            }
            Ok(UpReport {
                env: plan.env.clone(),
                services,
                admin: None,
            })
        })
    }
    fn status<'a>(&'a self, env: &'a EnvId) -> BoxFuture<'a, Result<EnvStatus, RuntimeError>> {
        Box::pin(async move {
            Ok(EnvStatus {
                env: env.clone(),
                exists: false,
                sidecar: None,
                services: Vec::new(),
            })
        })
    }
    fn logs<'a>(
        &'a self,
        _: &'a EnvId,
        _: Option<&'a str>,
        _: bool,
        _: Option<usize>,
    ) -> BoxFuture<'a, Result<LineStream<'a>, RuntimeError>> {
        Box::pin(async move { Err(RuntimeError::Unsupported("no logs".to_owned())) })
    }
    fn down<'a>(&'a self, _: &'a EnvId) -> BoxFuture<'a, Result<DownReport, RuntimeError>> {
        Box::pin(async move {
            Ok(self
                .down
                .lock()
                .ok()
                .and_then(|mut d| d.take())
                .unwrap_or_default())
        })
    }
    fn inventory<'a>(
        &'a self,
        _: &'a EnvId,
    ) -> BoxFuture<'a, Result<Vec<OwnedObject>, RuntimeError>> {
        Box::pin(async move { Ok(Vec::new()) })
    }
    fn admin<'a>(&'a self, _: &'a EnvId) -> BoxFuture<'a, Result<AdminEndpoint, RuntimeError>> {
        Box::pin(async move { Err(RuntimeError::AdminUnreachable("scripted".to_owned())) })
    }
    fn exec<'a>(
        &'a self,
        _: &'a EnvId,
        _: &'a str,
        _: &'a [String],
    ) -> BoxFuture<'a, Result<ExecOutput, RuntimeError>> {
        Box::pin(async move { Err(RuntimeError::Unsupported("no exec".to_owned())) })
    }
    fn restart_sidecar<'a>(&'a self, _: &'a EnvId) -> BoxFuture<'a, Result<(), RuntimeError>> {
        Box::pin(async move { Ok(()) })
    }
}

fn env() -> EnvId {
    EnvId::parse("demo-main-abc123").expect("id")
}

#[tokio::test]
async fn down_that_leaves_something_names_it_and_ends_with_af_run_030_status_5() {
    let runtime = Scripted {
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
    let runtime = Scripted {
        down: Mutex::new(None),
    };
    let web = ServicePlan::new("web", Kind::Web, "/x");
    let worker = ServicePlan::new("worker", Kind::Worker, "/x");
    let plan = EnvPlan::new(env(), "demo", vec![web, worker], EgressSpec::default()).expect("plan");
    let mut out = Vec::new();
    lifecycle::up::run(&runtime, &plan, Format::Json, &mut out)
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
async fn status_of_an_unknown_environment_says_it_is_not_running() {
    let runtime = Scripted {
        down: Mutex::new(None),
    };
    let mut out = Vec::new();
    let status = lifecycle::status::run(&runtime, &env(), Format::Human, &mut out)
        .await
        .expect("status");
    assert!(!status.exists);
    assert!(String::from_utf8_lossy(&out).contains("not running"));
}
