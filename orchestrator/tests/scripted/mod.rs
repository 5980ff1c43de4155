//! A runtime that answers from a script, for tests of what the commands and the page do with
//! a runtime's answers without Docker or a cluster; also the smallest example of plugging
//! another runtime into the trait.

use std::sync::Mutex;

use af_orchestrator::env_id::EnvId;
use af_orchestrator::lifecycle::interrupt::Interrupt;
use af_orchestrator::plan::{EnvPlan, Kind};
use af_orchestrator::runtime::{
    Action, AdminEndpoint, Capabilities, DownReport, EnvStatus, EnvSummary, ExecIo, LineStream,
    OwnedObject, Progress, Runtime, RuntimeError, ServiceUp, UpReport,
};
use futures_util::future::BoxFuture;

/// A runtime that answers from a script: `up` walks its steps, `status` and `down` answer what
/// they are given, `restart` knows only `web`.
pub(crate) struct Scripted {
    /// What `down` answers (once).
    pub down: Mutex<Option<DownReport>>,
    /// What `admin` answers.
    pub admin: Option<AdminEndpoint>,
    /// Ctrl-C arrives while this step of `up` runs.
    pub ctrl_c_during: Option<(&'static str, Interrupt)>,
    /// What `status` answers; an environment that does not exist when `None`.
    pub status: Option<EnvStatus>,
}

impl Scripted {
    /// Nothing scripted: no admin API, no Ctrl-C, no environment.
    pub(crate) fn new() -> Scripted {
        Scripted {
            down: Mutex::new(None),
            admin: None,
            ctrl_c_during: None,
            status: None,
        }
    }
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
            let steps = ["networks".to_owned(), "starting sidecar".to_owned()]
                .into_iter()
                .chain(plan.services.iter().map(|s| format!("starting {}", s.name)));
            for step in steps {
                progress.begin(&step)?;
                if let Some((during, interrupt)) = &self.ctrl_c_during
                    && step == *during
                {
                    interrupt.request();
                }
            }
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
            Ok(self.status.clone().unwrap_or_else(|| EnvStatus {
                env: env.clone(),
                exists: false,
                sidecar: None,
                services: Vec::new(),
                journal: None,
                watched: None,
                on_loss: None,
                containment: None,
            }))
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
    fn down<'a>(
        &'a self,
        _: &'a EnvId,
        _: &'a dyn Progress,
    ) -> BoxFuture<'a, Result<DownReport, RuntimeError>> {
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
        Box::pin(async move {
            self.admin
                .clone()
                .ok_or_else(|| RuntimeError::AdminUnreachable("scripted".to_owned()))
        })
    }
    fn list(&self) -> BoxFuture<'_, Result<Vec<EnvSummary>, RuntimeError>> {
        Box::pin(async move { Ok(Vec::new()) })
    }
    fn exec_attached<'a>(
        &'a self,
        _: &'a EnvId,
        _: &'a str,
        _: &'a [String],
        _: ExecIo<'a>,
    ) -> BoxFuture<'a, Result<Option<i64>, RuntimeError>> {
        Box::pin(async move { Err(RuntimeError::Unsupported("no exec".to_owned())) })
    }
    fn restart_sidecar<'a>(&'a self, _: &'a EnvId) -> BoxFuture<'a, Result<(), RuntimeError>> {
        Box::pin(async move { Ok(()) })
    }
    fn restart_service<'a>(
        &'a self,
        env: &'a EnvId,
        service: &'a str,
    ) -> BoxFuture<'a, Result<(), RuntimeError>> {
        // Only `web` runs in this scripted environment.
        Box::pin(async move {
            match service {
                "web" => Ok(()),
                other => Err(RuntimeError::NoService {
                    env: env.to_string(),
                    service: other.to_owned(),
                }),
            }
        })
    }
}
