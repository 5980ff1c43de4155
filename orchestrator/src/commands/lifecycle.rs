//! Dispatch of the lifecycle commands (`up`, `down`, `status`, `logs`, `restart`, `doctor`, `net log`,
//! `inbox`, `webhook trigger`, `ui`) to the library's runtime and `lifecycle` modules.

use std::path::Path;
use std::sync::Arc;
use std::time::SystemTime;

use af_orchestrator::env_id::EnvId;
use af_orchestrator::lifecycle;
use af_orchestrator::lifecycle::inbox::{self, Wait};
use af_orchestrator::lifecycle::interrupt::Interrupt;
use af_orchestrator::lifecycle::ls::{Asked, Place};
use af_orchestrator::lifecycle::output::{Display, Format as Out};
use af_orchestrator::lifecycle::webhook::{Prepared, Trigger};
use af_orchestrator::plan::EnvPlan;
use af_orchestrator::runtime::Runtime;
use af_orchestrator::runtime::factory::{self, Decision};
use af_orchestrator::runtime::local::LocalOptions;
use af_policy::error::{Report, codes};
use af_policy::placement::Provider;
use af_sidecar_api::admin::{DecisionsQuery, InboxQuery};

use super::load_manifest;
use crate::cli::{Command, EnvArg, Global, InboxCommand, NetCommand, WebhookCommand};
use crate::output::Format;
use crate::refusal::Refusal;

/// Run one lifecycle command; the status af exits with.
pub(super) fn run(global: &Global, command: &Command) -> Result<u8, Refusal> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| {
            Report::new(
                &codes::RUN_UNSUPPORTED,
                format!("af could not start its runtime: {e}."),
            )
        })?;
    rt.block_on(dispatch(global, command))
}

