//! The live display of `af up` on a terminal: steps and ✓/✗ lines as plain lines, and under them
//! one status line, redrawn in place (`\r` and erase-line), with a spinner and where the latest
//! service is: its build's latest line, starting, removing, or what is waited for with the elapsed
//! time and its timeout.

use std::io::{Stderr, Stdout, Write};
use std::sync::Mutex;

use super::output::service_line;
use crate::runtime::{Phase, Progress, ServiceUp};

/// The spinner's frames; one per redraw, so it turns as events arrive.
const SPINNER: [char; 10] = ['⠋', '⠙', '⠹', '⠸', '⠼', '⠴', '⠦', '⠧', '⠇', '⠏'];
/// The status line's length at most, in characters, so it fits one terminal row.
const WIDTH: usize = 100;
/// Back to the start of the line and erase it.
const ERASE: &str = "\r\x1b[K";

/// Live progress: the display on `err` (stderr), one ✓/✗ line per service on `out` (stdout);
/// dropped, it erases its status line.
pub struct LiveProgress<E: Write, O: Write> {
    screen: Mutex<Screen<E, O>>,
}

struct Screen<E: Write, O: Write> {
    err: E,
    out: O,
    /// Whether a status line is shown and must be erased before the next plain line.
    status: bool,
    frame: usize,
}

impl LiveProgress<Stderr, Stdout> {
    /// The display on this process's terminal.
    pub fn new() -> Self {
        Self::to(std::io::stderr(), std::io::stdout())
    }
}

impl Default for LiveProgress<Stderr, Stdout> {
    fn default() -> Self {
        Self::new()
    }
}

impl<E: Write, O: Write> LiveProgress<E, O> {
    /// The display on `err`, the service lines on `out`.
    pub fn to(err: E, out: O) -> Self {
        Self {
            screen: Mutex::new(Screen {
                err,
                out,
                status: false,
                frame: 0,
            }),
        }
    }

    fn with(&self, draw: impl FnOnce(&mut Screen<E, O>) -> std::io::Result<()>) {
        let mut screen = self.screen.lock().unwrap_or_else(|e| e.into_inner());
        // A display that cannot be written to must not stop `up`.
        let _ = draw(&mut screen);
    }
}

/// The status line is erased when the display ends, so what follows (the result, a refusal)
/// starts on a clean line.
impl<E: Write, O: Write> Drop for LiveProgress<E, O> {
    fn drop(&mut self) {
        self.with(Screen::erase);
    }
}

impl<E: Write, O: Write> Screen<E, O> {
    fn erase(&mut self) -> std::io::Result<()> {
        if self.status {
            write!(self.err, "{ERASE}")?;
            self.err.flush()?;
            self.status = false;
        }
        Ok(())
    }
}

/// The status line's text, cut to [`WIDTH`] characters.
fn status_line(frame: usize, subject: &str, phase: Phase<'_>) -> String {
    let spinner = SPINNER[frame % SPINNER.len()];
    let text = match phase {
        Phase::Building { line } => format!("{subject}: building: {line}"),
        Phase::Starting => format!("{subject}: starting"),
        Phase::Waiting { elapsed, timeout } => format!(
            "waiting for {subject}: {}s of {}s",
            elapsed.as_secs(),
            timeout.as_secs()
        ),
        Phase::Removing => format!("{subject}: removing"),
    };
    format!("{spinner} {text}").chars().take(WIDTH).collect()
}

impl<E: Write + Send, O: Write + Send> Progress for LiveProgress<E, O> {
    fn step(&self, line: &str) {
        self.with(|s| {
            s.erase()?;
            writeln!(s.err, "· {line}")
        });
    }

    fn phase(&self, subject: &str, phase: Phase<'_>) {
        self.with(|s| {
            let text = status_line(s.frame, subject, phase);
            s.frame = s.frame.wrapping_add(1);
            write!(s.err, "{ERASE}{text}")?;
            s.status = true;
            s.err.flush()
        });
    }

