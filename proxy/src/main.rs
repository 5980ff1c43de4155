//! `af-proxy --config FILE`: check the configuration, start every listener, and on SIGTERM or
//! SIGINT drain and exit 0.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;

use af_proxy::config::Config;

/// The af egress sidecar.
#[derive(Parser)]
#[command(version, about)]
struct Args {
    /// The sidecar configuration (JSON when it ends in .json, YAML otherwise).
    #[arg(long, env = "AF_PROXY_CONFIG")]
    config: PathBuf,
}

fn main() -> ExitCode {
    let args = Args::parse();
    tracing_subscriber::fmt()
        .json()
        .with_writer(std::io::stderr)
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("AF_PROXY_LOG")
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info,hickory_server=warn")),
        )
        .init();
    // Checked before anything is bound.
    let settings = match Config::load(&args.config) {
        Ok(s) => s,
        Err(report) => {
            eprintln!("{report}");
            return ExitCode::from(report.exit_status().code());
        }
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread()
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
