//! How results are printed: text for people, JSON for programs.

use clap::ValueEnum;
use serde::Serialize;

/// The output format chosen with `-o`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum Format {
    /// Lines for people.
    Text,
    /// One JSON document on stdout.
    Json,
}

/// Print `value` as pretty JSON on stdout.
pub(crate) fn print_json<T: Serialize>(value: &T) {
    match serde_json::to_string_pretty(value) {
        Ok(text) => println!("{text}"),
        // Our own result types always serialize; say so loudly if one ever does not.
        Err(error) => eprintln!("af: could not render JSON output: {error}"),
    }
}
