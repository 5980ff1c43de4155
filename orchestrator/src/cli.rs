//! The command line, as clap reads it.

use std::path::PathBuf;
use std::time::Duration;

use af_orchestrator::webhook::Provider;
use clap::{Args, Parser, Subcommand};

use crate::output::Format;

/// Run a repository's services as one environment whose only way out is the af sidecar.
#[derive(Debug, Parser)]
#[command(name = "af", version, propagate_version = true)]
pub(crate) struct Cli {
    #[command(flatten)]
    pub global: Global,
    #[command(subcommand)]
    pub command: Command,
}

/// Flags every command takes.
#[derive(Debug, Args)]
pub(crate) struct Global {
    /// Output format.
    #[arg(short = 'o', long = "output", global = true, value_enum, default_value_t = Format::Text)]
    pub output: Format,
    /// The manifest to use instead of the af.yaml found from the working directory up.
    #[arg(short = 'f', long = "file", global = true, value_name = "PATH")]
    pub file: Option<PathBuf>,
}

/// What to do.
#[derive(Debug, Subcommand)]
pub(crate) enum Command {
    /// Write af.yaml from the project's Compose file (compose.yaml, docker-compose.yml, ...)
    /// and list, service by service, what it did not carry over and why.
    Init {
        /// The Compose file to read instead of the one in the working directory.
        #[arg(long, value_name = "FILE")]
        from: Option<PathBuf>,
        /// Replace an existing af.yaml, after showing the difference.
        #[arg(long)]
        force: bool,
    },
    /// Check af.yaml and show where the environment would run. Creates nothing.
    Validate,
    /// Print the JSON Schema of af.yaml, for editors.
    Schema,
    /// The egress catalogue and the sidecar's decisions.
    #[command(subcommand)]
    Net(NetCommand),
    /// Start the environment (or bring it up to date); one line per service, then its id.
    Up(ShownArg),
    /// Remove everything the environment's runtime made (exit 5 if anything is left).
    Down(ShownArg),
    /// Show the environment's sidecar and services.
    Status(EnvArg),
    /// List the environments on this machine's Docker daemon and on the clusters the
    /// manifest's targets name: where each runs, its state, age, project and repository.
    Ls,
    /// Show what the services wrote.
    Logs {
        #[command(flatten)]
        env: EnvArg,
        /// Only this service.
        service: Option<String>,
        /// Keep streaming.
        #[arg(long)]
        follow: bool,
        /// Only the last N lines of each service.
        #[arg(long, value_name = "N")]
        tail: Option<usize>,
    },
    /// Restart the sidecar (the default) or one service in place, and wait until it is back.
    Restart {
        #[command(flatten)]
        env: EnvArg,
        /// The service to restart; `sidecar` when absent.
        service: Option<String>,
        /// Print only the result or the refusal (not where the runtime works).
        #[arg(short = 'q', long)]
        quiet: bool,
    },
    /// Run a command inside a running service (a shell when none is named), in a terminal when
    /// stdin is one; af exits with the command's status.
    Exec {
        #[command(flatten)]
        env: EnvArg,
        /// Never give the command a terminal, even when stdin is one.
        #[arg(short = 'T', long)]
        no_tty: bool,
        /// The service.
        service: String,
        /// The command and its arguments (`--` before them when they start with `-`).
        #[arg(
            trailing_var_arg = true,
            allow_hyphen_values = true,
            value_name = "COMMAND"
        )]
        command: Vec<String>,
    },
    /// The messages the services sent that the sidecar captured (capture mode and SMTP).
    #[command(subcommand)]
    Inbox(InboxCommand),
    /// Provider webhooks, signed with the environment's secrets, delivered to a service.
    #[command(subcommand)]
    Webhook(WebhookCommand),
    /// Serve a local web page of the environment's decisions (live), captured messages and
    /// set-up, on 127.0.0.1 under a secret path, until Ctrl-C.
    Ui {
        #[command(flatten)]
        env: EnvArg,
        /// Listen on this port of 127.0.0.1 (default: a free one).
        #[arg(long, value_name = "PORT")]
        port: Option<u16>,
        /// Print the page's address without opening a browser.
        #[arg(long)]
        no_open: bool,
    },
    /// Check that this machine can run environments, with a remedy for each problem.
    Doctor,
    /// Why there is no ECS runtime: its report, and the DNS Firewall rule-group check.
    #[command(subcommand)]
    Ecs(EcsCommand),
    /// Print the completion script for SHELL: `af completions bash > /etc/bash_completion.d/af`.
    Completions {
        /// bash, zsh, fish, elvish or powershell.
        shell: clap_complete::Shell,
    },
    /// Print af's manual page (roff): `af man | man -l -`.
    Man,
}

/// `af ecs ...`
#[derive(Debug, Subcommand)]
pub(crate) enum EcsCommand {
    /// The thirteen egress paths out of a Fargate task for this manifest, on the network the
    /// AF_ECS_* variables describe: what closes each, and why af refuses ECS (exit 3, always).
    Report {
        /// Write the generated plan (security groups, route tables, endpoint policies, the
        /// DNS Firewall rule group) to FILE as JSON.
        #[arg(long, value_name = "FILE")]
        plan: Option<PathBuf>,
    },
    /// Check a DNS Firewall rule group (the JSON docs/ecs.md describes): accepted, or refused
    /// with a coded reason for each way it lets a name through.
    CheckRuleGroup {
        /// The rule group's JSON file.
        file: PathBuf,
    },
}