    fn service(&self, up: &ServiceUp) {
        self.with(|s| {
            s.erase()?;
            writeln!(s.out, "{}", service_line(up))?;
            s.out.flush()
        });
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::plan::Kind;
    use crate::runtime::{Action, PhasesOnly};

    fn web(ready: bool) -> ServiceUp {
        ServiceUp {
            name: "web".to_owned(),
            kind: Kind::Web,
            ready,
            url: Some("http://127.0.0.1:49153/".to_owned()),
            action: Action::Created,
        }
    }

    /// What `show` draws on a live display, on its stderr and its stdout, once it is dropped.
    fn shown(show: impl FnOnce(&LiveProgress<&mut Vec<u8>, &mut Vec<u8>>)) -> (String, String) {
        let (mut err, mut out) = (Vec::new(), Vec::new());
        show(&LiveProgress::to(&mut err, &mut out));
        (
            String::from_utf8(err).expect("utf-8"),
            String::from_utf8(out).expect("utf-8"),
        )
    }

    #[test]
    fn each_phase_redraws_one_status_line_that_a_step_or_a_ready_service_erases() {
        let (err, out) = shown(|live| {
            live.step("building web");
            for line in ["Step 1/3 : FROM scratch", "Step 2/3 : COPY app /"] {
                live.phase("web", Phase::Building { line });
            }
            live.step("starting web");
            live.phase("web", Phase::Starting);
            live.phase(
                "web to be ready",
                Phase::Waiting {
                    elapsed: Duration::from_secs(3),
                    timeout: Duration::from_secs(60),
                },
            );
            live.service(&web(true));
        });
        assert_eq!(
            err,
            [
                "· building web\n",
                "\r\x1b[K⠋ web: building: Step 1/3 : FROM scratch",
                "\r\x1b[K⠙ web: building: Step 2/3 : COPY app /",
                "\r\x1b[K· starting web\n",
                "\r\x1b[K⠹ web: starting",
                "\r\x1b[K⠸ waiting for web to be ready: 3s of 60s",
                "\r\x1b[K",
            ]
            .concat()
        );
        assert_eq!(out, "✓ web              http://127.0.0.1:49153/\n");
    }

    #[test]
    fn a_long_build_line_is_cut_to_one_row_and_a_failed_service_gets_a_cross() {
        let long = "é".repeat(3 * WIDTH);
        let (err, out) = shown(|live| {
            live.phase("web", Phase::Building { line: &long });
            live.service(&web(false));
        });
        let status = err
            .strip_prefix(ERASE)
            .and_then(|s| s.strip_suffix(ERASE))
            .expect("one status line, then erased");
        assert_eq!(status.chars().count(), WIDTH, "{status}");
        assert!(status.starts_with("⠋ web: building: éé"), "{status}");
        assert_eq!(out, "✗ web              http://127.0.0.1:49153/\n");
    }

    #[test]
    fn what_is_removed_is_shown_and_erased_when_the_display_ends() {
        let (err, out) = shown(|live| {
            live.phase("container af-0123-old", Phase::Removing);
            live.phase("network af-0123-internal", Phase::Removing);
        });
        assert_eq!(
            err,
            [
                "\r\x1b[K⠋ container af-0123-old: removing",
                "\r\x1b[K⠙ network af-0123-internal: removing",
                "\r\x1b[K",
            ]
            .concat()
        );
        assert!(out.is_empty(), "{out}");
    }

    #[test]
    fn a_display_that_showed_no_phase_writes_nothing_when_it_ends() {
        let (err, out) = shown(|live| live.step("networks"));
        assert_eq!(err, "· networks\n");
        assert!(out.is_empty(), "{out}");
    }

    #[test]
    fn through_phases_only_a_removal_is_shown_and_its_step_is_not() {
        let (err, _) = shown(|live| {
            let removal = PhasesOnly(live);
            removal.step("removing namespace af-x");
            removal.phase("namespace af-x", Phase::Removing);
        });
        assert_eq!(err, "\r\x1b[K⠋ namespace af-x: removing\r\x1b[K");
    }
}
