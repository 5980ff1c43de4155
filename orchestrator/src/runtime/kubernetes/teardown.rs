//! `af down` on a cluster: the namespace goes, if it is ours, and `down` waits until it is
//! gone, so the next `af up` never meets a namespace still terminating. One that does not go
//! within its timeout is named with the finalizers holding it.

use k8s_openapi::api::core::v1::Namespace;
use kube::Client;
use kube::api::{Api, DeleteParams};

use super::Timeouts;
use super::cluster::{is_status, refused};
use super::names::Names;
use super::namespace;
use super::wait::{self, Poll};
use crate::runtime::{DownReport, Phase, Progress, RuntimeError};

/// Delete the environment's namespace (AF-RUN-045 if it is not ours) and wait until it is gone.
pub async fn down(
    client: &Client,
    names: &Names,
    timeouts: &Timeouts,
    progress: &dyn Progress,
) -> Result<DownReport, RuntimeError> {
    let mut report = DownReport::default();
    let name = names.namespace();
    let Some(found) = namespace::ours(client, names).await? else {
        return Ok(report);
    };
    let api: Api<Namespace> = Api::all(client.clone());
    progress.phase(&format!("namespace {name}"), Phase::Removing);
    if !namespace::terminating(&found) {
        match api.delete(name, &DeleteParams::background()).await {
            Ok(_) => {}
            Err(e) if is_status(&e, 404) => {}
            Err(e) => return Err(refused(format!("delete namespace {name}"))(e)),
        }
    }
    let gone = wait::until(
        &format!("namespace {name} to go"),
        timeouts.down,
        timeouts.poll,
        progress,
        || async {
            let now = api
                .get_opt(name)
                .await
                .map_err(refused(format!("read namespace {name}")))?;
            Ok(match now {
                None => Poll::Ready(()),
                Some(ns) => Poll::Pending(holders(&ns).join("; ")),
            })
        },
    )
    .await?;
    match gone {
        Ok(()) => report.removed.push(format!("namespace {name}")),
        Err(held) => report.failed.push((
            format!("namespace {name}"),
            format!(
                "still terminating after {} s; held by {}",
                timeouts.down.as_secs(),
                if held.is_empty() {
                    "nothing it names".to_owned()
                } else {
                    held
                }
            ),
        )),
    }
    Ok(report)
}

/// What holds a terminating namespace: its finalizers, and what its conditions say remains
/// (content with finalizers of its own, content not yet deleted).
pub fn holders(ns: &Namespace) -> Vec<String> {
    let mut held: Vec<String> = Vec::new();
    let finalizers: Vec<String> = ns
        .spec
        .as_ref()
        .and_then(|s| s.finalizers.clone())
        .into_iter()
        .flatten()
        .chain(ns.metadata.finalizers.clone().into_iter().flatten())
        .collect();
    if !finalizers.is_empty() {
        held.push(format!("finalizers {}", finalizers.join(", ")));
    }
    held.extend(
        ns.status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .into_iter()
            .flatten()
            .filter(|c| c.status == "True")
            .filter(|c| {
                matches!(
                    c.type_.as_str(),
                    "NamespaceFinalizersRemaining" | "NamespaceContentRemaining"
                )
            })
            .filter_map(|c| c.message.clone()),
    );
    held
}
