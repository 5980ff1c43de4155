//! `af-benches soak`: load and faults, bounded in count and time (issue 16). Not a test: a run
//! of minutes whose figures are committed to `benches/results/soak/`.
//!
//! Four parts, each against the static af-proxy (and, for the last two, `af` and Docker):
//! `hold` (many client connections held for minutes; open files and memory back to their
//! baseline; no error), `kill` (SIGKILL under load, restart on the same journal; no record the
//! admin API returned is lost), `ctrl-c` and `daemon` (`af up` of the demo stopped at each step
//! by Ctrl-C or by the Docker daemon going away; a coded refusal and a clean `af down`).

pub(crate) mod docker_proxy;
mod footprint;
mod hold;
mod kill;
pub(crate) mod lifecycle;
mod report;

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use af_fixtures::cargo::{self, Linkage};
use serde::Serialize;

use self::footprint::Footprint;
use crate::error::{BenchError, Result};
use crate::systems::{AfProxy, Endpoint, Env, System};
use crate::upstream::Upstream;

/// One part of the soak.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub(crate) enum Part {
    /// Client connections held through the sidecar.
    Hold,
    /// SIGKILL under load, restart on the same journal.
    Kill,
    /// `af up` interrupted with Ctrl-C at each step.
    CtrlC,
    /// The Docker daemon gone at each step of `af up`.
    Daemon,
}

/// `af-benches soak` flags.
#[derive(Debug, clap::Args)]
pub(crate) struct SoakArgs {
    /// A short run: 1 000 connections held 20 s, 2 kills; results in quick.* (not committed).
    #[arg(long)]
    pub quick: bool,
    /// Client connections held at once (default 10 000, 1 000 with --quick).
    #[arg(long)]
    pub connections: Option<usize>,
    /// Seconds they are held (default 600, 20 with --quick).
    #[arg(long)]
    pub duration: Option<u64>,
    /// Seconds between two requests of one held connection.
    #[arg(long, default_value_t = 5)]
    pub interval: u64,
    /// Longest wait, seconds, after the clients close for the sidecar to be back at its baseline.
    #[arg(long, default_value_t = 120)]
    pub settle: u64,
    /// Shorter holds on the same sidecar after the first (is its memory reused?).
    #[arg(long, default_value_t = 3)]
    pub again: u32,
    /// Kills of the sidecar under load (default 5, 2 with --quick).
    #[arg(long)]
    pub kills: Option<u32>,
    /// Only these parts (comma-separated): hold, kill, ctrl-c, daemon.
    #[arg(long, value_delimiter = ',')]
    pub parts: Vec<Part>,
    /// The static af-proxy to run (default: build it as `all` does).
    #[arg(long)]
    pub af_proxy: Option<PathBuf>,
    /// The directory of the static af-proxy, af-forward and af-demo the demo's images are
    /// built from (default: af-proxy's directory).
    #[arg(long)]
    pub binaries: Option<PathBuf>,
    /// The af command (default: build it, `cargo build -p af-orchestrator --bin af`).
    #[arg(long)]
    pub af: Option<PathBuf>,
    /// Where results are written (default benches/results/soak).
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Machine label recorded with the results.
    #[arg(long, env = "AF_BENCH_MACHINE", default_value = "rust-docker")]
    pub machine: String,
}

/// Everything one soak measured.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Results {
    /// When it finished (RFC 3339, UTC).
    pub date: String,
    /// Which machine.
    pub machine: String,
    /// `--quick` or a full run.
    pub quick: bool,
    /// The af-proxy binary measured.
    pub af_proxy: String,
    /// The work tree's commit.
    pub commit: String,
    /// Client connections held.
    pub hold: Option<hold::Held>,
    /// The same again on the same sidecar, shorter, `--again` times: is what the first left
    /// reused, or added to?
    pub hold_again: Vec<hold::Held>,
    /// SIGKILL and restart.
    pub kill: Option<kill::Killed>,
    /// `af up` interrupted by Ctrl-C.
    pub ctrl_c: Option<lifecycle::Stopped>,
    /// `af up` losing the Docker daemon.
    pub daemon: Option<lifecycle::Stopped>,
    /// Every check that failed, as a sentence; empty when all held.
    pub failed: Vec<String>,
}

/// The sidecar's open files above its baseline that still count as "back": its pool may keep
/// this many idle upstream connections (`limits.pool_max_idle_per_host` in the soak's
/// configuration), plus four for a journal segment changing over and the admin connection.
const POOL_IDLE: usize = 16;

/// Resident memory above the baseline that still counts as "back", KiB: what the allocator
/// may keep of the freed connection buffers. See benches/README.md (soak).
const RSS_TOLERANCE_KIB: u64 = 32 * 1024;

/// The later holds' length: long enough to reach the first one's peak.
const AGAIN: Duration = Duration::from_secs(30);

