//! Staged waits: each stage polls until its condition holds or its own timeout passes, and
//! says what it is waiting on when that changes (and, to a live display, for how long).

use std::future::Future;
use std::time::Duration;

use tokio::time::Instant;

use crate::runtime::{Phase, Progress, RuntimeError};

/// What one poll found.
pub enum Poll<T> {
    /// Done, with the result.
    Ready(T),
    /// Not yet; the state, shown when it changes.
    Pending(String),
}

/// Poll `check` every `interval` until it is ready, or give up after `timeout` with the last
/// state it reported (`Err(last state)`).
pub async fn until<T, F, Fut>(
    stage: &str,
    timeout: Duration,
    interval: Duration,
    progress: &dyn Progress,
    mut check: F,
) -> Result<Result<T, String>, RuntimeError>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<Poll<T>, RuntimeError>>,
{
    let started = Instant::now();
    let deadline = started + timeout;
    let mut shown = String::new();
    loop {
        match check().await? {
            Poll::Ready(value) => return Ok(Ok(value)),
            Poll::Pending(state) => {
                progress.check(&format!("waiting for {stage}"))?;
                if Instant::now() >= deadline {
                    return Ok(Err(state));
                }
                progress.phase(
                    stage,
                    Phase::Waiting {
                        elapsed: started.elapsed(),
                        timeout,
                    },
                );
                if state != shown {
                    progress.step(&format!("waiting for {stage}: {state}"));
                    shown = state;
                }
            }
        }
        tokio::time::sleep(interval).await;
    }
}
