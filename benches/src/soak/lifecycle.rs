//! `af up` of the demo environment stopped at each of its steps, by Ctrl-C (SIGINT) or by the
//! Docker daemon going away, then `af down`: `af up` must end with a coded refusal (never a
//! panic or the engine's own words), and nothing carrying the environment's label may be left.
//!
//! The steps are the `· ...` lines `af up` prints on stderr, learnt from one uninterrupted run.
//! Each run gets a sidecar binary of its own (the static one with a few bytes of its own
//! appended, which the loader ignores), so building the sidecar image is a step of every run.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use bollard::Docker;
use bollard::query_parameters::{
    ListContainersOptionsBuilder, ListImagesOptionsBuilder, ListNetworksOptionsBuilder,
    ListVolumesOptionsBuilder, RemoveImageOptionsBuilder,
};
use serde::Serialize;
use tokio::io::{AsyncBufReadExt, AsyncRead, BufReader};
use tokio::process::{Child, Command};
use tokio::sync::mpsc;

use super::docker_proxy::{DockerProxy, connect_daemon, daemon_socket};
use crate::error::{BenchError, Result};

/// The label every object of an environment carries.
const ENV_LABEL: &str = "dev.antifailure.env";
/// Longest an `af up` or `af down` may take; past it, it is killed and the run fails.
const COMMAND_TIMEOUT: Duration = Duration::from_secs(300);
/// The demo's files, copied into each run's directory.
const DEMO_FILES: [&str; 2] = ["af.yaml", "Dockerfile"];

/// What stops `af up`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub(crate) enum Fault {
    /// Ctrl-C: SIGINT to `af up`.
    CtrlC,
    /// The Docker daemon's socket goes away (the harness's proxy of it is cut).
    DaemonGone,
}

impl Fault {
    fn tag(self) -> &'static str {
        match self {
            Fault::CtrlC => "int",
            Fault::DaemonGone => "dmn",
        }
    }

    /// The code `af up` must end with.
    fn expected_code(self) -> &'static str {
        match self {
            Fault::CtrlC => "AF-RUN-032",
            Fault::DaemonGone => "AF-RUN-001",
        }
    }
}

/// Where the programs are.
#[derive(Debug, Clone)]
pub(crate) struct Setup {
    /// The `af` command.
    pub af: PathBuf,
    /// The static binaries: `af-proxy`, `af-forward`, `af-demo`.
    pub binaries: PathBuf,
    /// `fixtures/demo`.
    pub demo: PathBuf,
}

impl Setup {
    /// `af`, the `binaries` directory and the demo of the workspace at `root`, as absolute
    /// paths (af runs in each demo's directory).
    pub(crate) fn new(af: &Path, binaries: &Path, root: &Path) -> Result<Self> {
        let absolute = |p: &Path| {
            std::fs::canonicalize(p).map_err(|e| BenchError::io(format!("find {}", p.display()), e))
        };
        Ok(Self {
            af: absolute(af)?,
            binaries: absolute(binaries)?,
            demo: root.join("fixtures").join("demo"),
        })
    }
}

/// One `af up` stopped at one step.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Stop {
    /// The step's index in the uninterrupted run.
    pub step: usize,
    /// The step's line (`starting sidecar`).
    pub at: String,
    /// `af up`'s exit status (`None`: killed by a signal or by the timeout).
    pub exit: Option<i32>,
    /// The first `AF-...` code on its stderr.
    pub code: Option<String>,
    /// Whether it was the expected code, with a `Next:` line, and no panic.
    pub coded: bool,
    /// Seconds from the fault to `af up`'s exit.
    pub stop_secs: f64,
    /// Objects with the environment's label just before `af down`.
    pub made: usize,
    /// `af down`'s exit status.
    pub down_exit: Option<i32>,
    /// Objects with the environment's label after `af down` (must be none).
    pub left: Vec<String>,
    /// The refusal `af up` ended with (its last stderr lines).
    pub refusal: String,
    /// Coded, `af down` succeeded and nothing is left.
    pub passed: bool,
}

/// Every step of `af up`, stopped by one fault.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Stopped {
    /// The fault.
    pub fault: Fault,
    /// The steps of the uninterrupted run, in order.
    pub steps: Vec<String>,
    /// Seconds the uninterrupted run took.
    pub full_up_secs: f64,
    /// Objects the uninterrupted run made (the leftover check's positive control: it sees them).
    pub full_up_made: usize,
    /// One run per step.
    pub runs: Vec<Stop>,
    /// Runs that passed.
    pub passed: usize,
}

/// The per-run files: the demo manifest and image context, and beside it (outside the build
/// context) a sidecar binary of its own and the Docker socket's proxy.
pub(crate) struct RunDir {
    demo: tempfile::TempDir,
    aside: tempfile::TempDir,
}

