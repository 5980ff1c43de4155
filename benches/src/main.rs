//! af-benches: af-proxy and af-dns side by side with their peers, on loopback,
//! in front of one local upstream. See benches/README.md.

mod admin;
mod bench;
mod compare;
mod decision;
mod error;
mod load;
mod proc;
mod report;
mod scenarios;
mod soak;
mod stacks;
mod systems;
mod upstream;

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, SystemTime};

use af_fixtures::cargo::{self, Linkage};
use clap::{Parser, Subcommand};

use crate::error::{BenchError, Result};
use crate::scenarios::{Load, Scenario};
use crate::systems::AfProxy;

/// af-proxy and af-dns against direct, squid, tinyproxy, privoxy, mitmproxy, dnsmasq and unbound.
#[derive(Parser)]
#[command(version)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Build af-proxy, run every scenario against every system, print the table, write results.
    All(AllArgs),
    /// Load and faults, bounded in count and time: connections held, SIGKILL, `af up` stopped.
    Soak(soak::SoakArgs),
    /// The local upstream (started by `all`; not for direct use).
    #[command(hide = true)]
    Upstream(upstream::Ports),
    /// af-dns as a server (started by `all`; not for direct use).
    #[command(hide = true)]
    AfDns(systems::AfDnsArgs),
}

#[derive(clap::Args)]
struct AllArgs {
    /// CI mode: one round, 2 s runs, 1000 idle connections, results in quick.{json,svg}.
    #[arg(long)]
    quick: bool,
    /// Rounds (default 3, 1 with --quick).
    #[arg(long)]
    rounds: Option<u32>,
    /// Seconds per timed run (default 8, 2 with --quick).
    #[arg(long)]
    duration: Option<u64>,
    /// Idle connections in the memory scenario (default 10000, 1000 with --quick).
    #[arg(long)]
    idle: Option<usize>,
    /// Only these scenarios (comma-separated).
    #[arg(long, value_delimiter = ',')]
    scenarios: Vec<Scenario>,
    /// Only these systems (comma-separated names as in the table).
    #[arg(long, value_delimiter = ',')]
    systems: Vec<String>,
    /// Data-plane threads (comma-separated, each at least 1): every system gets the first
    /// (HAProxy's nbthread, unbound's num-threads, af-proxy's limits.data_threads); each other
    /// count adds af-proxy and HAProxy with that many threads, in the HTTP scenarios.
    #[arg(long, value_delimiter = ',', default_value = "1,2", value_parser = clap::value_parser!(u32).range(1..))]
    threads: Vec<u32>,
    /// Use this af-proxy binary instead of building the static release one.
    #[arg(long)]
    af_proxy: Option<PathBuf>,
    /// Count allocations with this af-proxy, built with `--features alloc-count`, as
    /// `af-proxy (allocs)` (built beside the measured one unless `--af-proxy` is given).
    #[arg(long)]
    af_proxy_allocs: Option<PathBuf>,
    /// Also build af-proxy at this git revision and measure it beside this tree's, in the same
    /// interleaved rounds, as `af-proxy@REV`.
    #[arg(long, value_name = "REV")]
    compare: Option<String>,
    /// Leave af-proxy's DNS listener off (for a binary from before af-dns was wired in).
    #[arg(long)]
    no_af_dns: bool,
    /// The af command `af-up` runs (default: build it, `cargo build --release -p af-orchestrator
    /// --bin af`).
    #[arg(long)]
    af: Option<PathBuf>,
    /// The decision driver `decision` runs (default: build it, `cargo build --release -p
    /// af-policy --example decide`, static as af-proxy is).
    #[arg(long)]
    decide: Option<PathBuf>,
    /// Where results are written.
    #[arg(long)]
    out: Option<PathBuf>,
    /// Machine label recorded with the results.
    #[arg(long, env = "AF_BENCH_MACHINE", default_value = "rust-docker")]
    machine: String,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let outcome = match cli.command {
        Command::All(args) => all(args),
        Command::Soak(args) => soak(args),
        Command::Upstream(ports) => serve_upstream(ports),
        Command::AfDns(args) => systems::serve_af_dns(args),
    };
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("af-benches: {e}");
            ExitCode::FAILURE
        }
    }
}

