//! Container helpers: find ours (refusing somebody else's), list, create, upload files, start,
//! stop, remove, exec, last log lines.

use std::collections::HashMap;

use bollard::Docker;
use bollard::container::LogOutput;
use bollard::exec::{CreateExecOptions, ResizeExecOptions, StartExecOptions, StartExecResults};
use bollard::models::{ContainerCreateBody, ContainerInspectResponse, ContainerSummary};
use bollard::query_parameters::{
    CreateContainerOptionsBuilder, ListContainersOptionsBuilder, LogsOptionsBuilder,
    RemoveContainerOptionsBuilder, StopContainerOptionsBuilder, UploadToContainerOptionsBuilder,
};
use futures_util::StreamExt;

use super::labels::{Names, Owner, made_by_kubelet, owner};
use crate::runtime::RuntimeError;
use crate::runtime::docker_client::is_not_found;
use crate::runtime::exec::{self, ExecIo, Output, TermSize};
use crate::runtime::labels::{KIND, SERVICE};

/// One of our containers as found.
#[derive(Debug, Clone)]
pub struct Found {
    /// Its full inspection.
    pub inspect: ContainerInspectResponse,
}

impl Found {
    /// The config digest it was made from.
    pub fn config(&self) -> Option<&str> {
        super::labels::config_of(self.inspect.config.as_ref().and_then(|c| c.labels.as_ref()))
    }

    /// Whether it is running.
    pub fn running(&self) -> bool {
        self.inspect
            .state
            .as_ref()
            .and_then(|s| s.running)
            .unwrap_or(false)
    }

    /// Its exit code, when it has stopped.
    pub fn exit_code(&self) -> Option<i64> {
        let state = self.inspect.state.as_ref()?;
        if state.running.unwrap_or(false) {
            return None;
        }
        state.exit_code
    }

    /// Its address on `network`.
    pub fn addr_on(&self, network: &str) -> Option<String> {
        self.inspect
            .network_settings
            .as_ref()?
            .networks
            .as_ref()?
            .get(network)?
            .ip_address
            .clone()
            .filter(|a| !a.is_empty())
    }

    /// The host port published for `port/tcp`.
    pub fn host_port(&self, port: u16) -> Option<u16> {
        let ports = self.inspect.network_settings.as_ref()?.ports.as_ref()?;
        ports
            .get(&format!("{port}/tcp"))?
            .as_ref()?
            .iter()
            .find_map(|b| b.host_port.as_deref()?.parse().ok())
    }

    /// `running`, `exited (1)`, ...
    pub fn state(&self) -> String {
        let Some(state) = self.inspect.state.as_ref() else {
            return "unknown".to_owned();
        };
        let status = state
            .status
            .map(|s| s.to_string())
            .unwrap_or_else(|| "unknown".to_owned());
        match (state.running, state.exit_code) {
            (Some(false), Some(code)) if status == "exited" => format!("exited ({code})"),
            _ => status,
        }
    }
}

/// Our container of that name; `None` if absent; `NotOurs` if somebody else's.
pub async fn find(
    docker: &Docker,
    names: &Names,
    name: &str,
) -> Result<Option<Found>, RuntimeError> {
    match docker.inspect_container(name, None).await {
        Ok(inspect) => {
            let labels = inspect.config.as_ref().and_then(|c| c.labels.as_ref());
            if owner(labels, names.env()) != Owner::This {
                return Err(RuntimeError::NotOurs {
                    class: "container",
                    name: name.to_owned(),
                });
            }
            Ok(Some(Found { inspect }))
        }
        Err(e) if is_not_found(&e) => Ok(None),
        Err(e) => Err(RuntimeError::engine(format!("inspect container {name}"), e)),
    }
}

/// Stop a container: SIGTERM, then SIGKILL after `timeout_secs`; absent or already stopped is
/// fine.
pub async fn stop(docker: &Docker, name: &str, timeout_secs: i32) -> Result<(), RuntimeError> {
    let options = StopContainerOptionsBuilder::default()
        .t(timeout_secs)
        .build();
    match docker.stop_container(name, Some(options)).await {
        Ok(()) => Ok(()),
        Err(e) if is_not_found(&e) => Ok(()),
        Err(e) => Err(RuntimeError::engine(format!("stop container {name}"), e)),
    }
}

/// Remove a container (running or not) and its anonymous volumes; absent is fine.
pub async fn remove(docker: &Docker, name: &str) -> Result<(), RuntimeError> {
    let options = RemoveContainerOptionsBuilder::default()
        .force(true)
        .v(true)
        .build();
    match docker.remove_container(name, Some(options)).await {
        Ok(()) => Ok(()),
        Err(e) if is_not_found(&e) => Ok(()),
        Err(e) => Err(RuntimeError::engine(format!("remove container {name}"), e)),
    }
}

/// A container of the environment, as listed: name, kind label, service label.
#[derive(Debug, Clone)]
pub struct Listed {
    /// Its name, without the leading `/`.
    pub name: String,
    /// `dev.antifailure.kind`.
    pub kind: String,
    /// `dev.antifailure.service`.
    pub service: String,
}

