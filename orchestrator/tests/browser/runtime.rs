//! A runtime that only answers `status`: the environment's services and the addresses they
//! hold, so the page can name the service a request came from. Every other operation is
//! refused, which the page never asks for.

use af_orchestrator::env_id::EnvId;
use af_orchestrator::plan::EnvPlan;
use af_orchestrator::runtime::{
    AdminEndpoint, Capabilities, DownReport, EnvStatus, ExecOutput, LineStream, OwnedObject,
    Progress, Runtime, RuntimeError, ServiceStatus, UpReport,
};
use futures_util::future::BoxFuture;

/// Services by name with their addresses, all running.
pub(crate) struct StatusOnly {
    services: Vec<ServiceStatus>,
}

impl StatusOnly {
    /// An environment of `services`, each `(name, address)`.
    pub(crate) fn new(services: &[(&str, &str)]) -> StatusOnly {
        let services = services
            .iter()
            .map(|(name, address)| ServiceStatus {
                name: (*name).to_owned(),
                state: "running".to_owned(),
                running: true,
                url: None,
                addresses: vec![address.parse().expect("an IP address")],
            })
            .collect();
        StatusOnly { services }
    }
}

fn refused<T>(what: &str) -> Result<T, RuntimeError> {
    Err(RuntimeError::Unsupported(format!(
        "{what}: this test's runtime only answers status"
    )))
}

impl Runtime for StatusOnly {
    fn name(&self) -> &'static str {
        "status-only"
    }
    fn capabilities(&self) -> Capabilities {
        Capabilities {
            published_urls: false,
            admin_api: false,
            restart_sidecar: false,
        }
    }
    fn up<'a>(
        &'a self,
        _: &'a EnvPlan,
        _: &'a dyn Progress,
    ) -> BoxFuture<'a, Result<UpReport, RuntimeError>> {
        Box::pin(async { refused("up") })
    }
    fn status<'a>(&'a self, env: &'a EnvId) -> BoxFuture<'a, Result<EnvStatus, RuntimeError>> {
        Box::pin(async move {
            Ok(EnvStatus {
                env: env.clone(),
                exists: true,
                sidecar: None,
                services: self.services.clone(),
                journal: None,
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
        Box::pin(async { refused("logs") })
    }
    fn down<'a>(
        &'a self,
        _: &'a EnvId,
        _: &'a dyn Progress,
    ) -> BoxFuture<'a, Result<DownReport, RuntimeError>> {
        Box::pin(async { refused("down") })
    }
    fn inventory<'a>(
        &'a self,
        _: &'a EnvId,
    ) -> BoxFuture<'a, Result<Vec<OwnedObject>, RuntimeError>> {
        Box::pin(async { refused("inventory") })
    }
    fn admin<'a>(&'a self, _: &'a EnvId) -> BoxFuture<'a, Result<AdminEndpoint, RuntimeError>> {
        Box::pin(async { refused("admin") })
    }
    fn exec<'a>(
        &'a self,
        _: &'a EnvId,
        _: &'a str,
        _: &'a [String],
    ) -> BoxFuture<'a, Result<ExecOutput, RuntimeError>> {
        Box::pin(async { refused("exec") })
    }
    fn restart_sidecar<'a>(&'a self, _: &'a EnvId) -> BoxFuture<'a, Result<(), RuntimeError>> {
        Box::pin(async { refused("restart") })
    }
    fn restart_service<'a>(
        &'a self,
        _: &'a EnvId,
        _: &'a str,
    ) -> BoxFuture<'a, Result<(), RuntimeError>> {
        Box::pin(async { refused("restart") })
    }
}
