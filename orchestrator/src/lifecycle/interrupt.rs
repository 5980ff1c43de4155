//! Ctrl-C during `af up`: the first asks it to stop between two steps (so everything it made is
//! finished and labelled, and `af down` finds it), the second ends af at once.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use crate::runtime::{Phase, Progress, ServiceUp};

/// Exit status after a second Ctrl-C: 128 + SIGINT, as a shell reports a process it interrupted.
const FORCED_EXIT: i32 = 130;

/// Whether a stop was asked for; cloned handles share one flag.
#[derive(Debug, Clone, Default)]
pub struct Interrupt {
    requested: Arc<AtomicBool>,
}

impl Interrupt {
    /// A flag nothing sets but [`Interrupt::request`].
    pub fn new() -> Self {
        Self::default()
    }

    /// A flag set by the first Ctrl-C (SIGINT) this process receives; the second exits at once
    /// with status 130. Needs a running tokio runtime.
    pub fn on_ctrl_c() -> Self {
        let interrupt = Self::new();
        let flag = interrupt.clone();
        tokio::spawn(async move {
            if tokio::signal::ctrl_c().await.is_err() {
                return;
            }
            flag.request();
            eprintln!("· stopping after the current step (Ctrl-C again to stop at once)");
            if tokio::signal::ctrl_c().await.is_ok() {
                std::process::exit(FORCED_EXIT);
            }
        });
        interrupt
    }

    /// Ask for a stop.
    pub fn request(&self) {
        self.requested.store(true, Ordering::SeqCst);
    }

    /// Whether a stop was asked for.
    pub fn requested(&self) -> bool {
        self.requested.load(Ordering::SeqCst)
    }
}

/// A [`Progress`] that reports to `inner` and stops when `interrupt` is set.
pub struct Stoppable<'a> {
    inner: &'a dyn Progress,
    interrupt: &'a Interrupt,
}

impl<'a> Stoppable<'a> {
    /// `inner`'s reporting, stopped by `interrupt`.
    pub fn new(inner: &'a dyn Progress, interrupt: &'a Interrupt) -> Self {
        Self { inner, interrupt }
    }
}

impl Progress for Stoppable<'_> {
    fn step(&self, line: &str) {
        self.inner.step(line);
    }

    fn phase(&self, subject: &str, phase: Phase<'_>) {
        self.inner.phase(subject, phase);
    }

    fn service(&self, up: &ServiceUp) {
        self.inner.service(up);
    }

    fn stop_requested(&self) -> bool {
        self.interrupt.requested() || self.inner.stop_requested()
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use super::*;
    use crate::runtime::{PhasesOnly, Quiet, RuntimeError};

    #[derive(Default)]
    struct Lines(Mutex<Vec<String>>);

    impl Progress for Lines {
        fn step(&self, line: &str) {
            self.0.lock().expect("lines").push(line.to_owned());
        }
        fn service(&self, _: &ServiceUp) {}
    }

    #[test]
    fn a_step_begins_until_a_stop_is_requested_then_none_does() {
        let lines = Lines::default();
        let interrupt = Interrupt::new();
        let progress = Stoppable::new(&lines, &interrupt);
        progress.begin("networks").expect("no stop yet");
        interrupt.clone().request();
        let err = progress.begin("starting sidecar").expect_err("stopped");
        assert!(
            matches!(&err, RuntimeError::Interrupted { at } if at == "before starting sidecar"),
            "{err:?}"
        );
        assert_eq!(
            *lines.0.lock().expect("lines"),
            ["networks"],
            "the step it stopped before was never reported as begun"
        );
        let report = err.report();
        assert_eq!(report.code.code, "AF-RUN-032");
        assert!(
            report.statement.contains("before starting sidecar"),
            "{report}"
        );
        assert!(report.next.contains("af down"), "{report}");
    }

    #[test]
    fn a_wait_stops_where_it_is_and_without_a_request_goes_on() {
        let interrupt = Interrupt::new();
        let progress = Stoppable::new(&Quiet, &interrupt);
        progress
            .check("while web was getting ready")
            .expect("nothing asked");
        interrupt.request();
        let err = progress
            .check("while web was getting ready")
            .expect_err("stopped");
        assert!(
            err.report()
                .statement
                .contains("stopped while web was getting ready"),
            "{}",
            err.report()
        );
    }

    #[test]
    fn a_removal_shown_through_phases_only_is_never_stopped_and_shows_no_step() {
        let lines = Lines::default();
        let interrupt = Interrupt::new();
        interrupt.request();
        let stoppable = Stoppable::new(&lines, &interrupt);
        let removal = PhasesOnly(&stoppable);
        removal
            .begin("removing namespace af-x")
            .expect("a removal goes on");
        // The control: the same progress, not wrapped, stops.
        assert!(stoppable.check("waiting for namespace af-x to go").is_err());
        assert!(lines.0.lock().expect("lines").is_empty(), "no step line");
    }
}
