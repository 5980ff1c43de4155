//! `af up` of the demo, in a directory of its own with a sidecar binary of its own (so the
//! sidecar and service images it builds in the warm-up are this run's, kept by `af down` for
//! the measured ups, as Compose keeps its own, and removed at the end).

use std::sync::Mutex;

use bollard::Docker;

use crate::error::{BenchError, Result};
use crate::soak::docker_proxy::connect_daemon;
use crate::soak::lifecycle::{
    Af, Finished, RunDir, Setup, labelled, last_lines, remove_built_images,
};

/// The stack's name in the table.
pub(super) const NAME: &str = "af";

/// The demo under `af`.
pub(crate) struct AfDemo {
    setup: Setup,
    run: RunDir,
    env: String,
    docker: Docker,
    /// Every step `af up` printed: each image it built is named in one.
    steps: Mutex<Vec<String>>,
}

impl AfDemo {
    pub(super) fn new(setup: Setup) -> Result<Self> {
        Ok(Self {
            run: RunDir::new(&setup)?,
            setup,
            env: format!("bench-afup-{:06x}", fastrand::u32(..0xff_ffff)),
            docker: connect_daemon()?,
            steps: Mutex::new(Vec::new()),
        })
    }

    fn af(&self) -> Af<'_> {
        Af {
            setup: &self.setup,
            run: &self.run,
            env: self.env.clone(),
            docker_host: None,
        }
    }

    pub(super) async fn up(&self) -> Result<()> {
        let Finished {
            status,
            steps,
            tail,
        } = self.af().up().await?;
        if let Ok(mut seen) = self.steps.lock() {
            seen.extend(steps);
        }
        if status.success() {
            Ok(())
        } else {
            Err(BenchError::Protocol(format!(
                "af up failed ({status}): {}",
                last_lines(&tail)
            )))
        }
    }

    pub(super) async fn down(&self) -> Result<()> {
        match self.af().down().await? {
            Some(0) => Ok(()),
            exit => Err(BenchError::Protocol(format!("af down failed ({exit:?})"))),
        }
    }

    pub(super) async fn clear(&self) -> Result<()> {
        let down = self.down().await;
        let steps = self.steps.lock().map(|s| s.clone()).unwrap_or_default();
        remove_built_images(&self.docker, &steps).await;
        let left = labelled(&self.docker, &self.env).await?;
        down?;
        super::nothing_left("af down", &left)
    }
}