fn serve_upstream(ports: upstream::Ports) -> Result<()> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| BenchError::io("start tokio", e))?
        .block_on(upstream::serve(ports))
}

/// The af-proxy to measure: `--af-proxy`, or the static release build made now and copied
/// into `pinned` (the target directory is shared: a later build from another work tree cannot
/// swap the binary mid-run).
fn af_proxy_binary(given: Option<PathBuf>, pinned: &Path) -> Result<PathBuf> {
    match given {
        Some(path) => Ok(path),
        None => pinned_build(&[], pinned, "af-proxy"),
    }
}

/// This tree's static af-proxy built with `features`, copied into `pinned` as `name`.
fn pinned_build(features: &[&str], pinned: &Path, name: &str) -> Result<PathBuf> {
    let binary = AfProxy::build(&cargo::workspace_root(), features)?;
    AfProxy::pin(&binary, pinned, name)
}

/// What `af-up` runs: `af` (given, or a release build of this tree), the static binaries the
/// demo's images are made of (af-proxy, af-forward, af-demo, built now) and `fixtures/demo`.
fn demo_setup(af: Option<PathBuf>) -> Result<soak::lifecycle::Setup> {
    let root = cargo::workspace_root();
    systems::cargo_build(&root, Linkage::Static, &["-p", "af-fixtures", "--bins"])?;
    let af = match af {
        Some(af) => af,
        None => soak::build_af(&root, true)?,
    };
    soak::lifecycle::Setup::new(&af, &cargo::static_release_dir(&root), &root)
}

fn soak(args: soak::SoakArgs) -> Result<()> {
    let pinned = tempfile::Builder::new()
        .prefix("af-bench-bin-")
        .tempdir()
        .map_err(|e| BenchError::io("create binary dir", e))?;
    let binary = af_proxy_binary(args.af_proxy.clone(), pinned.path())?;
    soak::run(args, &cargo::workspace_root(), binary)
}

/// Every system, af-proxy and its twins built (or given) first.
fn proxy_systems(args: &AllArgs, pinned: &Path) -> Result<Vec<Box<dyn systems::System>>> {
    // The older revision and the counting build first, so the image build (the last one)
    // is what the target directory holds afterwards.
    let older = args
        .compare
        .as_deref()
        .map(|rev| compare::build_older(&cargo::workspace_root(), rev, pinned))
        .transpose()?;
    let allocs = match (&args.af_proxy, &args.af_proxy_allocs) {
        (_, Some(path)) => Some(path.clone()),
        (Some(_), None) => None,
        (None, None) => Some(pinned_build(
            &["alloc-count"],
            pinned,
            "af-proxy-alloc-count",
        )?),
    };
    let binary = af_proxy_binary(args.af_proxy.clone(), pinned)?;
    let measured = AfProxy::new(binary, !args.no_af_dns);
    let mut twins: Vec<AfProxy> = Vec::new();
    twins.extend(allocs.map(|binary| measured.counting(binary)));
    twins.extend(older.map(|o| measured.older(o.binary, &o.rev)));
    let (_, scaled) = args.threads.split_first().unwrap_or((&1, &[]));
    Ok(systems::all(measured, twins, scaled))
}

