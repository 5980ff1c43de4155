//! Reaching what runs in an environment's namespace: the sidecar's admin API (its pod, its
//! token, a port-forward to it), what the sidecar and the services wrote, and a command run in
//! a service. Every pod is found by the environment's labels, never by a name alone.

use af_sidecar_api::config::Admin;
use futures_util::{AsyncBufReadExt, SinkExt, StreamExt};
use k8s_openapi::api::core::v1::{Pod, Secret};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Status;
use kube::Client;
use kube::api::{Api, AttachParams, ListParams, LogParams, TerminalSize};
use tokio::io::AsyncWriteExt;

use super::cluster::refused;
use super::forward::{self, Target};
use super::names::{self, Names, kind};
use super::namespace;
use super::selection::{
    Need, SIDECAR_CONTAINER, SIDECAR_SERVICE, choose, container_of, service_selector,
    sidecar_selector,
};
use crate::runtime::exec::{self, ExecIo, Output, TermSize};
use crate::runtime::labels::{KIND, SERVICE};
use crate::runtime::sidecar_doc::Kept;
use crate::runtime::{AdminEndpoint, LineStream, LogLine, RuntimeError};

/// The environment's namespace, or [`RuntimeError::NoEnvironment`]; AF-RUN-045 for one that is
/// not ours.
async fn present(client: &Client, names: &Names) -> Result<(), RuntimeError> {
    match namespace::ours(client, names).await? {
        Some(_) => Ok(()),
        None => Err(RuntimeError::NoEnvironment(names.env().to_string())),
    }
}

/// The pods of the sidecar and the services (of `service` alone when named), each with its
/// service; the probe's and anything else's are left out.
async fn workload_pods(
    client: &Client,
    names: &Names,
    service: Option<&str>,
) -> Result<Vec<(String, Pod)>, RuntimeError> {
    service_pods(client, names, service, &[kind::SIDECAR, kind::SERVICE]).await
}

/// The pods of `service` (or of the sidecar and every service) whose kind is one of `kinds`,
/// each with its service's name.
async fn service_pods(
    client: &Client,
    names: &Names,
    service: Option<&str>,
    kinds: &[&str],
) -> Result<Vec<(String, Pod)>, RuntimeError> {
    let selector = match service {
        Some(s) => service_selector(names, s),
        None => names.selector(),
    };
    Ok(list(client, names, &selector)
        .await?
        .into_iter()
        .filter_map(|pod| {
            let labels = pod.metadata.labels.as_ref()?;
            let wanted = labels
                .get(KIND)
                .is_some_and(|k| kinds.contains(&k.as_str()));
            let service = labels.get(SERVICE)?.clone();
            wanted.then_some((service, pod))
        })
        .collect())
}

/// The pods of the environment's namespace that `selector` selects.
async fn list(client: &Client, names: &Names, selector: &str) -> Result<Vec<Pod>, RuntimeError> {
    let pods: Api<Pod> = Api::namespaced(client.clone(), names.namespace());
    let listed = pods
        .list(&ListParams::default().labels(selector))
        .await
        .map_err(refused(format!("list the pods of {}", names.namespace())))?;
    Ok(listed.items)
}

/// The sidecar's admin API through a port-forward to its Running, Ready pod, with the token
/// of its configuration Secret.
pub async fn admin(client: &Client, names: &Names) -> Result<AdminEndpoint, RuntimeError> {
    present(client, names).await?;
    let selector = sidecar_selector(names);
    let pods = list(client, names, &selector).await?;
    let ns = names.namespace();
    let pod = choose(&pods, SIDECAR_CONTAINER, Need::Ready).ok_or_else(|| {
        RuntimeError::AdminUnreachable(format!(
            "no pod of the sidecar {} in namespace {ns} is running and ready ({} found); run `af up`, or look at `kubectl -n {ns} get pods`",
            names::SIDECAR,
            pods.len()
        ))
    })?;
    let token = admin_token(client, names).await?;
    let target = Target::new(
        Api::namespaced(client.clone(), ns),
        selector,
        SIDECAR_CONTAINER,
        Admin::DEFAULT_PORT,
        pod.to_owned(),
    );
    let (addr, serving) = forward::open(target).await?;
    Ok(AdminEndpoint::served(addr, token, serving))
}

