//! `af-proxy --config FILE`: check the configuration, start every listener, and on SIGTERM or
//! SIGINT drain and exit 0. `af-proxy --check-config FILE`: only check it.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::Parser;

use af_proxy::config;

/// jemalloc, whose background threads give freed pages back within seconds of a load peak
/// (glibc's malloc kept a 10 000-connection peak resident: benches/results/soak/). With the
/// `alloc-count` feature the library installs it wrapped in a counter instead.
#[cfg(not(feature = "alloc-count"))]
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

/// The af egress sidecar.
#[derive(Parser)]
#[command(version, about)]
struct Args {
    /// The sidecar configuration (JSON when it ends in .json, YAML otherwise).
    #[arg(
        long,
        env = "AF_PROXY_CONFIG",
        required_unless_present = "check_config"
    )]
    config: Option<PathBuf>,
    /// Read and check this configuration, bind nothing, and exit: 0 when the sidecar would
    /// start with it, else its coded report.
    #[arg(long, value_name = "FILE")]
    check_config: Option<PathBuf>,
}

fn main() -> ExitCode {
    let args = Args::parse();
    if let Some(path) = &args.check_config {
        return check_only(path);
    }
    // clap requires `--config` when `--check-config` is not given.
    let Some(path) = &args.config else {
        return ExitCode::FAILURE;
    };
    tracing_subscriber::fmt()
        .json()
        .with_writer(std::io::stderr)
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("AF_PROXY_LOG")
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .init();
    // Checked before anything is bound.
    let settings = match config::load(path) {
        Ok(s) => s,
        Err(report) => {
            eprintln!("{report}");
            return ExitCode::from(report.exit_status().code());
        }
    };
    // The control surfaces' runtime (the admin API, DNS, the containment watchers): the
    // data listeners are served on their own threads (`limits.data_threads`).
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("AF-NET-001 The sidecar could not start its runtime: {e}.");
            return ExitCode::from(6);
        }
    };
    runtime.block_on(async {
        let running = match af_proxy::sidecar::start(settings).await {
            Ok(r) => r,
            Err(report) => {
                eprintln!("{report}");
                return ExitCode::from(report.exit_status().code());
            }
        };
        shutdown_signal().await;
        tracing::info!("af-proxy stopping");
        let drained = running.shutdown().await;
        tracing::info!(cut = drained.cut, "af-proxy stopped");
        ExitCode::SUCCESS
    })
}

/// `--check-config`: the document and what starting compiles from it, nothing bound.
fn check_only(path: &Path) -> ExitCode {
    match config::load(path).and_then(|s| af_proxy::sidecar::check(&s).map(|()| s)) {
        Ok(settings) => {
            println!(
                "{}: a valid sidecar configuration (version {}, env {}).",
                path.display(),
                settings.config.version,
                settings.config.env
            );
            ExitCode::SUCCESS
        }
        Err(report) => {
            eprintln!("{report}");
            ExitCode::from(report.exit_status().code())
        }
    }
}

/// SIGTERM (what a container runtime sends) or SIGINT.
async fn shutdown_signal() {
    let term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate());
    let mut term = match term {
        Ok(term) => term,
        Err(e) => {
            // Left at the default, SIGTERM still ends the process, only without the drain.
            tracing::warn!(error = %e, "SIGTERM cannot be caught; it will stop af-proxy without draining");
            let _ = tokio::signal::ctrl_c().await;
            return;
        }
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term.recv() => {}
    }
}