fn all(args: AllArgs) -> Result<()> {
    // 10k idle client connections plus the proxy's own: children inherit this.
    let nofile = rlimit::increase_nofile_limit(200_000)
        .map_err(|e| BenchError::io("raise RLIMIT_NOFILE", e))?;
    let idle = args.idle.unwrap_or(if args.quick { 1_000 } else { 10_000 });
    if nofile < idle as u64 + 1_000 {
        eprintln!("warning: RLIMIT_NOFILE is only {nofile}; the idle-memory scenario may fail");
    }
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    let pinned = tempfile::Builder::new()
        .prefix("af-bench-bin-")
        .tempdir()
        .map_err(|e| BenchError::io("create binary dir", e))?;
    let plan = bench::Plan {
        rounds: args.rounds.unwrap_or(if args.quick { 1 } else { 3 }).max(1),
        load: Load {
            duration: Duration::from_secs(args.duration.unwrap_or(if args.quick { 2 } else { 8 })),
            idle_connections: idle,
        },
        scenarios: if args.scenarios.is_empty() {
            Scenario::ALL.to_vec()
        } else {
            args.scenarios.clone()
        },
        threads: args.threads.first().copied().unwrap_or(1),
    };
    let mut systems = if plan.scenarios.iter().any(|s| s.needs_af_proxy()) {
        proxy_systems(&args, pinned.path())?
    } else {
        Vec::new()
    };
    let mut stacks = if plan.scenarios.contains(&Scenario::AfUp) {
        stacks::both(demo_setup(args.af.clone())?)?
    } else {
        Vec::new()
    };
    let mut decisions = if plan.scenarios.contains(&Scenario::Decision) {
        let driver = match args.decide {
            Some(driver) => driver,
            None => decision::build_driver(&cargo::workspace_root())?,
        };
        decision::cases(&driver)
    } else {
        Vec::new()
    };
    if !args.systems.is_empty() {
        let chosen = |name: &str| args.systems.iter().any(|n| n == name);
        systems.retain(|s| chosen(s.name()));
        stacks.retain(|s| chosen(s.name()));
        decisions.retain(|c| chosen(c.name()));
    }
    let (runs, rows) = bench::run(&plan, &systems, &stacks, &decisions)?;
    let goals = report::goals::judge(&rows, &args.threads);
    let table = format!(
        "{}\n{}",
        report::table::render(&rows),
        report::goals::render(&goals)
    );
    println!("{table}");

    let out = args.out.unwrap_or_else(|| manifest.join("results"));
    std::fs::create_dir_all(&out)
        .map_err(|e| BenchError::io(format!("create {}", out.display()), e))?;
    let stem = if args.quick { "quick" } else { "latest" };
    let date = humantime::format_rfc3339_seconds(SystemTime::now()).to_string();
    let machine = describe_machine(&args.machine);
    let results = report::json::Results {
        date: date.clone(),
        machine: machine.clone(),
        quick: args.quick,
        rounds: plan.rounds,
        duration_secs: plan.load.duration.as_secs(),
        idle_connections: plan.load.idle_connections,
        threads: args.threads.clone(),
        rows,
        goals,
        runs,
    };
    let json = out.join(format!("{stem}.json"));
    report::json::write(&results, &json)?;
    let title = format!(
        "af-benches {date} on {machine} (medians of {} rounds, {} data-plane thread{} each)",
        plan.rounds,
        plan.threads,
        if plan.threads == 1 { "" } else { "s" }
    );
    let svg = out.join(format!("{stem}.svg"));
    report::chart::draw(&results.rows, &title, &svg)?;
    let txt = out.join(format!("{stem}.txt"));
    std::fs::write(&txt, format!("{title}\n\n{table}"))
        .map_err(|e| BenchError::io(format!("write {}", txt.display()), e))?;
    eprintln!(
        "wrote {}, {} and {}",
        json.display(),
        svg.display(),
        txt.display()
    );
    Ok(())
}

/// "rust-docker: 2 cores, 24 GiB, Linux 6.x".
fn describe_machine(label: &str) -> String {
    let cores = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(0);
    let mem_gib = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|m| proc::parse_status_kib(&m, "MemTotal:"))
        .map(|kib| (kib as f64 / 1024.0 / 1024.0).round() as u64)
        .unwrap_or(0);
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    format!(
        "{label}: {cores} cores, {mem_gib} GiB, Linux {}",
        kernel.trim()
    )
}
