//! A service's migration on a cluster: a Job named as the service, in its image, running its
//! `migrate` command in exactly the service's pod (the same confinement, environment, CA
//! files and gate: [`services::pod_template`]), which must complete before the service's
//! Deployment is made. It is never retried: `backoffLimit: 0`, `restartPolicy: Never`, and
//! `activeDeadlineSeconds` bounds it (`AF_KUBE_MIGRATION_TIMEOUT`).
//!
//! A Job's pod template cannot be changed, so a Job is never replaced in place: the one there
//! is reused when its digest is the rendering's and it completed (the migration is not run
//! again), waited on when it has that digest and is still running (an earlier `af up` was
//! stopped), and otherwise (another migration, or one that failed) deleted, its pods in the
//! background, and made again once it is gone.

use std::time::Duration;

use k8s_openapi::api::batch::v1::{Job, JobSpec};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DeleteParams, ListParams, LogParams, PostParams};
use kube::{Client, ResourceExt};

use super::objects::{digest, stamp};
use super::pods;
use super::services::{self, Role, Spec};
use crate::runtime::kubernetes::Timeouts;
use crate::runtime::kubernetes::cluster::refused;
use crate::runtime::kubernetes::names::Names;
use crate::runtime::kubernetes::wait::{self, Poll};
use crate::runtime::{Action, Progress, RuntimeError};

/// The log lines of a failed migration's pod put in its error.
const TAIL_LINES: i64 = 20;
/// What af waits beyond the Job's own deadline, so the Job's own account of it is read.
const GRACE: Duration = Duration::from_secs(30);

/// The migration Job of `spec`'s service, allowed `deadline` from its start.
pub fn job(names: &Names, spec: &Spec<'_>, deadline: Duration) -> Job {
    stamp(Job {
        metadata: services::object_meta(names, &spec.service.name, Role::Migrate),
        spec: Some(JobSpec {
            backoff_limit: Some(0),
            active_deadline_seconds: Some(i64::try_from(deadline.as_secs()).unwrap_or(i64::MAX)),
            template: services::pod_template(names, spec, Role::Migrate),
            ..JobSpec::default()
        }),
        status: None,
    })
}

/// How a Job stands.
#[derive(Debug, PartialEq, Eq)]
enum Outcome {
    /// Still running (or not started).
    Running,
    /// Its condition `Complete`.
    Complete,
    /// Its condition `Failed`, with the reason and message the controller gave.
    Failed(String),
}

fn outcome(job: &Job) -> Outcome {
    let conditions = job.status.as_ref().and_then(|s| s.conditions.as_ref());
    let holds = |kind: &str| {
        conditions
            .into_iter()
            .flatten()
            .find(|c| c.type_ == kind && c.status == "True")
    };
    if holds("Complete").is_some() {
        Outcome::Complete
    } else if let Some(failed) = holds("Failed") {
        let reason = failed.reason.clone().unwrap_or_else(|| "Failed".to_owned());
        Outcome::Failed(match &failed.message {
            Some(message) => format!("{reason}: {message}"),
            None => reason,
        })
    } else {
        Outcome::Running
    }
}

/// Run the migration `wanted` of `service` to completion, or reuse the one that completed;
/// a failure is [`RuntimeError::Migration`] with its pod's last lines, a gate that gave up
/// [`RuntimeError::Ungoverned`].
pub async fn migrate(
    client: &Client,
    names: &Names,
    service: &str,
    wanted: Job,
    timeouts: &Timeouts,
    progress: &dyn Progress,
) -> Result<Action, RuntimeError> {
    let namespace = names.namespace();
    let api: Api<Job> = Api::namespaced(client.clone(), namespace);
    let name = wanted.name_any();
    let what = format!("Job {name} in {namespace}");
    let found = api
        .get_opt(&name)
        .await
        .map_err(refused(format!("read {what}")))?;
    let same = |j: &Job| digest(j).is_some() && digest(j) == digest(&wanted);
    let (job, action) = match found {
        Some(j) if same(&j) && outcome(&j) == Outcome::Complete => {
            progress.step(&format!(
                "migration of {service}: completed before and unchanged, not run again"
            ));
            return Ok(Action::Reused);
        }
        Some(j) if same(&j) && outcome(&j) == Outcome::Running => (j, Action::Reused),
        Some(_) => {
            progress.begin(&format!("replacing the migration of {service}"))?;
            api.delete(&name, &DeleteParams::background())
                .await
                .map_err(refused(format!("delete {what}")))?;
            gone(&api, &name, timeouts, progress).await?;
            (create(&api, &what, &wanted).await?, Action::Replaced)
        }
        None => (create(&api, &what, &wanted).await?, Action::Created),
    };
    progress.begin(&format!("migrating {service}"))?;
    wait_done(client, names, service, &job, timeouts, progress).await?;
    Ok(action)
}

async fn create(api: &Api<Job>, what: &str, wanted: &Job) -> Result<Job, RuntimeError> {
    api.create(&PostParams::default(), wanted)
        .await
        .map_err(refused(format!("create {what}")))
}