/// Runs the soak and writes its results; fails when a check failed (after writing them).
pub(crate) fn run(args: SoakArgs, root: &Path, binary: PathBuf) -> Result<()> {
    let parts = if args.parts.is_empty() {
        vec![Part::Hold, Part::Kill, Part::CtrlC, Part::Daemon]
    } else {
        args.parts.clone()
    };
    let connections = args
        .connections
        .unwrap_or(if args.quick { 1_000 } else { 10_000 });
    let open_files = raise_open_files(connections)?;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| BenchError::io("start tokio", e))?;
    let mut results = Results {
        date: String::new(),
        machine: crate::describe_machine(&args.machine),
        quick: args.quick,
        af_proxy: binary.display().to_string(),
        commit: commit(root),
        hold: None,
        hold_again: Vec::new(),
        kill: None,
        ctrl_c: None,
        daemon: None,
        failed: Vec::new(),
    };
    if parts.contains(&Part::Hold) || parts.contains(&Part::Kill) {
        let work = tempfile::Builder::new()
            .prefix("af-soak-work-")
            .tempdir()
            .map_err(|e| BenchError::io("create work dir", e))?;
        let upstream = Upstream::spawn(work.path())?;
        // As deployed: af-proxy's data threads one per core.
        let env = Env::for_upstream(&upstream, 0);
        let sidecar = sidecar(&binary, connections, open_files);
        if parts.contains(&Part::Hold) {
            let (held, again) = hold_part(&rt, &args, connections, &sidecar, &env, &upstream)?;
            results.failed.extend(report::hold_failures(&held));
            results.failed.extend(report::again_failures(&held, &again));
            results.hold = Some(held);
            results.hold_again = again;
        }
        if parts.contains(&Part::Kill) {
            let killed = kill_part(&rt, &args, &sidecar, &env, &upstream)?;
            results.failed.extend(report::kill_failures(&killed));
            results.kill = Some(killed);
        }
    }
    let faults: Vec<lifecycle::Fault> = [
        (Part::CtrlC, lifecycle::Fault::CtrlC),
        (Part::Daemon, lifecycle::Fault::DaemonGone),
    ]
    .into_iter()
    .filter(|(p, _)| parts.contains(p))
    .map(|(_, f)| f)
    .collect();
    if !faults.is_empty() {
        let setup = lifecycle_setup(&args, root, &binary)?;
        let nonce = format!("{:06x}", fastrand::u32(..0xff_ffff));
        for fault in faults {
            let stopped = rt.block_on(lifecycle::run(&setup, fault, &nonce))?;
            results.failed.extend(report::lifecycle_failures(&stopped));
            match fault {
                lifecycle::Fault::CtrlC => results.ctrl_c = Some(stopped),
                lifecycle::Fault::DaemonGone => results.daemon = Some(stopped),
            }
        }
    }
    results.date = humantime::format_rfc3339_seconds(SystemTime::now()).to_string();
    let out = args
        .out
        .clone()
        .unwrap_or_else(|| root.join("benches").join("results").join("soak"));
    report::write(&results, &out, if args.quick { "quick" } else { "latest" })?;
    if results.failed.is_empty() {
        Ok(())
    } else {
        Err(BenchError::Protocol(format!(
            "soak checks failed: {}",
            results.failed.join("; ")
        )))
    }
}

/// The sidecar the hold and the kills run: the harness's configuration with room for
/// `connections`.
fn sidecar(binary: &Path, connections: usize, open_files: u64) -> AfProxy {
    let upstreams = upstream_cap(connections, open_files);
    AfProxy::new(binary.to_path_buf(), false).with_settings(move |config| {
        // Room for every held connection and its tunnel, and together below the open-files
        // limit (with the sidecar's reserve of 1024), so it starts without a warning.
        config.limits.max_connections = connections + 1_000;
        config.limits.max_upstream_connections = upstreams;
        config.limits.pool_max_idle_per_host = POOL_IDLE;
        // Large enough that no kill round's records are evicted (a lost record is the
        // journal's failure, not its bound's).
        config.journal.max_segments = 64;
    })
}

/// The hold, then `--again` shorter ones on the same sidecar.
fn hold_part(
    rt: &tokio::runtime::Runtime,
    args: &SoakArgs,
    connections: usize,
    sidecar: &AfProxy,
    env: &Env,
    upstream: &Upstream,
) -> Result<(hold::Held, Vec<hold::Held>)> {
    let plan = hold::Plan {
        connections,
        duration: Duration::from_secs(args.duration.unwrap_or(if args.quick { 20 } else { 600 })),
        interval: Duration::from_secs(args.interval.max(1)),
        settle: Duration::from_secs(args.settle),
        sample_every: Duration::from_secs(if args.quick { 2 } else { 10 }),
        tolerance: Footprint {
            open_files: POOL_IDLE + 4,
            rss_kib: RSS_TOLERANCE_KIB,
        },
    };
    let again = hold::Plan {
        duration: plan.duration.min(AGAIN),
        settle: Duration::ZERO,
        ..plan.clone()
    };
    let running = sidecar.start(env)?;
    let (Endpoint::Proxy(proxy), Some(pid), Some(admin)) =
        (running.endpoint, running.pid(), running.admin)
    else {
        return Err(BenchError::Protocol(
            "af-proxy has no proxy or admin address".into(),
        ));
    };
    let under_test = hold::Sidecar {
        proxy,
        pid,
        admin: crate::admin::Admin::new(admin),
    };
    rt.block_on(async {
        hold::warm_up(proxy, upstream.http, hold::WARM_UP).await?;
        tokio::time::sleep(Duration::from_secs(2)).await;
        let baseline = Footprint::read(pid)?;
        let held = hold::run(under_test, upstream.http, baseline, &plan).await?;
        let mut agains = Vec::new();
        for _ in 0..args.again {
            agains.push(hold::run(under_test, upstream.http, baseline, &again).await?);
        }
        Ok((held, agains))
    })
}