/// The admin token of the sidecar's configuration document, as the sidecar reads it.
async fn admin_token(client: &Client, names: &Names) -> Result<String, RuntimeError> {
    let ns = names.namespace();
    let secrets: Api<Secret> = Api::namespaced(client.clone(), ns);
    let missing = |what: &str| {
        RuntimeError::AdminUnreachable(format!(
            "the Secret {ns}/{} {what}; run `af up` to write it again",
            names::SIDECAR_CONFIG
        ))
    };
    let secret = secrets
        .get_opt(names::SIDECAR_CONFIG)
        .await
        .map_err(refused(format!(
            "read the Secret {} of {ns}",
            names::SIDECAR_CONFIG
        )))?
        .ok_or_else(|| missing("does not exist"))?;
    let document = secret
        .data
        .as_ref()
        .and_then(|d| d.get(names::SIDECAR_CONFIG_KEY))
        .ok_or_else(|| missing(&format!("has no key {}", names::SIDECAR_CONFIG_KEY)))?;
    let kept = Kept::read(&document.0).ok_or_else(|| {
        missing(&format!(
            "holds no sidecar document under {}",
            names::SIDECAR_CONFIG_KEY
        ))
    })?;
    kept.token()
        .map(str::to_owned)
        .ok_or_else(|| missing("holds a document without a usable admin token"))
}

/// What the pods of `service` (or of the sidecar and every service) wrote, each line with its
/// service; with `follow`, streamed until the pods end. A service's migration and cron runs are
/// its pods too (every one is its one template, its container named as the service): a cron
/// service's runs are read oldest first, newest last.
pub async fn logs(
    client: &Client,
    names: &Names,
    service: Option<&str>,
    follow: bool,
    tail: Option<usize>,
) -> Result<LineStream<'static>, RuntimeError> {
    present(client, names).await?;
    let kinds = [kind::SIDECAR, kind::SERVICE, kind::MIGRATION, kind::CRON];
    let mut started: Vec<(String, Pod)> = service_pods(client, names, service, &kinds)
        .await?
        .into_iter()
        // A pod still pending has no log to read yet.
        .filter(|(_, p)| {
            p.status
                .as_ref()
                .and_then(|s| s.phase.as_deref())
                .is_some_and(|phase| phase != "Pending")
        })
        .collect();
    if started.is_empty() {
        return Err(RuntimeError::NoService {
            env: names.env().to_string(),
            service: service.unwrap_or(SIDECAR_SERVICE).to_owned(),
        });
    }
    started.sort_by(|(a, p), (b, q)| {
        a.cmp(b).then_with(|| {
            p.metadata
                .creation_timestamp
                .cmp(&q.metadata.creation_timestamp)
        })
    });
    let api: Api<Pod> = Api::namespaced(client.clone(), names.namespace());
    let mut streams = Vec::with_capacity(started.len());
    for (service, pod) in started {
        let name = pod.metadata.name.unwrap_or_default();
        let params = LogParams {
            container: Some(container_of(&service).to_owned()),
            follow,
            tail_lines: tail.and_then(|n| i64::try_from(n).ok()),
            ..LogParams::default()
        };
        let reading = format!("read the logs of pod {name}");
        let read = api
            .log_stream(&name, &params)
            .await
            .map_err(refused(reading.clone()))?;
        let lines = Box::pin(read).lines().map(move |line| {
            line.map(|line| LogLine {
                service: service.clone(),
                line,
            })
            .map_err(|e| RuntimeError::Api {
                context: reading.clone(),
                message: e.to_string(),
            })
        });
        streams.push(lines.boxed());
    }
    Ok(futures_util::stream::select_all(streams).boxed())
}

