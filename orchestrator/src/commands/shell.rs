//! `af completions SHELL` and `af man`: the shell's completions and the manual page, both
//! generated from the command line's own definitions, so neither can drift from it.

use std::io::Write;

use af_policy::error::{Report, codes};
use clap::CommandFactory;
use clap_complete::Shell;

use crate::cli::Cli;
use crate::output;
use crate::refusal::Refusal;

/// Print the completion script for `shell` on stdout.
pub(super) fn completions(shell: Shell) -> Result<(), Refusal> {
    let mut command = Cli::command();
    let mut out = Vec::new();
    clap_complete::generate(shell, &mut command, "af", &mut out);
    write_out(&out)
}

/// Print the manual page (roff) on stdout: `af man | man -l -`.
pub(super) fn man() -> Result<(), Refusal> {
    let mut out = Vec::new();
    clap_mangen::Man::new(Cli::command())
        .render(&mut out)
        .map_err(|e| unwritable(&e))?;
    write_out(&out)
}

/// `bytes` on stdout; a reader that stopped early (`af man | head`) is not a failure.
fn write_out(bytes: &[u8]) -> Result<(), Refusal> {
    let mut stdout = std::io::stdout().lock();
    match stdout.write_all(bytes).and_then(|()| stdout.flush()) {
        Err(e) if !output::reader_gone(&e) => Err(unwritable(&e)),
        _ => Ok(()),
    }
}

fn unwritable(e: &dyn std::fmt::Display) -> Refusal {
    Report::new(
        &codes::RUN_OUTPUT_FILE,
        format!("The output could not be written: {e}."),
    )
    .into()
}
