//! The command line, as clap reads it.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

use crate::output::Format;

/// Run a repository's services as one environment whose only way out is the af sidecar.
#[derive(Debug, Parser)]
#[command(name = "af", version, propagate_version = true)]
pub struct Cli {
    #[command(flatten)]
    pub global: Global,
    #[command(subcommand)]
    pub command: Command,
}

/// Flags every command takes.
#[derive(Debug, Args)]
pub struct Global {
    /// Output format.
    #[arg(short = 'o', long = "output", global = true, value_enum, default_value_t = Format::Text)]
    pub output: Format,
    /// The manifest to use instead of the af.yaml found from the working directory up.
    #[arg(short = 'f', long = "file", global = true, value_name = "PATH")]
    pub file: Option<PathBuf>,
}

/// What to do.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Check af.yaml and show where the environment would run. Creates nothing.
    Validate,
    /// Print the JSON Schema of af.yaml, for editors.
    Schema,
    /// The egress catalogue and the sidecar's decisions.
    #[command(subcommand)]
    Net(NetCommand),
}

/// `af net ...`
#[derive(Debug, Subcommand)]
pub enum NetCommand {
    /// List the egress rules in deciding order (most specific first).
    Policy,
    /// Show how a request would be decided: every rule that matches and why the winner wins.
    Explain {
        /// The HTTP method, e.g. GET.
        method: String,
        /// The absolute URL, e.g. https://api.example.com/v1/users.
        url: String,
    },
}