impl RunDir {
    pub(crate) fn new(setup: &Setup) -> Result<Self> {
        let dir = |prefix: &str| {
            tempfile::Builder::new()
                .prefix(prefix)
                .tempdir()
                .map_err(|e| BenchError::io("create a run directory", e))
        };
        let (demo, aside) = (dir("af-soak-demo-")?, dir("af-soak-aside-")?);
        let copy = |from: &Path, to: &Path| {
            std::fs::copy(from, to)
                .map(drop)
                .map_err(|e| BenchError::io(format!("copy {}", from.display()), e))
        };
        for f in DEMO_FILES {
            copy(&setup.demo.join(f), &demo.path().join(f))?;
        }
        copy(
            &setup.binaries.join("af-demo"),
            &demo.path().join("af-demo"),
        )?;
        copy(
            &setup.binaries.join("af-forward"),
            &aside.path().join("af-forward"),
        )?;
        let mut proxy = std::fs::read(setup.binaries.join("af-proxy"))
            .map_err(|e| BenchError::io("read af-proxy", e))?;
        proxy.extend_from_slice(format!("af-soak {}", fastrand::u64(..)).as_bytes());
        let path = aside.path().join("af-proxy");
        std::fs::write(&path, proxy).map_err(|e| BenchError::io("write af-proxy", e))?;
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755))
            .map_err(|e| BenchError::io("chmod af-proxy", e))?;
        Ok(Self { demo, aside })
    }

    fn path(&self) -> &Path {
        self.demo.path()
    }

    fn sidecar(&self) -> PathBuf {
        self.aside.path().join("af-proxy")
    }

    fn docker_socket(&self) -> PathBuf {
        self.aside.path().join("docker.sock")
    }
}

/// A run of `af up` or `af down`.
pub(crate) struct Af<'a> {
    pub setup: &'a Setup,
    pub run: &'a RunDir,
    pub env: String,
    pub docker_host: Option<String>,
}

impl Af<'_> {
    fn command(&self, verb: &str) -> Command {
        let mut cmd = Command::new(&self.setup.af);
        cmd.arg(verb)
            .arg("--env")
            .arg(&self.env)
            .current_dir(self.run.path())
            .env("AF_PROXY_BINARY", self.run.sidecar())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        match &self.docker_host {
            Some(host) => cmd.env("DOCKER_HOST", host),
            None => cmd.env_remove("DOCKER_HOST"),
        };
        cmd
    }

    fn spawn(&self, verb: &str) -> Result<(Child, mpsc::UnboundedReceiver<Line>)> {
        let mut child = self
            .command(verb)
            .spawn()
            .map_err(|source| BenchError::Spawn {
                program: self.setup.af.display().to_string(),
                source,
            })?;
        let (tx, rx) = mpsc::unbounded_channel();
        if let Some(out) = child.stdout.take() {
            tokio::spawn(forward_lines(out, false, tx.clone()));
        }
        if let Some(err) = child.stderr.take() {
            tokio::spawn(forward_lines(err, true, tx));
        }
        Ok((child, rx))
    }

    /// `af up`, to the end.
    pub(crate) async fn up(&self) -> Result<Finished> {
        let (mut child, mut lines) = self.spawn("up")?;
        let mut steps = Vec::new();
        let mut tail = Vec::new();
        while let Some(line) = lines.recv().await {
            if let Some(step) = step_of(&line) {
                steps.push(step.to_owned());
            }
            tail.push(line.text);
        }
        let status = child
            .wait()
            .await
            .map_err(|e| BenchError::io("wait for af up", e))?;
        Ok(Finished {
            status,
            steps,
            tail,
        })
    }

    /// `af down`, to the end; its exit status.
    pub(crate) async fn down(&self) -> Result<Option<i32>> {
        let (mut child, mut lines) = self.spawn("down")?;
        let status = tokio::time::timeout(COMMAND_TIMEOUT, child.wait()).await;
        while lines.recv().await.is_some() {}
        match status {
            Ok(Ok(s)) => Ok(s.code()),
            _ => {
                let _ = child.kill().await;
                Ok(None)
            }
        }
    }
}

/// An `af up` run to its end.
pub(crate) struct Finished {
    /// Its exit status.
    pub status: std::process::ExitStatus,
    /// Its steps (the `· ...` lines), in order.
    pub steps: Vec<String>,
    /// Every line it printed.
    pub tail: Vec<String>,
}

/// One line of a command's output.
struct Line {
    stderr: bool,
    text: String,
}

