//! How commands print: human lines on stdout (progress on stderr, live on a terminal), or one
//! JSON document.

use std::io::{IsTerminal, Stderr, Stdout, Write};
use std::sync::{Mutex, MutexGuard};

use serde::Serialize;

use super::live::LiveProgress;
use crate::runtime::{Progress, Quiet, Runtime, ServiceUp};

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

/// How `af up` shows what it is doing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Display {
    /// Nothing while it works: `-o json`, or `--quiet` (only the result is printed).
    Silent,
    /// One line per step, as a log or a pipe wants them.
    Lines,
    /// A live display with each service's latest state, for a terminal.
    Live,
}

impl Display {
    /// The display for `format` and `--quiet`, live only when stderr is a `terminal`.
    pub fn choose(format: Format, quiet: bool, terminal: bool) -> Self {
        match (format, quiet, terminal) {
            (Format::Json, _, _) | (Format::Human, true, _) => Self::Silent,
            (Format::Human, false, false) => Self::Lines,
            (Format::Human, false, true) => Self::Live,
        }
    }

    /// [`Display::choose`] for this process's stderr.
    pub fn for_this_process(format: Format, quiet: bool) -> Self {
        Self::choose(format, quiet, std::io::stderr().is_terminal())
    }

    /// Where the steps go.
    pub fn progress(self) -> Box<dyn Progress> {
        match self {
            Self::Silent => Box::new(Quiet),
            Self::Lines => Box::new(PlainProgress::new()),
            Self::Live => Box::new(LiveProgress::new()),
        }
    }
}

/// Progress as plain lines: steps on `err` (stderr), one ✓/✗ line per service on `out`
/// (stdout); phases are not shown.
pub struct PlainProgress<E = Stderr, O = Stdout> {
    streams: Mutex<(E, O)>,
}

impl PlainProgress {
    /// Lines on this process's stderr and stdout.
    pub fn new() -> Self {
        Self::to(std::io::stderr(), std::io::stdout())
    }
}

impl Default for PlainProgress {
    fn default() -> Self {
        Self::new()
    }
}

impl<E: Write, O: Write> PlainProgress<E, O> {
    /// Steps on `err`, service lines on `out`.
    pub fn to(err: E, out: O) -> Self {
        Self {
            streams: Mutex::new((err, out)),
        }
    }

    /// What was written to `err` and `out`.
    pub fn into_parts(self) -> (E, O) {
        self.streams.into_inner().unwrap_or_else(|e| e.into_inner())
    }

    fn streams(&self) -> MutexGuard<'_, (E, O)> {
        self.streams.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl<E: Write + Send, O: Write + Send> Progress for PlainProgress<E, O> {
    fn step(&self, line: &str) {
        let _ = writeln!(self.streams().0, "· {line}");
    }

    fn service(&self, up: &ServiceUp) {
        let _ = writeln!(self.streams().1, "{}", service_line(up));
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

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::plan::Kind;
    use crate::runtime::{Action, Phase};

    #[test]
    fn plain_lines_are_the_steps_and_service_lines_and_never_a_phase() {
        let plain = PlainProgress::to(Vec::new(), Vec::new());
        plain.step("networks");
        plain.step("building web");
        plain.phase(
            "web",
            Phase::Building {
                line: "Step 1/3 : FROM scratch",
            },
        );
        plain.step("starting web");
        plain.phase("web", Phase::Starting);
        plain.phase(
            "web",
            Phase::Waiting {
                elapsed: Duration::from_secs(1),
                timeout: Duration::from_secs(60),
            },
        );
        for (name, kind, ready, url) in [
            ("web", Kind::Web, true, Some("http://127.0.0.1:49153/")),
            ("worker", Kind::Worker, false, None),
        ] {
            plain.service(&ServiceUp {
                name: name.to_owned(),
                kind,
                ready,
                url: url.map(str::to_owned),
                action: Action::Created,
            });
        }
        let (err, out) = plain.into_parts();
        assert_eq!(
            String::from_utf8(err).expect("utf-8"),
            "· networks\n· building web\n· starting web\n"
        );
        assert_eq!(
            String::from_utf8(out).expect("utf-8"),
            "✓ web              http://127.0.0.1:49153/\n✗ worker\n"
        );
    }

    #[test]
    fn json_and_quiet_show_no_progress_and_only_a_terminal_gets_the_live_display() {
        for terminal in [false, true] {
            assert_eq!(
                Display::choose(Format::Json, false, terminal),
                Display::Silent
            );
            assert_eq!(
                Display::choose(Format::Json, true, terminal),
                Display::Silent
            );
            assert_eq!(
                Display::choose(Format::Human, true, terminal),
                Display::Silent
            );
        }
        assert_eq!(Display::choose(Format::Human, false, false), Display::Lines);
        assert_eq!(Display::choose(Format::Human, false, true), Display::Live);
    }
}
