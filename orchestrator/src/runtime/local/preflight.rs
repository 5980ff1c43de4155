//! What the local runtime cannot run, refused before anything is made (AF-RUN-044): more than
//! one copy of a service (its names, readiness, forwarder, logs and exec are of one container),
//! and limits the Docker daemon would refuse only once the environment is half made.

use bollard::Docker;

use crate::plan::EnvPlan;
use crate::runtime::RuntimeError;

/// The smallest memory limit the Docker daemon accepts (6 MiB).
pub const MIN_MEMORY_BYTES: u64 = 6 << 20;

/// Refuse `plan` if the local runtime cannot run it as the manifest says; `host_cpus` is the
/// number of CPUs the daemon has (`None`: not asked, since no service limits CPU).
pub fn check(plan: &EnvPlan, host_cpus: Option<u64>) -> Result<(), RuntimeError> {
    for s in &plan.services {
        let name = &s.name;
        if s.replicas > 1 {
            return Err(RuntimeError::CannotRun {
                statement: format!(
                    "Service {name} asks for {} replicas, and the local runtime runs one container per service; nothing was made.",
                    s.replicas
                ),
                next: "Set replicas to 1 for the local runtime, or place the environment on a cluster.".to_owned(),
            });
        }
        if let Some(bytes) = s.resources.memory_bytes.filter(|b| *b < MIN_MEMORY_BYTES) {
            return Err(RuntimeError::CannotRun {
                statement: format!(
                    "The memory limit of service {name}, {bytes} bytes, is below the 6Mi Docker accepts; nothing was made."
                ),
                next: format!("Raise the memory limit of {name} to at least 6Mi."),
            });
        }
        if let (Some(millicores), Some(cpus)) = (s.resources.cpu_millicores, host_cpus)
            && millicores > cpus.saturating_mul(1000)
        {
            return Err(RuntimeError::CannotRun {
                statement: format!(
                    "Service {name} is limited to {millicores}m of CPU, and this machine's Docker daemon has {cpus} CPUs, which it cannot exceed; nothing was made."
                ),
                next: format!(
                    "Lower the cpu limit of {name} to at most {cpus}, or place the environment on a cluster."
                ),
            });
        }
    }
    Ok(())
}

/// The daemon's CPU count, asked only when a service of `plan` limits CPU.
pub async fn host_cpus(docker: &Docker, plan: &EnvPlan) -> Result<Option<u64>, RuntimeError> {
    if plan
        .services
        .iter()
        .all(|s| s.resources.cpu_millicores.is_none())
    {
        return Ok(None);
    }
    let info = docker
        .info()
        .await
        .map_err(|e| RuntimeError::engine("read the daemon's CPU count", e))?;
    Ok(info.ncpu.and_then(|n| u64::try_from(n).ok()))
}

#[cfg(test)]
mod tests {
    use af_policy::egress::EgressSpec;

    use super::*;
    use crate::env_id::EnvId;
    use crate::plan::{Kind, ServicePlan};

    fn plan(web: ServicePlan) -> EnvPlan {
        let db = ServicePlan::new("db", Kind::Worker, "/src/db");
        let env = EnvId::parse("t").expect("id");
        EnvPlan::new(env, "p", vec![db, web], EgressSpec::default()).expect("plan")
    }

    fn web() -> ServicePlan {
        ServicePlan::new("web", Kind::Web, "/src/web")
    }

    #[test]
    fn one_copy_within_the_machine_runs() {
        let mut limited = web();
        limited.resources.cpu_millicores = Some(2000);
        limited.resources.memory_bytes = Some(MIN_MEMORY_BYTES);
        assert!(check(&plan(limited), Some(2)).is_ok());
        assert!(check(&plan(web()), None).is_ok());
    }

    #[test]
    fn more_than_one_replica_is_refused_with_044_and_what_would_run() {
        let mut scaled = web();
        scaled.replicas = 3;
        let report = check(&plan(scaled), None).expect_err("refused").report();
        assert_eq!(report.code.code, "AF-RUN-044");
        assert!(
            report.statement.contains("web asks for 3 replicas"),
            "{report}"
        );
        assert!(report.statement.contains("nothing was made"), "{report}");
        assert_eq!(
            report.next,
            "Set replicas to 1 for the local runtime, or place the environment on a cluster."
        );
    }

    #[test]
    fn limits_docker_would_refuse_midway_are_refused_first() {
        let mut tiny = web();
        tiny.resources.memory_bytes = Some(MIN_MEMORY_BYTES - 1);
        let report = check(&plan(tiny), None).expect_err("refused").report();
        assert_eq!(report.code.code, "AF-RUN-044");
        assert!(report.next.contains("at least 6Mi"), "{report}");
        let mut greedy = web();
        greedy.resources.cpu_millicores = Some(2001);
        let report = check(&plan(greedy), Some(2)).expect_err("refused").report();
        assert_eq!(report.code.code, "AF-RUN-044");
        assert!(report.statement.contains("2001m"), "{report}");
        assert!(report.next.contains("at most 2"), "{report}");
    }
}
