//! One module per command; each returns what it prints or a [`Refusal`].

mod ecs;
mod init;
mod lifecycle;
mod net_policy;
mod schema;
mod shell;
mod validate;

use std::path::PathBuf;

use af_policy::egress::Catalogue;
use af_policy::error::{Report, codes};
use af_policy::manifest::Manifest;

use crate::cli::{Cli, Command, EcsCommand, Global, NetCommand};
use crate::refusal::Refusal;

/// Run the command the user asked for; the status af exits with (`af exec`: the command's).
pub(crate) fn run(cli: &Cli) -> Result<u8, Refusal> {
    let global = &cli.global;
    let done = match &cli.command {
        Command::Validate => validate::run(global),
        Command::Init { from, force } => init::run(global, from.as_deref(), *force),
        Command::Schema => schema::run(),
        Command::Ecs(EcsCommand::Report { plan }) => ecs::report(global, plan.as_deref()),
        Command::Ecs(EcsCommand::CheckRuleGroup { file }) => ecs::check_rule_group(global, file),
        Command::Completions { shell } => shell::completions(*shell),
        Command::Man => shell::man(),
        Command::Net(NetCommand::Policy) => net_policy::policy(global),
        Command::Net(NetCommand::Explain { method, url }) => {
            net_policy::explain(global, method, url)
        }
        command => return lifecycle::run(global, command),
    };
    done.map(|()| 0)
}

/// The manifest named by `--file`, or the `af.yaml` found from the working directory up.
pub(crate) fn load_manifest(global: &Global) -> Result<(PathBuf, Manifest), Refusal> {
    match &global.file {
        Some(path) => Ok((path.clone(), Manifest::from_path(path)?)),
        None => {
            let cwd = std::env::current_dir().map_err(|e| {
                Report::new(
                    &codes::MAN_UNREADABLE,
                    format!("The working directory cannot be read: {e}."),
                )
            })?;
            Ok(Manifest::discover(&cwd)?)
        }
    }
}

/// The manifest's egress catalogue, compiled.
pub(crate) fn load_catalogue(global: &Global) -> Result<Catalogue, Refusal> {
    let (_, manifest) = load_manifest(global)?;
    // A manifest that loaded has a catalogue that compiles; keep the refusal honest anyway.
    Catalogue::compile(&manifest.egress).map_err(|problems| {
        let first = problems.first().map_or_else(String::new, |p| {
            format!(" rules[{}].{}: {}", p.rule, p.field, p.message)
        });
        Refusal::from(Report::new(
            &codes::MAN_BAD_RULE,
            format!("The egress catalogue does not compile:{first}."),
        ))
    })
}
