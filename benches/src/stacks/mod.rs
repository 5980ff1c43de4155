//! The `af-up` scenario's entrants: stacks of containers brought up and taken down again, not
//! processes on loopback. `af` is `af up` of the demo; `docker-compose` brings up the same
//! services from a compose file the harness writes (benches/README.md, "af up against Compose").

mod af;
mod compose;

use std::time::Instant;

use crate::error::{BenchError, Result};
use crate::load::LoadResult;
use crate::scenarios::{Measurement, Scenario};
use crate::soak::lifecycle::Setup;

/// One way to bring the demo's services up.
pub(crate) enum Stack {
    /// `af up` / `af down` of the demo.
    Af(af::AfDemo),
    /// `docker-compose up -d`, readiness polled, `docker-compose down -v`.
    Compose(compose::Compose),
}

/// Both stacks, their files written; nothing is started yet.
pub(crate) fn both(setup: Setup) -> Result<Vec<Stack>> {
    let compose = compose::Compose::new(&setup)?;
    Ok(vec![
        Stack::Af(af::AfDemo::new(setup)?),
        Stack::Compose(compose),
    ])
}

impl Stack {
    /// Name shown in the table.
    pub(crate) fn name(&self) -> &'static str {
        match self {
            Stack::Af(_) => af::NAME,
            Stack::Compose(_) => compose::NAME,
        }
    }

    /// Why it cannot run on this machine, if so.
    pub(crate) fn missing(&self) -> Option<String> {
        match self {
            Stack::Af(_) => None,
            Stack::Compose(_) => crate::systems::missing_program(compose::PROGRAM),
        }
    }

    /// Up, and every service ready.
    async fn up(&self) -> Result<()> {
        match self {
            Stack::Af(s) => s.up().await,
            Stack::Compose(s) => s.up().await,
        }
    }

    /// Down: its containers, networks and volumes gone; its images kept for the next up.
    async fn down(&self) -> Result<()> {
        match self {
            Stack::Af(s) => s.down().await,
            Stack::Compose(s) => s.down().await,
        }
    }

    /// Down, its images removed too, and nothing of it left on the daemon (else an error
    /// naming what is).
    pub(crate) async fn clear(&self) -> Result<()> {
        match self {
            Stack::Af(s) => s.clear().await,
            Stack::Compose(s) => s.clear().await,
        }
    }

    /// Up, timed, then down whether or not up succeeded.
    async fn cycle(&self) -> Result<f64> {
        let started = Instant::now();
        let up = self.up().await;
        let secs = started.elapsed().as_secs_f64();
        let down = self.down().await;
        up?;
        down?;
        Ok(secs)
    }
}

/// An error naming what `down` `left` on the daemon, if anything.
fn nothing_left(down: &str, left: &[String]) -> Result<()> {
    if left.is_empty() {
        Ok(())
    } else {
        Err(BenchError::Protocol(format!(
            "{down} left {}",
            left.join(", ")
        )))
    }
}

/// One timed up of `stack`. Round 0 first brings it up and down once untimed, so every image
/// is built and every measured up starts from what a down leaves.
pub(crate) fn measure(
    stack: &Stack,
    round: u32,
    rt: &tokio::runtime::Runtime,
) -> Result<Measurement> {
    let secs = rt.block_on(async {
        if round == 0 {
            stack.cycle().await?;
        }
        stack.cycle().await
    })?;
    Ok(Measurement {
        system: stack.name().to_owned(),
        scenario: Scenario::AfUp,
        round,
        value: secs,
        unit: Scenario::AfUp.unit(),
        load: LoadResult {
            ops: 1,
            secs,
            ..LoadResult::default()
        },
        cpu_secs: None,
        cpu_per_unit: None,
        peak_rss_kib: None,
        allocs_per_op: None,
        heap_kib_per_op: None,
        instructions_per_op: None,
    })
}
