//! A cron service on a cluster: a CronJob named as the service, on its `schedule`, whose every
//! run is the service's own pod (the same confinement, environment, CA files and gate:
//! [`services::pod_template`]), never two at once (`concurrencyPolicy: Forbid`) and never
//! retried within a run (`backoffLimit: 0`; the next schedule is the retry). A run that does
//! not start within `startingDeadlineSeconds` of its time is skipped rather than counted as
//! missed, so a long run never stops the schedule.
//!
//! CronJob is `batch/v1` from Kubernetes 1.21 and only `batch/v1beta1` before (1.20, the local
//! test cluster); 1.25 dropped `batch/v1beta1`. The object is rendered once, typed as
//! `batch/v1` (whose fields used here `batch/v1beta1` has alike), and sent under whichever
//! version the API server says it serves ([`served`]), `batch/v1` when both are.

use std::time::Duration;

use k8s_openapi::api::batch::v1::{CronJob, CronJobSpec, JobSpec, JobTemplateSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{APIResourceList, ObjectMeta};
use kube::api::{Api, ApiResource, DynamicObject};
use kube::{Client, ResourceExt};

use super::objects::{self, stamp};
use super::services::{self, Role, Spec};
use crate::plan::{EnvPlan, Kind};
use crate::runtime::kubernetes::cluster::{is_status, refused};
use crate::runtime::kubernetes::names::Names;
use crate::runtime::{Action, RuntimeError};

/// The longest name a CronJob may have (its Jobs are named after it plus 11 characters).
pub const MAX_NAME: usize = 52;
/// How late a run may start and still run.
const STARTING_DEADLINE: Duration = Duration::from_secs(300);

/// The CronJob API a cluster serves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CronApi {
    /// `batch/v1` (Kubernetes 1.21 and later).
    V1,
    /// `batch/v1beta1` (Kubernetes 1.20 and earlier; gone from 1.25).
    V1Beta1,
}

impl CronApi {
    const VERSIONS: [(CronApi, &'static str); 2] = [
        (CronApi::V1, "batch/v1"),
        (CronApi::V1Beta1, "batch/v1beta1"),
    ];

    /// Its `apiVersion`.
    pub fn api_version(self) -> &'static str {
        match self {
            CronApi::V1 => "batch/v1",
            CronApi::V1Beta1 => "batch/v1beta1",
        }
    }

    /// The resource to address it by.
    fn resource(self) -> ApiResource {
        let (group, version) = self
            .api_version()
            .split_once('/')
            .unwrap_or(("batch", "v1"));
        ApiResource {
            group: group.to_owned(),
            version: version.to_owned(),
            api_version: self.api_version().to_owned(),
            kind: "CronJob".to_owned(),
            plural: "cronjobs".to_owned(),
        }
    }
}

/// The version to use from what each group version lists (`None` for one not served):
/// `batch/v1` when it lists cronjobs, else `batch/v1beta1` when that does, else none.
pub fn choose(lists: &[(CronApi, Option<&APIResourceList>)]) -> Option<CronApi> {
    CronApi::VERSIONS.iter().find_map(|(api, _)| {
        lists
            .iter()
            .find(|(listed, _)| listed == api)
            .and_then(|(_, list)| *list)
            .is_some_and(|l| l.resources.iter().any(|r| r.name == "cronjobs"))
            .then_some(*api)
    })
}

/// The CronJob API this cluster serves, asked of the API server.
pub async fn served(client: &Client) -> Result<Option<CronApi>, RuntimeError> {
    let mut lists = Vec::with_capacity(CronApi::VERSIONS.len());
    for (api, version) in CronApi::VERSIONS {
        let list = match client.list_api_group_resources(version).await {
            Ok(list) => Some(list),
            Err(e) if is_status(&e, 404) => None,
            Err(e) => return Err(refused(format!("list what {version} serves"))(e)),
        };
        lists.push((api, list));
    }
    let found: Vec<(CronApi, Option<&APIResourceList>)> = lists
        .iter()
        .map(|(api, list)| (*api, list.as_ref()))
        .collect();
    Ok(choose(&found))
}

/// The CronJob API to make `plan`'s cron services with, asked before anything is made; `None`
/// when the plan has none. A cluster serving neither version is refused (AF-RUN-044).
pub async fn preflight(client: &Client, plan: &EnvPlan) -> Result<Option<CronApi>, RuntimeError> {
    let cron: Vec<&str> = plan
        .services
        .iter()
        .filter(|s| s.kind == Kind::Cron)
        .map(|s| s.name.as_str())
        .collect();
    if cron.is_empty() {
        return Ok(None);
    }
    match served(client).await? {
        Some(api) => Ok(Some(api)),
        None => Err(RuntimeError::Unsupported(format!(
            "This cluster serves no CronJob API (batch/v1 or batch/v1beta1), so the cron services {} cannot run on it; nothing was created.",
            cron.join(", ")
        ))),
    }
}