/// Run `argv` in the newest running pod of `service` attached to `io` (in a terminal when it
/// has one); its exit status. Where the command never ran, the kubelet's own words (no such
/// executable, ...) go to `io`'s stderr.
pub async fn exec(
    client: &Client,
    names: &Names,
    service: &str,
    argv: &[String],
    io: ExecIo<'_>,
) -> Result<Option<i64>, RuntimeError> {
    present(client, names).await?;
    let pods: Vec<Pod> = workload_pods(client, names, Some(service))
        .await?
        .into_iter()
        .map(|(_, p)| p)
        .collect();
    let container = container_of(service);
    let pod = choose(&pods, container, Need::Running).ok_or_else(|| RuntimeError::NoService {
        env: names.env().to_string(),
        service: service.to_owned(),
    })?;
    let api: Api<Pod> = Api::namespaced(client.clone(), names.namespace());
    let tty = io.tty.is_some();
    let params = AttachParams::default()
        .container(container)
        .stdin(io.stdin.is_some())
        .stdout(true)
        .stderr(!tty)
        .tty(tty);
    let running = format!("run a command in pod {pod}");
    let mut process = api
        .exec(pod, argv.to_vec(), &params)
        .await
        .map_err(refused(running.clone()))?;
    let status = process.take_status();
    let output = futures_util::stream::select(
        exec::pieces(process.stdout()).map(|piece| piece.map(Output::Stdout)),
        exec::pieces(process.stderr()).map(|piece| piece.map(Output::Stderr)),
    )
    .map(|piece| {
        piece.map_err(|e| RuntimeError::Api {
            context: running.clone(),
            message: e.to_string(),
        })
    });
    let resizes = process.terminal_size();
    let resize = |size: TermSize| {
        let mut resizes = resizes.clone();
        async move {
            if let Some(resizes) = &mut resizes {
                let _ = resizes
                    .send(TerminalSize {
                        width: size.cols,
                        height: size.rows,
                    })
                    .await;
            }
        }
    };
    // Before Kubernetes 1.29 (the v5 protocol) the end of stdin can only be said by closing the
    // whole session: the input is held open instead, so no output is lost.
    let mut io = io;
    exec::pump(&mut io, output, process.stdin(), false, resize).await?;
    let status = match status {
        Some(status) => status.await,
        None => None,
    };
    process.join().await.map_err(|e| RuntimeError::Api {
        context: running,
        message: e.to_string(),
    })?;
    let exit = status.as_ref().and_then(exit_status);
    if exit.is_none()
        && let Some(message) = status.as_ref().and_then(|s| s.message.as_deref())
    {
        let _ = io.stderr.write_all(message.as_bytes()).await;
        let _ = io.stderr.flush().await;
    }
    Ok(exit)
}

/// The exit status an exec's final status object carries: `Success` is 0, a non-zero exit is
/// the `ExitCode` cause; anything else (the command never ran) is unknown.
pub fn exit_status(status: &Status) -> Option<i64> {
    if status.status.as_deref() == Some("Success") {
        return Some(0);
    }
    if status.reason.as_deref() != Some("NonZeroExitCode") {
        return None;
    }
    let causes = status.details.as_ref()?.causes.as_ref()?;
    causes
        .iter()
        .find(|c| c.reason.as_deref() == Some("ExitCode"))?
        .message
        .as_deref()?
        .trim()
        .parse()
        .ok()
}

#[cfg(test)]
pub(super) mod tests {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{StatusCause, StatusDetails};
    use serde_json::{Value, json};

    use super::*;

    /// How a test pod is.
    #[derive(Clone, Copy)]
    pub(in crate::runtime::kubernetes) struct Shape {
        pub phase: &'static str,
        pub running: bool,
        pub ready: bool,
        pub deleting: bool,
        /// Seconds past a fixed hour it was made at.
        pub created: u32,
    }

    /// Running, its container running and Ready.
    pub(in crate::runtime::kubernetes) const UP: Shape = Shape {
        phase: "Running",
        running: true,
        ready: true,
        deleting: false,
        created: 0,
    };