async fn forward_lines(
    from: impl AsyncRead + Unpin,
    stderr: bool,
    to: mpsc::UnboundedSender<Line>,
) {
    let mut lines = BufReader::new(from).lines();
    while let Ok(Some(text)) = lines.next_line().await {
        if to.send(Line { stderr, text }).is_err() {
            return;
        }
    }
}

/// A step line of `af up` (`· networks`), without its mark.
fn step_of(line: &Line) -> Option<&str> {
    line.stderr.then(|| line.text.strip_prefix("· "))?
}

/// Stops `af up` at each of its steps with `fault`, then `af down`s it.
pub(super) async fn run(setup: &Setup, fault: Fault, nonce: &str) -> Result<Stopped> {
    let docker = connect_daemon()?;
    let started = Instant::now();
    let full = RunDir::new(setup)?;
    let af = Af {
        setup,
        run: &full,
        env: format!("soak-{}-all-{nonce}", fault.tag()),
        docker_host: None,
    };
    let Finished {
        status,
        steps,
        tail,
    } = af.up().await?;
    let full_up_secs = started.elapsed().as_secs_f64();
    let full_up_made = labelled(&docker, &af.env).await?.len();
    let down = af.down().await?;
    remove_built_images(&docker, &steps).await;
    if !status.success() || down != Some(0) || steps.is_empty() {
        return Err(BenchError::Protocol(format!(
            "the uninterrupted af up failed ({status}, down {down:?}): {}",
            last_lines(&tail)
        )));
    }
    eprintln!(
        "soak {}: af up has {} steps ({full_up_secs:.0} s, {full_up_made} objects): {}",
        fault.tag(),
        steps.len(),
        steps.join(" | ")
    );
    let mut runs = Vec::new();
    for (index, at) in steps.iter().enumerate() {
        let stop = stop_at(
            setup,
            &docker,
            fault,
            index,
            &format!("soak-{}-{index}-{nonce}", fault.tag()),
        )
        .await?;
        eprintln!(
            "soak {} at step {index} ({at}): {} {:?} in {:.1} s, {} made, down {:?}, {} left",
            fault.tag(),
            if stop.passed { "ok" } else { "FAILED" },
            stop.code,
            stop.stop_secs,
            stop.made,
            stop.down_exit,
            stop.left.len()
        );
        runs.push(stop);
    }
    Ok(Stopped {
        fault,
        passed: runs.iter().filter(|r| r.passed).count(),
        steps,
        full_up_secs,
        full_up_made,
        runs,
    })
}

/// One `af up` stopped by `fault` when it begins step `index`.
async fn stop_at(
    setup: &Setup,
    docker: &Docker,
    fault: Fault,
    index: usize,
    env: &str,
) -> Result<Stop> {
    let run = RunDir::new(setup)?;
    let mut proxy = match fault {
        Fault::DaemonGone => Some(DockerProxy::start(&run.docker_socket(), &daemon_socket())?),
        Fault::CtrlC => None,
    };
    let af = Af {
        setup,
        run: &run,
        env: env.to_owned(),
        docker_host: proxy.as_ref().map(DockerProxy::docker_host),
    };
    let (mut child, mut lines) = af.spawn("up")?;
    let mut seen = 0;
    let mut at = None;
    let mut faulted = None;
    let mut tail = Vec::new();
    let mut steps = Vec::new();
    let deadline = tokio::time::Instant::now() + COMMAND_TIMEOUT;
    while let Ok(Some(line)) = tokio::time::timeout_at(deadline, lines.recv()).await {
        if let Some(step) = step_of(&line) {
            steps.push(step.to_owned());
            if seen == index && faulted.is_none() {
                at = Some(step.to_owned());
                faulted = Some(Instant::now());
                match (&mut proxy, child.id()) {
                    (Some(proxy), _) => proxy.cut(),
                    (None, Some(pid)) => interrupt(pid)?,
                    (None, None) => {}
                }
            }
            seen += 1;
        }
        tail.push(line.text);
    }
    let exit = match tokio::time::timeout_at(deadline, child.wait()).await {
        Ok(Ok(status)) => status.code(),
        _ => {
            let _ = child.kill().await;
            None
        }
    };
    let stop_secs = faulted.map_or(0.0, |t| t.elapsed().as_secs_f64());
    // The daemon is back; af down reaches it through the same socket.
    if let Some(proxy) = proxy.as_mut() {
        proxy.restore()?;
    }
    let made = labelled(docker, env).await?.len();
    let down_exit = af.down().await?;
    let left = labelled(docker, env).await?;
    remove_built_images(docker, &steps).await;
    let text = tail.join("\n");
    let code = first_code(&text);
    let coded = faulted.is_some()
        && code.as_deref() == Some(fault.expected_code())
        && text.contains("Next:")
        && !text.contains("panicked");
    Ok(Stop {
        step: index,
        at: at.unwrap_or_default(),
        exit,
        code,
        coded,
        stop_secs,
        made,
        down_exit,
        passed: coded && exit == Some(4) && down_exit == Some(0) && left.is_empty(),
        left,
        refusal: last_lines(&tail),
    })
}