/// The CronJob of `spec`'s cron service, typed as `batch/v1`.
pub fn cron_job(names: &Names, spec: &Spec<'_>) -> CronJob {
    let service = spec.service;
    stamp(CronJob {
        metadata: services::object_meta(names, &service.name, Role::Cron),
        spec: CronJobSpec {
            schedule: service.schedule.clone().unwrap_or_default(),
            concurrency_policy: Some("Forbid".to_owned()),
            starting_deadline_seconds: Some(
                i64::try_from(STARTING_DEADLINE.as_secs()).unwrap_or(i64::MAX),
            ),
            successful_jobs_history_limit: Some(3),
            failed_jobs_history_limit: Some(1),
            job_template: JobTemplateSpec {
                metadata: Some(ObjectMeta {
                    labels: Some(services::role_labels(names, &service.name, Role::Cron)),
                    ..ObjectMeta::default()
                }),
                spec: Some(JobSpec {
                    backoff_limit: Some(0),
                    template: services::pod_template(names, spec, Role::Cron),
                    ..JobSpec::default()
                }),
            },
            ..CronJobSpec::default()
        },
        status: None,
    })
}

/// `job` as the object to send under `api`.
pub fn as_served(job: &CronJob, api: CronApi) -> Result<DynamicObject, RuntimeError> {
    let invalid = |e: serde_json::Error| RuntimeError::Api {
        context: format!("render CronJob {}", job.name_any()),
        message: e.to_string(),
    };
    let mut value = serde_json::to_value(job).map_err(invalid)?;
    value["apiVersion"] = api.api_version().into();
    serde_json::from_value(value).map_err(invalid)
}

/// The CronJobs of `namespace`, under `api`.
pub fn api_in(client: &Client, namespace: &str, api: CronApi) -> Api<DynamicObject> {
    Api::namespaced_with(client.clone(), namespace, &api.resource())
}

/// Make `wanted` under `api`, reuse it by its digest, or replace it in place (a CronJob's
/// schedule and template may change; its running Jobs finish as they were).
pub async fn ensure(
    client: &Client,
    names: &Names,
    api: CronApi,
    wanted: &CronJob,
) -> Result<Action, RuntimeError> {
    let namespace = names.namespace();
    let what = format!(
        "CronJob {} ({}) in {namespace}",
        wanted.name_any(),
        api.api_version()
    );
    let object = as_served(wanted, api)?;
    let (_, action) =
        objects::ensure_in(&api_in(client, namespace, api), &what, object, |_, _| {}).await?;
    Ok(action)
}

#[cfg(test)]
mod tests {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::APIResource;

    use super::*;

    fn serving(version: &str, resources: &[&str]) -> APIResourceList {
        APIResourceList {
            group_version: version.to_owned(),
            resources: resources
                .iter()
                .map(|name| APIResource {
                    name: (*name).to_owned(),
                    namespaced: true,
                    ..APIResource::default()
                })
                .collect(),
        }
    }

    #[test]
    fn the_cronjob_version_is_the_one_the_cluster_lists_cronjobs_under() {
        // 1.20: batch/v1 serves Jobs only.
        let v1_jobs = serving("batch/v1", &["jobs", "jobs/status"]);
        let beta = serving("batch/v1beta1", &["cronjobs", "cronjobs/status"]);
        assert_eq!(
            choose(&[
                (CronApi::V1, Some(&v1_jobs)),
                (CronApi::V1Beta1, Some(&beta))
            ]),
            Some(CronApi::V1Beta1)
        );
        // 1.21 to 1.24: both; batch/v1 wins.
        let v1 = serving("batch/v1", &["cronjobs", "jobs"]);
        assert_eq!(
            choose(&[(CronApi::V1Beta1, Some(&beta)), (CronApi::V1, Some(&v1))]),
            Some(CronApi::V1)
        );
        // 1.25 on: batch/v1beta1 is not served at all.
        assert_eq!(
            choose(&[(CronApi::V1, Some(&v1)), (CronApi::V1Beta1, None)]),
            Some(CronApi::V1)
        );
        // Neither lists cronjobs.
        assert_eq!(
            choose(&[(CronApi::V1, Some(&v1_jobs)), (CronApi::V1Beta1, None)]),
            None
        );
        assert_eq!(choose(&[]), None);
    }

    #[test]
    fn the_typed_cronjob_is_sent_under_the_served_version_unchanged_otherwise() {
        let typed = CronJob {
            metadata: ObjectMeta {
                name: Some("report".to_owned()),
                ..ObjectMeta::default()
            },
            spec: CronJobSpec {
                schedule: "*/15 * * * *".to_owned(),
                ..CronJobSpec::default()
            },
            status: None,
        };
        for api in [CronApi::V1, CronApi::V1Beta1] {
            let sent = as_served(&typed, api).expect("dynamic");
            let value = serde_json::to_value(&sent).expect("json");
            assert_eq!(value["apiVersion"], api.api_version());
            assert_eq!(value["kind"], "CronJob");
            assert_eq!(value["spec"]["schedule"], "*/15 * * * *");
            assert_eq!(value["metadata"]["name"], "report");
        }
    }
}
