//! How results are printed: text for people, JSON for programs.

use std::fmt;
use std::io::{self, Write};

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

/// `println!` for a reader that may stop early: [`line`].
macro_rules! say {
    ($($arg:tt)*) => {
        $crate::output::line(format_args!($($arg)*))
    };
}
pub(crate) use say;

/// Print one line on stdout. A reader that stopped reading (`af net policy | head`) is not an
/// error: the line is dropped, where `println!` panics. Any other failure is said on stderr.
pub(crate) fn line(text: fmt::Arguments<'_>) {
    if let Err(error) = writeln!(io::stdout(), "{text}")
        && !reader_gone(&error)
    {
        eprintln!("af: the output could not be written: {error}");
    }
}

/// Whether a write failed only because stdout's reader has gone.
pub(crate) fn reader_gone(error: &io::Error) -> bool {
    error.kind() == io::ErrorKind::BrokenPipe
}

/// Print `value` as pretty JSON on stdout.
pub(crate) fn print_json<T: Serialize>(value: &T) {
    match serde_json::to_string_pretty(value) {
        Ok(text) => say!("{text}"),
        // Our own result types always serialize; say so loudly if one ever does not.
        Err(error) => eprintln!("af: could not render JSON output: {error}"),
    }
}