    /// The pod `name` of `service` in environment `pr-42`, as the API server returns it.
    pub(in crate::runtime::kubernetes) fn pod_json(
        name: &str,
        service: &str,
        kind: &str,
        shape: Shape,
    ) -> Value {
        let state = if shape.running {
            json!({"running": {}})
        } else {
            json!({"waiting": {"reason": "ContainerCreating"}})
        };
        let mut metadata = json!({
            "name": name, "namespace": "af-pr-42",
            "creationTimestamp": format!("2026-01-01T10:00:{:02}Z", shape.created),
            "labels": {"dev.antifailure.managed": "true", "dev.antifailure.env": "pr-42",
                       "dev.antifailure.kind": kind, "dev.antifailure.service": service},
        });
        if shape.deleting {
            metadata["deletionTimestamp"] = json!("2026-01-01T11:00:00Z");
        }
        json!({
            "apiVersion": "v1", "kind": "Pod", "metadata": metadata,
            "spec": {"containers": [{"name": container_of(service)}]},
            "status": {
                "phase": shape.phase,
                "conditions": [{"type": "Ready", "status": if shape.ready { "True" } else { "False" }}],
                "containerStatuses": [{"name": container_of(service), "image": "", "imageID": "",
                                       "ready": shape.ready, "restartCount": 0, "state": state}],
            },
        })
    }

    fn pod(name: &str, shape: Shape) -> Pod {
        serde_json::from_value(pod_json(name, "sidecar", kind::SIDECAR, shape)).expect("pod")
    }

    #[test]
    fn the_newest_running_ready_pod_is_chosen_and_one_being_deleted_never() {
        let old = pod("old", UP);
        let new = pod("new", Shape { created: 30, ..UP });
        let leaving = pod(
            "leaving",
            Shape {
                created: 50,
                deleting: true,
                ..UP
            },
        );
        let starting = pod(
            "starting",
            Shape {
                created: 40,
                ready: false,
                ..UP
            },
        );
        let pending = pod(
            "pending",
            Shape {
                created: 45,
                phase: "Pending",
                running: false,
                ready: false,
                deleting: false,
            },
        );
        let pods = [old, leaving.clone(), new, starting.clone(), pending];
        assert_eq!(choose(&pods, "sidecar", Need::Ready), Some("new"));
        // A command can run in a pod not Ready yet, never in one being deleted.
        assert_eq!(choose(&pods, "sidecar", Need::Running), Some("starting"));
        assert_eq!(choose(&[leaving], "sidecar", Need::Running), None);
        assert_eq!(
            choose(std::slice::from_ref(&starting), "sidecar", Need::Ready),
            None
        );
        // The container asked for must be the one running.
        assert_eq!(choose(&[starting], "web", Need::Running), None);
        assert_eq!(choose(&[], "sidecar", Need::Running), None);
    }

    #[test]
    fn the_sidecars_container_is_sidecar_and_a_services_is_its_name() {
        assert_eq!(container_of("sidecar"), "sidecar");
        assert_eq!(container_of("web"), "web");
    }

    fn status(state: &str, reason: Option<&str>, causes: &[(&str, &str)]) -> Status {
        Status {
            status: Some(state.to_owned()),
            reason: reason.map(str::to_owned),
            message: Some("said".to_owned()),
            details: Some(StatusDetails {
                causes: Some(
                    causes
                        .iter()
                        .map(|(r, m)| StatusCause {
                            reason: Some((*r).to_owned()),
                            message: Some((*m).to_owned()),
                            field: None,
                        })
                        .collect(),
                ),
                ..StatusDetails::default()
            }),
            ..Status::default()
        }
    }

    #[test]
    fn an_execs_exit_status_is_read_from_its_final_status() {
        assert_eq!(exit_status(&status("Success", None, &[])), Some(0));
        assert_eq!(
            exit_status(&status(
                "Failure",
                Some("NonZeroExitCode"),
                &[("ExitCode", "3")]
            )),
            Some(3)
        );
        assert_eq!(
            exit_status(&status(
                "Failure",
                Some("NonZeroExitCode"),
                &[("Other", "x"), ("ExitCode", " 127 ")]
            )),
            Some(127)
        );
        // A command that never ran has no status to tell.
        assert_eq!(
            exit_status(&status("Failure", Some("InternalError"), &[])),
            None
        );
        assert_eq!(
            exit_status(&status(
                "Failure",
                Some("NonZeroExitCode"),
                &[("ExitCode", "x")]
            )),
            None
        );
    }
}
