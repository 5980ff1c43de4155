//! `af`: run a repository's services as one environment whose only way out is the sidecar,
//! and see what they tried to send.

mod cli;
mod commands;
mod output;
mod refusal;

use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    let cli = cli::Cli::parse();
    match commands::run(&cli) {
        Ok(status) => ExitCode::from(status),
        Err(refusal) => {
            refusal.print(cli.global.output);
            ExitCode::from(refusal.exit_status().code())
        }
    }
}