/// SIGINT, as Ctrl-C in a terminal sends.
fn interrupt(pid: u32) -> Result<()> {
    let pid = i32::try_from(pid).map_err(|_| BenchError::Protocol(format!("pid {pid}")))?;
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(pid),
        nix::sys::signal::Signal::SIGINT,
    )
    .map_err(|e| BenchError::io("SIGINT", e.into()))
}

/// Every container, network, volume and image carrying the environment's label.
pub(crate) async fn labelled(docker: &Docker, env: &str) -> Result<Vec<String>> {
    carrying(docker, &format!("{ENV_LABEL}={env}")).await
}

/// Every container, network, volume and image carrying `label` (`KEY=VALUE`).
pub(crate) async fn carrying(docker: &Docker, label: &str) -> Result<Vec<String>> {
    let filter = HashMap::from([("label".to_owned(), vec![label.to_owned()])]);
    let engine = |e: bollard::errors::Error| BenchError::Protocol(format!("docker: {e}"));
    let mut out = Vec::new();
    let containers = docker
        .list_containers(Some(
            ListContainersOptionsBuilder::default()
                .all(true)
                .filters(&filter)
                .build(),
        ))
        .await
        .map_err(engine)?;
    out.extend(containers.into_iter().map(|c| {
        let name = c
            .names
            .and_then(|n| n.into_iter().next())
            .unwrap_or_default();
        format!("container {}", name.trim_start_matches('/'))
    }));
    let networks = docker
        .list_networks(Some(
            ListNetworksOptionsBuilder::default()
                .filters(&filter)
                .build(),
        ))
        .await
        .map_err(engine)?;
    out.extend(
        networks
            .into_iter()
            .map(|n| format!("network {}", n.name.unwrap_or_default())),
    );
    let volumes = docker
        .list_volumes(Some(
            ListVolumesOptionsBuilder::default()
                .filters(&filter)
                .build(),
        ))
        .await
        .map_err(engine)?;
    out.extend(
        volumes
            .volumes
            .unwrap_or_default()
            .into_iter()
            .map(|v| format!("volume {}", v.name)),
    );
    let images = docker
        .list_images(Some(
            ListImagesOptionsBuilder::default().filters(&filter).build(),
        ))
        .await
        .map_err(engine)?;
    out.extend(images.into_iter().map(|i| format!("image {}", i.id)));
    Ok(out)
}

/// Removes the images the run built itself (named in its `building WHAT image TAG` steps): the
/// sidecar's and the services' are shared objects, which `af down` rightly keeps.
pub(crate) async fn remove_built_images(docker: &Docker, steps: &[String]) {
    for tag in steps
        .iter()
        .filter_map(|s| s.strip_prefix("building "))
        .filter_map(|s| s.split_once(" image ").map(|(_, tag)| tag))
    {
        let options = RemoveImageOptionsBuilder::default().build();
        let _ = docker.remove_image(tag, Some(options), None).await;
    }
}

/// The first `AF-XXX-NNN` in `text`.
fn first_code(text: &str) -> Option<String> {
    text.split(|c: char| c.is_whitespace())
        .find(|w| {
            let parts: Vec<&str> = w.split('-').collect();
            parts.len() == 3
                && parts[0] == "AF"
                && parts[1].len() == 3
                && parts[1].bytes().all(|b| b.is_ascii_uppercase())
                && parts[2].len() == 3
                && parts[2].bytes().all(|b| b.is_ascii_digit())
        })
        .map(str::to_owned)
}

/// The last lines of a command's output, for the results.
pub(crate) fn last_lines(lines: &[String]) -> String {
    let from = lines.len().saturating_sub(4);
    lines[from..].join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_code_is_found_among_the_words_and_lookalikes_are_not() {
        let text = "· networks\nAF-RUN-032 af up was interrupted (Ctrl-C)\n  Next: Run af down";
        assert_eq!(first_code(text).as_deref(), Some("AF-RUN-032"));
        assert_eq!(first_code("AF-RUN-1 AF-run-001 XX-RUN-001"), None);
    }

    #[test]
    fn a_step_is_a_marked_line_on_stderr_only() {
        let step = Line {
            stderr: true,
            text: "· starting sidecar".into(),
        };
        let service = Line {
            stderr: false,
            text: "· starting sidecar".into(),
        };
        assert_eq!(step_of(&step), Some("starting sidecar"));
        assert_eq!(step_of(&service), None);
    }
}