/// Wait until the old Job of that name is gone (its name is free again).
async fn gone(
    api: &Api<Job>,
    name: &str,
    timeouts: &Timeouts,
    progress: &dyn Progress,
) -> Result<(), RuntimeError> {
    let stage = format!("the old Job {name} to be gone");
    let outcome = wait::until(
        &stage,
        timeouts.service,
        timeouts.poll,
        progress,
        || async {
            let found = api
                .get_opt(name)
                .await
                .map_err(refused(format!("read Job {name}")))?;
            Ok(match found {
                None => Poll::Ready(()),
                Some(_) => Poll::Pending("deleting".to_owned()),
            })
        },
    )
    .await?;
    outcome.map_err(|state| RuntimeError::Timeout {
        what: stage,
        seconds: timeouts.service.as_secs(),
        state,
        knob: "AF_KUBE_SERVICE_TIMEOUT",
    })
}

/// Wait until `job` completed; read its pods for why when it did not.
async fn wait_done(
    client: &Client,
    names: &Names,
    service: &str,
    job: &Job,
    timeouts: &Timeouts,
    progress: &dyn Progress,
) -> Result<(), RuntimeError> {
    let namespace = names.namespace();
    let jobs: Api<Job> = Api::namespaced(client.clone(), namespace);
    let pod_api: Api<Pod> = Api::namespaced(client.clone(), namespace);
    let name = job.name_any();
    // The pods of this Job, never of the one it replaced: the selector the API server gave it.
    let selector = job
        .spec
        .as_ref()
        .and_then(|s| s.selector.as_ref())
        .and_then(|s| s.match_labels.as_ref())
        .map(|labels| {
            labels
                .iter()
                .map(|(k, v)| format!("{k}={v}"))
                .collect::<Vec<_>>()
                .join(",")
        })
        .unwrap_or_else(|| format!("job-name={name}"));
    let timeout = timeouts.migration + GRACE;
    let stage = format!("the migration of {service}");
    let outcome = wait::until(&stage, timeout, timeouts.poll, progress, || async {
        let found = jobs
            .get_opt(&name)
            .await
            .map_err(refused(format!("read Job {name} in {namespace}")))?;
        let listed = pod_api
            .list(&ListParams::default().labels(&selector))
            .await
            .map_err(refused(format!("list the pods of Job {name}")))?
            .items;
        pods::refuse_stuck(&pod_api, &listed, service, namespace).await?;
        match found.as_ref().map(outcome) {
            Some(Outcome::Complete) => Ok(Poll::Ready(())),
            Some(Outcome::Failed(why)) => Err(failed(&pod_api, service, &listed, why).await),
            Some(Outcome::Running) => Ok(Poll::Pending(pods::pod_states(&listed))),
            None => Err(RuntimeError::Api {
                context: format!("wait for Job {name} in {namespace}"),
                message: "it was deleted while it ran".to_owned(),
            }),
        }
    })
    .await?;
    outcome.map_err(|state| RuntimeError::Timeout {
        what: format!("the migration of {service} in {namespace} to finish"),
        seconds: timeout.as_secs(),
        state,
        knob: "AF_KUBE_MIGRATION_TIMEOUT",
    })
}

/// The migration's failure: its container's exit status and last lines (`-1` and the Job's
/// own account when no container ended, e.g. its deadline passed first).
async fn failed(api: &Api<Pod>, service: &str, pods: &[Pod], why: String) -> RuntimeError {
    let ended = pods.iter().find_map(|pod| {
        let statuses = pod.status.as_ref()?.container_statuses.as_ref()?;
        let main = statuses.iter().find(|c| c.name == service)?;
        let code = main.state.as_ref()?.terminated.as_ref()?.exit_code;
        Some((pod.name_any(), code))
    });
    let Some((pod, status)) = ended else {
        return RuntimeError::Migration {
            service: service.to_owned(),
            status: -1,
            tail: vec![why],
        };
    };
    let params = LogParams {
        container: Some(service.to_owned()),
        tail_lines: Some(TAIL_LINES),
        ..LogParams::default()
    };
    let tail = match api.logs(&pod, &params).await {
        Ok(text) => text.lines().map(str::to_owned).collect(),
        Err(e) => vec![format!("(its log could not be read: {e})")],
    };
    RuntimeError::Migration {
        service: service.to_owned(),
        status: i64::from(status),
        tail,
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::batch::v1::{JobCondition, JobStatus};

    use super::*;

    fn with(conditions: &[(&str, &str)]) -> Job {
        Job {
            status: Some(JobStatus {
                conditions: Some(
                    conditions
                        .iter()
                        .map(|(t, s)| JobCondition {
                            type_: (*t).to_owned(),
                            status: (*s).to_owned(),
                            reason: Some("DeadlineExceeded".to_owned()),
                            ..JobCondition::default()
                        })
                        .collect(),
                ),
                ..JobStatus::default()
            }),
            ..Job::default()
        }
    }

    #[test]
    fn a_job_is_done_only_by_a_condition_that_holds() {
        assert_eq!(outcome(&Job::default()), Outcome::Running);
        assert_eq!(outcome(&with(&[("Complete", "False")])), Outcome::Running);
        assert_eq!(
            outcome(&with(&[("SuccessCriteriaMet", "True")])),
            Outcome::Running
        );
        assert_eq!(outcome(&with(&[("Complete", "True")])), Outcome::Complete);
        assert_eq!(
            outcome(&with(&[("Failed", "True")])),
            Outcome::Failed("DeadlineExceeded".to_owned())
        );
    }
}
