//! How commands print: human lines on stdout (progress on stderr), or one JSON document.

use std::io::{IsTerminal, Write};
use std::sync::Mutex;

use serde::Serialize;

use crate::runtime::{Progress, Runtime, ServiceUp};

/// `-o human` (default) or `-o json`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Format {
    /// Lines for a person.
    #[default]
    Human,
    /// One JSON document.
    Json,
}

/// Say on stderr where the runtime works, when it has more to say than its name (a cluster's
/// context and API server): `af up` and `af down` always say it, whatever the format.
pub fn announce(runtime: &dyn Runtime) {
    if let Some(location) = runtime.location() {
        eprintln!("runtime {}: {location}", runtime.name());
    }
}

/// Print a document as pretty JSON with a newline.
pub fn print_json(out: &mut dyn Write, doc: &impl Serialize) {
    let text = serde_json::to_string_pretty(doc).unwrap_or_else(|_| "{}".to_owned());
    let _ = writeln!(out, "{text}");
}

/// Progress for a person: steps on stderr, build output on one overwritten line when stderr is
/// a terminal, one ✓ line per ready service on stdout.
pub struct HumanProgress {
    tty: bool,
    last_width: Mutex<usize>,
}

impl HumanProgress {
    /// Progress on this process's stdout and stderr.
    pub fn new() -> Self {
        Self {
            tty: std::io::stderr().is_terminal(),
            last_width: Mutex::new(0),
        }
    }

    fn clear(&self) {
        if let Ok(mut w) = self.last_width.lock()
            && *w > 0
        {
            eprint!("\r{}\r", " ".repeat(*w));
            *w = 0;
        }
    }
}

impl Default for HumanProgress {
    fn default() -> Self {
        Self::new()
    }
}

impl Progress for HumanProgress {
    fn step(&self, line: &str) {
        self.clear();
        eprintln!("· {line}");
    }

    fn build_output(&self, service: &str, line: &str) {
        if !self.tty {
            return;
        }
        let mut text = format!("  {service}: {line}");
        text.truncate(100);
        self.clear();
        eprint!("{text}");
        if let Ok(mut w) = self.last_width.lock() {
            *w = text.chars().count();
        }
    }

    fn service(&self, up: &ServiceUp) {
        self.clear();
        println!("{}", service_line(up));
    }
}

/// `✓ web  http://127.0.0.1:49153/`
pub fn service_line(up: &ServiceUp) -> String {
    let mark = if up.ready { "✓" } else { "✗" };
    match &up.url {
        Some(url) => format!("{mark} {:<16} {url}", up.name),
        None => format!("{mark} {}", up.name),
    }
}
