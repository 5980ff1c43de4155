//! Readiness: a service with no `health_path` is ready when its port accepts; with one, when
//! the path gives any HTTP answer (Kubernetes would also want a 2xx/3xx: the one documented
//! difference). The check runs inside the sidecar, which is on the internal network, with the
//! forwarder binary's `check` mode, so it needs nothing in the service's image.

use std::time::{Duration, Instant};

use bollard::Docker;

use super::containers;
use super::labels::Names;
use crate::plan::ServicePlan;
use crate::runtime::images::FORWARD_BINARY;
use crate::runtime::{ExecIo, Phase, Progress, RuntimeError};

/// The first wait between two checks; each wait doubles it, up to [`LONGEST_WAIT`].
const FIRST_WAIT: Duration = Duration::from_millis(10);
/// The longest wait between two checks.
const LONGEST_WAIT: Duration = Duration::from_millis(250);
/// Log lines shown when a service does not come up.
const TAIL: usize = 20;

/// Wait until `service` (at `addr` on the internal network) is ready, or say why not.
pub async fn wait(
    docker: &Docker,
    names: &Names,
    service: &ServicePlan,
    addr: &str,
    progress: &dyn Progress,
) -> Result<(), RuntimeError> {
    let container = names.service(&service.name);
    let started = Instant::now();
    let deadline = started + service.health_timeout;
    let mut argv = vec![format!("/{FORWARD_BINARY}"), "check".to_owned()];
    match service.port {
        Some(port) => argv.push(format!("{addr}:{port}")),
        None => argv.push(String::new()),
    }
    if let Some(path) = &service.health_path {
        argv.push(path.clone());
    }
    let at = format!("while {} was getting ready", service.name);
    let waited = format!("{} to be ready", service.name);
    let mut waits = Waits::default();
    loop {
        progress.check(&at)?;
        progress.phase(
            &waited,
            Phase::Waiting {
                elapsed: started.elapsed(),
                timeout: service.health_timeout,
            },
        );
        let Some(found) = containers::find(docker, names, &container).await? else {
            return Err(RuntimeError::Exited {
                service: service.name.clone(),
                status: -1,
                tail: Vec::new(),
            });
        };
        if let Some(status) = found.exit_code() {
            return Err(RuntimeError::Exited {
                service: service.name.clone(),
                status,
                tail: containers::tail(docker, &container, TAIL).await,
            });
        }
        let ready = match service.port {
            // No port: running is all that can be asked.
            None => found.running(),
            Some(_) => {
                let (mut out, mut err) = (Vec::new(), Vec::new());
                let io = ExecIo::collect(&mut out, &mut err);
                containers::exec(docker, &names.sidecar(), &argv, io)
                    .await
                    .is_ok_and(|exit| exit == Some(0))
            }
        };
        if ready {
            return Ok(());
        }
        if Instant::now() >= deadline {
            return Err(RuntimeError::NotReady {
                service: service.name.clone(),
                seconds: service.health_timeout.as_secs(),
                tail: containers::tail(docker, &container, TAIL).await,
            });
        }
        waits.sleep().await;
    }
}

/// The waits between two checks of something that is starting: short at first, when it most
/// likely has just become ready, then longer, so a slow start is not asked about too often.
#[derive(Debug)]
pub struct Waits {
    next: Duration,
}

impl Default for Waits {
    fn default() -> Self {
        Self { next: FIRST_WAIT }
    }
}

impl Waits {
    /// Sleep for the next wait.
    pub async fn sleep(&mut self) {
        tokio::time::sleep(self.take()).await;
    }

    fn take(&mut self) -> Duration {
        let wait = self.next;
        self.next = (wait * 2).min(LONGEST_WAIT);
        wait
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn waits_start_short_double_and_stop_growing_at_the_longest() {
        let mut waits = Waits::default();
        let ms: Vec<u128> = (0..8).map(|_| waits.take().as_millis()).collect();
        assert_eq!(ms, [10, 20, 40, 80, 160, 250, 250, 250]);
    }
}