/// SIGKILL under load, `--kills` times, on a sidecar of its own.
fn kill_part(
    rt: &tokio::runtime::Runtime,
    args: &SoakArgs,
    sidecar: &AfProxy,
    env: &Env,
    upstream: &Upstream,
) -> Result<kill::Killed> {
    let plan = kill::Plan {
        rounds: args.kills.unwrap_or(if args.quick { 2 } else { 5 }),
        load: Duration::from_secs(3),
        workers: 32,
    };
    let mut running = sidecar.start(env)?;
    let Endpoint::Proxy(proxy) = running.endpoint else {
        return Err(BenchError::Protocol("af-proxy has no proxy address".into()));
    };
    rt.block_on(kill::run(&mut running, proxy, upstream.http, &plan))
}

/// The programs `af up` is run with.
fn lifecycle_setup(args: &SoakArgs, root: &Path, binary: &Path) -> Result<lifecycle::Setup> {
    let af = match &args.af {
        Some(af) => af.clone(),
        None => build_af(root, false)?,
    };
    let binaries = args
        .binaries
        .clone()
        .or_else(|| binary.parent().map(Path::to_path_buf))
        .unwrap_or_default();
    lifecycle::Setup::new(&af, &binaries, root)
}

/// The sidecar's cap on upstream connections: every tunnel's and the pool's, with room to
/// spare, and no more than the open-files limit leaves after the client connections.
fn upstream_cap(connections: usize, open_files: u64) -> usize {
    // Each upstream connection may carry a spliced tunnel: itself and its two pipes' four ends.
    let room = (open_files as usize).saturating_sub(connections + 1_000 + 1_024) / 5;
    (connections / hold::TUNNEL_EVERY + POOL_IDLE + 1_000).min(room)
}

/// Raises RLIMIT_NOFILE so that the held client connections fit in this process, and they
/// and their tunnels' upstream connections in the sidecar, which inherits the limit and raises
/// its own soft limit to the hard one. The hard limit is raised too where this process may
/// (CAP_SYS_RESOURCE); otherwise the soft limit goes up to it, and the run stops here if even
/// that is too low.
fn raise_open_files(connections: usize) -> Result<u64> {
    let need = (connections + 5 * (connections / hold::TUNNEL_EVERY) + 2_048) as u64;
    let want = need.max(65_536);
    let (_, hard) = rlimit::getrlimit(rlimit::Resource::NOFILE)
        .map_err(|e| BenchError::io("read RLIMIT_NOFILE", e))?;
    if rlimit::setrlimit(rlimit::Resource::NOFILE, want, hard.max(want)).is_ok() {
        return Ok(want);
    }
    if hard < need {
        return Err(BenchError::Protocol(format!(
            "{connections} connections need {need} open files in the sidecar and the hard RLIMIT_NOFILE is {hard}; raise it (ulimit -Hn, as root with CAP_SYS_RESOURCE) or hold fewer (--connections)"
        )));
    }
    rlimit::setrlimit(rlimit::Resource::NOFILE, hard, hard)
        .map_err(|e| BenchError::io("raise RLIMIT_NOFILE", e))?;
    Ok(hard)
}

/// `cargo build -p af-orchestrator --bin af` (`--release` when `release`); the binary's path.
pub(crate) fn build_af(root: &Path, release: bool) -> Result<PathBuf> {
    let mut args = vec!["-p", "af-orchestrator", "--bin", "af"];
    if release {
        args.push("--release");
    }
    crate::systems::cargo_build(root, Linkage::Host, &args)?;
    let profile = if release { "release" } else { "debug" };
    Ok(cargo::target_dir(root).join(profile).join("af"))
}

/// The work tree's short commit, `+dirty` when it has changes.
fn commit(root: &Path) -> String {
    let git = |args: &[&str]| {
        std::process::Command::new("git")
            .current_dir(root)
            .args(args)
            .output()
            .ok()
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
    };
    let head = git(&["rev-parse", "--short", "HEAD"]).unwrap_or_default();
    match git(&["status", "--porcelain"]) {
        Some(s) if !s.is_empty() => format!("{head}+dirty"),
        _ => head,
    }
}