async fn dispatch(global: &Global, command: &Command) -> Result<u8, Refusal> {
    let out = match global.output {
        Format::Text => Out::Human,
        Format::Json => Out::Json,
    };
    let stdout = &mut std::io::stdout();
    if let Command::Doctor = command {
        let options = LocalOptions::from_env().map_err(|e| e.report())?;
        lifecycle::doctor::run(&options, out, stdout).await?;
        return Ok(0);
    }
    if let Command::Ls = command {
        // Any manifest found names the clusters to ask; without one, this machine's daemon.
        let manifest = load_manifest(global).ok().map(|(_, m)| m);
        let mut asked = Vec::new();
        for (placement, placed_there) in factory::places(manifest.as_ref()) {
            let local = placement.provider == Provider::Local;
            let found = match factory::connect_to(&placement).await {
                Ok(runtime) => runtime.list().await,
                Err(e) => Err(e),
            };
            asked.push(Asked {
                place: Place {
                    runtime: if local { "local" } else { "kubernetes" },
                    context: placement.kubeconfig_context.clone(),
                    required: placed_there,
                },
                found,
            });
        }
        lifecycle::ls::run(&asked, SystemTime::now(), out, stdout)?;
        return Ok(0);
    }
    let (arg, plan) = match command {
        Command::Up(arg) => (&arg.env, true),
        Command::Down(arg) => (&arg.env, false),
        Command::Status(arg) => (arg, false),
        Command::Logs { env, .. }
        | Command::Restart { env, .. }
        | Command::Ui { env, .. }
        | Command::Exec { env, .. } => (env, false),
        Command::Net(NetCommand::Log { env, .. } | NetCommand::Suggest { env, .. }) => (env, false),
        Command::Inbox(
            InboxCommand::List { env, .. }
            | InboxCommand::Get { env, .. }
            | InboxCommand::Wait { env, .. },
        ) => (env, false),
        Command::Webhook(WebhookCommand::Trigger { env, .. }) => (env, true),
        _ => return Ok(0),
    };
    let (env, plan, decision) = environment(global, arg, plan)?;
    // A webhook is built (and a bad --set or service refused) before any runtime is reached.
    let webhook = match command {
        Command::Webhook(WebhookCommand::Trigger {
            provider,
            event,
            sets,
            service,
            path,
            ..
        }) => {
            let plan = plan.as_ref().ok_or_else(|| {
                Report::new(&codes::MAN_NOT_FOUND, "No manifest names the services.")
            })?;
            let trigger = Trigger {
                provider: *provider,
                event: event.clone(),
                sets: sets.clone(),
                service: service.clone(),
                path: path.clone(),
            };
            Some(Prepared::new(plan, &trigger, SystemTime::now())?)
        }
        _ => None,
    };
    let runtime: Arc<dyn Runtime> =
        Arc::from(factory::connect(&decision).await.map_err(|e| e.report())?);
    if let Command::Ui { port, no_open, .. } = command {
        // The page explains decisions with the manifest's catalogue when there is one.
        let catalogue = super::load_catalogue(global).ok();
        let page = lifecycle::ui::Page {
            catalogue,
            port: *port,
            open: !*no_open,
        };
        lifecycle::ui::run(runtime, &env, page, out, stdout).await?;
        return Ok(0);
    }
    let runtime = runtime.as_ref();
    match command {
        Command::Up(arg) => {
            let plan =
                plan.ok_or_else(|| Report::new(&codes::MAN_NOT_FOUND, "No manifest to start."))?;
            let interrupt = Interrupt::on_ctrl_c();
            let display = Display::for_this_process(out, arg.quiet);
            lifecycle::up::run_shown(runtime, &plan, out, display, &interrupt, stdout).await?;
        }
        Command::Down(arg) => {
            let display = Display::for_this_process(out, arg.quiet);
            lifecycle::down::run_shown(runtime, &env, out, display, stdout).await?
        }
        Command::Status(_) => {
            lifecycle::status::run(runtime, &env, out, stdout).await?;
        }
        Command::Logs {
            service,
            follow,
            tail,
            ..
        } => {
            lifecycle::logs::run(runtime, &env, service.as_deref(), *follow, *tail, stdout).await?
        }
        Command::Restart { service, quiet, .. } => {
            lifecycle::restart::run(runtime, &env, service.as_deref(), *quiet, out, stdout).await?
        }
        Command::Exec {
            service,
            command,
            no_tty,
            ..
        } => return Ok(lifecycle::exec::run(runtime, &env, service, command, !*no_tty).await?),
        Command::Net(NetCommand::Log {
            blocked,
            follow,
            limit,
            host,
            har,
            ..
        }) => {
            let query = DecisionsQuery {
                limit: *limit,
                blocked: blocked.then_some(true),
                host: host.clone(),
                ..DecisionsQuery::default()
            };
            match har {
                Some(path) => {
                    lifecycle::net_log::write_har(runtime, &env, query, path, out, stdout).await?
                }
                None => lifecycle::net_log::run(runtime, &env, query, *follow, out, stdout).await?,
            }
        }
        Command::Net(NetCommand::Suggest { mode, since, .. }) => {
            // The rules are checked against the catalogue the manifest has now.
            let (_, manifest) = load_manifest(global)?;
            let since = since.and_then(|d| SystemTime::now().checked_sub(d));
            lifecycle::net_suggest::run(
                runtime,
                &env,
                &manifest.egress,
                (*mode).into(),
                since,
                out,
                stdout,
            )
            .await?
        }
        Command::Inbox(InboxCommand::List { to, limit, .. }) => {
            let query = InboxQuery {
                to: to.clone(),
                limit: *limit,
                ..InboxQuery::default()
            };
            inbox::list(runtime, &env, query, out, stdout).await?;
        }
        Command::Inbox(InboxCommand::Get { seq, .. }) => {
            inbox::get(runtime, &env, *seq, out, stdout).await?;
        }
        Command::Inbox(InboxCommand::Wait {
            to,
            subject,
            timeout,
            ..
        }) => {
            let wait = Wait {
                to: to.clone(),
                subject: subject.clone(),
                timeout: *timeout,
                poll: inbox::POLL,
            };
            inbox::wait(runtime, &env, &wait, out, stdout).await?;
        }
        Command::Webhook(_) => {
            if let Some(prepared) = &webhook {
                lifecycle::webhook::run(runtime, &env, prepared, out, stdout).await?;
            }
        }
        _ => {}
    }
    Ok(0)
}

/// The environment id (`--env`, or derived from the manifest's project, repository and
/// branch), for `up` the plan, and where the environment runs as [`factory::decide`] judges
/// it (the local runtime for an id given without a manifest), before any runtime is reached.
fn environment(
    global: &Global,
    arg: &EnvArg,
    want_plan: bool,
) -> Result<(EnvId, Option<EnvPlan>, Decision), Refusal> {
    let loaded = load_manifest(global);
    let (path, manifest) = match (loaded, &arg.env) {
        (Ok(found), _) => found,
        // `down`, `status`, `logs` and `net log` work by id alone.
        (Err(_), Some(id)) if !want_plan => {
            return Ok((parse_env(id)?, None, factory::decide(None)?));
        }
        (Err(refusal), _) => return Err(refusal),
    };
    let decision = factory::decide(Some(&manifest))?;
    let env = match &arg.env {
        Some(id) => parse_env(id)?,
        None => EnvId::derive(&manifest.name, path.parent().unwrap_or(Path::new("."))),
    };
    let plan = if want_plan {
        Some(EnvPlan::from_manifest(&manifest, &path, env.clone())?)
    } else {
        None
    };
    Ok((env, plan, decision))
}

fn parse_env(id: &str) -> Result<EnvId, Refusal> {
    EnvId::parse(id).map_err(|e| {
        Report::new(&codes::MAN_BAD_NAME, format!("--env {e}."))
            .with_next("Pass an id such as pr-42.")
            .into()
    })
}