/// Every container (running or not) carrying the environment's labels, but for a kubelet's.
pub async fn owned(docker: &Docker, names: &Names) -> Result<Vec<Listed>, RuntimeError> {
    Ok(list(docker, &names.filter())
        .await?
        .into_iter()
        .filter(|c| !made_by_kubelet(c.labels.as_ref()))
        .filter_map(|c| {
            let name = name_of(&c)?;
            let label = |k: &str| {
                c.labels
                    .as_ref()
                    .and_then(|l| l.get(k))
                    .cloned()
                    .unwrap_or_default()
            };
            Some(Listed {
                name,
                kind: label(KIND),
                service: label(SERVICE),
            })
        })
        .collect())
}

/// Containers named like this environment's but without its label.
pub async fn foreign(docker: &Docker, names: &Names) -> Result<Vec<String>, RuntimeError> {
    let filters = HashMap::from([("name".to_owned(), vec![format!("af-{}-", names.env())])]);
    Ok(list(docker, &filters)
        .await?
        .into_iter()
        .filter_map(|c| {
            let name = name_of(&c)?;
            (names.could_be_ours(&name) && owner(c.labels.as_ref(), names.env()) != Owner::This)
                .then_some(name)
        })
        .collect())
}

/// Every container (running or not) that `filters` match.
async fn list(
    docker: &Docker,
    filters: &HashMap<String, Vec<String>>,
) -> Result<Vec<ContainerSummary>, RuntimeError> {
    let options = ListContainersOptionsBuilder::default()
        .all(true)
        .filters(filters)
        .build();
    docker
        .list_containers(Some(options))
        .await
        .map_err(|e| RuntimeError::engine("list containers", e))
}

/// A listed container's name, without the leading `/`.
fn name_of(container: &ContainerSummary) -> Option<String> {
    let name = container.names.as_ref()?.first()?;
    Some(name.trim_start_matches('/').to_owned())
}

/// Create a container named `name` from `body`, without starting it.
pub async fn create(
    docker: &Docker,
    name: &str,
    body: ContainerCreateBody,
) -> Result<(), RuntimeError> {
    let options = CreateContainerOptionsBuilder::default().name(name).build();
    docker
        .create_container(Some(options), body)
        .await
        .map_err(|e| RuntimeError::engine(format!("create container {name}"), e))?;
    Ok(())
}

/// Unpack a tar `archive` at `/` in a container; `what` names its files in the error.
pub async fn upload(
    docker: &Docker,
    name: &str,
    archive: Vec<u8>,
    what: &str,
) -> Result<(), RuntimeError> {
    let options = UploadToContainerOptionsBuilder::default().path("/").build();
    docker
        .upload_to_container(name, Some(options), bollard::body_full(archive.into()))
        .await
        .map_err(|e| RuntimeError::engine(format!("write {what} into {name}"), e))
}

/// Start a created container.
pub async fn start(docker: &Docker, name: &str) -> Result<(), RuntimeError> {
    docker
        .start_container(name, None)
        .await
        .map_err(|e| RuntimeError::engine(format!("start container {name}"), e))
}

/// Run `argv` in `container` attached to `io` (in a terminal when it has one); its exit status.
pub async fn exec(
    docker: &Docker,
    container: &str,
    argv: &[String],
    io: ExecIo<'_>,
) -> Result<Option<i64>, RuntimeError> {
    let failed = |e| RuntimeError::engine(format!("run a command in {container}"), e);
    let tty = io.tty.is_some();
    let created = docker
        .create_exec(
            container,
            CreateExecOptions {
                cmd: Some(argv.to_vec()),
                attach_stdin: Some(io.stdin.is_some()),
                attach_stdout: Some(true),
                attach_stderr: Some(true),
                tty: Some(tty),
                ..Default::default()
            },
        )
        .await
        .map_err(failed)?;
    let options = StartExecOptions {
        detach: false,
        tty,
        output_capacity: None,
    };
    if let StartExecResults::Attached { output, input } = docker
        .start_exec(&created.id, Some(options))
        .await
        .map_err(failed)?
    {
        let output = output.filter_map(|piece| {
            std::future::ready(match piece {
                Ok(LogOutput::StdOut { message } | LogOutput::Console { message }) => {
                    Some(Ok(Output::Stdout(message)))
                }
                Ok(LogOutput::StdErr { message }) => Some(Ok(Output::Stderr(message))),
                Ok(LogOutput::StdIn { .. }) => None,
                Err(e) => Some(Err(failed(e))),
            })
        });
        let id = &created.id;
        let resize = |size: TermSize| async move {
            // A terminal that cannot be resized still works, at its first size.
            let _ = docker
                .resize_exec(
                    id,
                    ResizeExecOptions {
                        height: size.rows,
                        width: size.cols,
                    },
                )
                .await;
        };
        let mut io = io;
        exec::pump(&mut io, output, Some(input), true, resize).await?;
    }
    Ok(docker
        .inspect_exec(&created.id)
        .await
        .ok()
        .and_then(|i| i.exit_code))
}

/// The last `n` lines a container wrote (stdout and stderr).
pub async fn tail(docker: &Docker, container: &str, n: usize) -> Vec<String> {
    let options = LogsOptionsBuilder::default()
        .stdout(true)
        .stderr(true)
        .tail(&n.to_string())
        .build();
    let mut stream = docker.logs(container, Some(options));
    let mut lines = Vec::new();
    while let Some(Ok(chunk)) = stream.next().await {
        let text = chunk.to_string();
        lines.extend(text.lines().map(str::to_owned));
    }
    let skip = lines.len().saturating_sub(n);
    lines.split_off(skip)
}