/// `af inbox ...`
#[derive(Debug, Subcommand)]
pub(crate) enum InboxCommand {
    /// List captured messages, oldest first: seq, time, provider, to, subject, code.
    List {
        #[command(flatten)]
        env: EnvArg,
        /// Only messages to this recipient.
        #[arg(long, value_name = "ADDRESS")]
        to: Option<String>,
        /// At most N messages.
        #[arg(long, value_name = "N")]
        limit: Option<usize>,
    },
    /// Show one message in full: recipients, code, every link (best first) and the bodies.
    Get {
        #[command(flatten)]
        env: EnvArg,
        /// The message's number (SEQ in `af inbox list`).
        seq: u64,
    },
    /// Wait for a message to a recipient and show it (one already captured counts); with
    /// `-o json`, `jq .message.code` gives its code. AF-RUN-050 after the timeout.
    Wait {
        #[command(flatten)]
        env: EnvArg,
        /// The recipient.
        #[arg(long, value_name = "ADDRESS")]
        to: String,
        /// Only a message with this subject.
        #[arg(long)]
        subject: Option<String>,
        /// How long to wait, e.g. 30s, 2m.
        #[arg(long, value_name = "DURATION", default_value = "60s", value_parser = humantime::parse_duration)]
        timeout: Duration,
    },
}

/// `af webhook ...`
#[derive(Debug, Subcommand)]
pub(crate) enum WebhookCommand {
    /// Build a provider's webhook for EVENT, sign it with the environment's secret (the one in
    /// every service's STRIPE_/GITHUB_/SVIX_WEBHOOK_SECRET) and deliver it to a service.
    Trigger {
        #[command(flatten)]
        env: EnvArg,
        /// stripe, github or svix.
        provider: Provider,
        /// The event: payment_intent.succeeded, checkout.session.completed, push,
        /// pull_request.closed, user.created, ...
        event: String,
        /// Change a payload field: --set data.object.amount=5000 (numbers, true, false and
        /// null are JSON; anything else is a string). Repeatable.
        #[arg(long = "set", value_name = "PATH=VALUE")]
        sets: Vec<String>,
        /// The service to deliver to (default: the only web service).
        #[arg(long)]
        service: Option<String>,
        /// The path (default: the provider's rule's webhook_path, else /webhooks/PROVIDER).
        #[arg(long)]
        path: Option<String>,
    },
}

/// Which environment: derived from the repository and branch unless given.
#[derive(Debug, Args)]
pub(crate) struct EnvArg {
    /// The environment id (default: derived from the project, repository and branch).
    #[arg(long = "env", value_name = "ID")]
    pub env: Option<String>,
}

/// The environment, and how much `af up` or `af down` shows while it works.
#[derive(Debug, Args)]
pub(crate) struct ShownArg {
    #[command(flatten)]
    pub env: EnvArg,
    /// Print only the result (each service's line and the id, or what was removed) or the
    /// refusal: no steps, no live display.
    #[arg(short = 'q', long)]
    pub quiet: bool,
}

/// `af net ...`
#[derive(Debug, Subcommand)]
pub(crate) enum NetCommand {
    /// List the egress rules in deciding order (most specific first).
    Policy,
    /// Show how a request would be decided: every rule that matches and why the winner wins.
    Explain {
        /// The HTTP method, e.g. GET.
        method: String,
        /// The absolute URL, e.g. https://api.example.com/v1/users; for CONNECT, the
        /// authority, e.g. api.example.com:443.
        url: String,
    },
    /// Show the sidecar's decisions, read through its admin API.
    Log {
        #[command(flatten)]
        env: EnvArg,
        /// Only refused requests.
        #[arg(long)]
        blocked: bool,
        /// Keep streaming new decisions.
        #[arg(long)]
        follow: bool,
        /// Only the newest N records (still oldest first, like `tail`).
        #[arg(long, value_name = "N")]
        limit: Option<usize>,
        /// Only this host.
        #[arg(long)]
        host: Option<String>,
        /// Write the decisions to FILE as HAR 1.2 (for a browser's network panel or Charles)
        /// instead of listing them.
        #[arg(long, value_name = "FILE", conflicts_with = "follow")]
        har: Option<PathBuf>,
    },
    /// Print egress rules (YAML for af.yaml's egress.rules) that would decide what the
    /// journal shows going to the catalogue's default, one per host with the methods and
    /// paths seen; each is checked by the catalogue compiler first.
    Suggest {
        #[command(flatten)]
        env: EnvArg,
        /// The mode the rules give.
        #[arg(long, value_enum, default_value_t = SuggestMode::Allow)]
        mode: SuggestMode,
        /// Only requests of the last DURATION, e.g. 10m, 2h.
        #[arg(long, value_name = "DURATION", value_parser = humantime::parse_duration)]
        since: Option<Duration>,
    },
}

/// The modes `af net suggest` writes rules for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum SuggestMode {
    /// Forward for real.
    Allow,
    /// Answer from fixtures.
    Mock,
    /// Record it and answer as the provider would.
    Capture,
}

impl From<SuggestMode> for af_policy::egress::Mode {
    fn from(mode: SuggestMode) -> Self {
        match mode {
            SuggestMode::Allow => Self::Allow,
            SuggestMode::Mock => Self::Mock,
            SuggestMode::Capture => Self::Capture,
        }
    }
}
