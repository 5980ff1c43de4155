//! What the plan no longer has: every object af makes for a service carries the service's
//! label, so each kind is listed by its labels and what the plan no longer wants is deleted
//! (dependents in the background: a Job's pods, a Deployment's ReplicaSets).

use std::collections::BTreeSet;
use std::fmt::Debug;

use kube::api::{Api, DeleteParams, ListParams};
use kube::{Resource, ResourceExt};
use serde::de::DeserializeOwned;

use crate::runtime::kubernetes::cluster::refused;
use crate::runtime::labels::SERVICE;
use crate::runtime::{Phase, Progress, RuntimeError};

/// Delete each object `selector` lists through `api` whose service is not in `wanted`;
/// `what` names the kind in messages (`Deployment`).
pub async fn remove<K>(
    api: &Api<K>,
    what: &str,
    selector: &str,
    wanted: &BTreeSet<String>,
    progress: &dyn Progress,
) -> Result<(), RuntimeError>
where
    K: Resource + Clone + Debug + DeserializeOwned,
{
    let listed = api
        .list(&ListParams::default().labels(selector))
        .await
        .map_err(refused(format!("list the {what}s of the environment")))?;
    for object in listed {
        let service = object.labels().get(SERVICE).map_or("", String::as_str);
        if wanted.contains(service) {
            continue;
        }
        let name = object.name_any();
        progress.begin(&format!("removing {what} {name}"))?;
        progress.phase(&name, Phase::Removing);
        api.delete(&name, &DeleteParams::background())
            .await
            .map_err(refused(format!("delete {what} {name}")))?;
    }
    Ok(())
}
