//! The environment's namespace: made with our labels in the creating call, reused when it is
//! ours, refused (AF-RUN-045) and left untouched when it is not.

use k8s_openapi::api::core::v1::{Namespace, ServiceAccount};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::Client;
use kube::api::{Api, PostParams};

use super::Timeouts;
use super::cluster::{is_status, refused};
use super::names::{Names, Owner, kind, owner};
use super::wait::{self, Poll};
use crate::runtime::{Action, Progress, RuntimeError};

/// The namespace object `af up` creates, annotated with where the environment comes from
/// ([`crate::runtime::labels::origin`]).
pub fn render(names: &Names, origin: &[(String, String)]) -> Namespace {
    Namespace {
        metadata: ObjectMeta {
            name: Some(names.namespace().to_owned()),
            labels: Some(names.labels(kind::NAMESPACE)),
            annotations: (!origin.is_empty()).then(|| origin.iter().cloned().collect()),
            ..ObjectMeta::default()
        },
        ..Namespace::default()
    }
}

/// The namespace if it is this environment's, `None` if there is none; AF-RUN-045 if it is
/// somebody else's.
pub async fn ours(client: &Client, names: &Names) -> Result<Option<Namespace>, RuntimeError> {
    let api: Api<Namespace> = Api::all(client.clone());
    let found = api
        .get_opt(names.namespace())
        .await
        .map_err(refused(format!("read namespace {}", names.namespace())))?;
    match owner(found.as_ref(), names) {
        Owner::Absent => Ok(None),
        Owner::Ours => Ok(found),
        Owner::Foreign => Err(RuntimeError::NotOurs {
            class: "namespace",
            name: names.namespace().to_owned(),
        }),
    }
}

/// Whether the namespace is being deleted.
pub fn terminating(ns: &Namespace) -> bool {
    ns.metadata.deletion_timestamp.is_some()
        || ns.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Terminating")
}

/// Make the namespace, or reuse ours; wait out a previous `af down` that is still finishing,
/// and for the namespace's default service account, without which no pod is admitted.
pub async fn ensure(
    client: &Client,
    names: &Names,
    origin: &[(String, String)],
    timeouts: &Timeouts,
    progress: &dyn Progress,
) -> Result<Action, RuntimeError> {
    let api: Api<Namespace> = Api::all(client.clone());
    let namespace = names.namespace();
    let action = match ours(client, names).await? {
        Some(ns) if !terminating(&ns) => Action::Reused,
        found => {
            if found.is_some() {
                let gone = wait::until(
                    &format!("namespace {namespace} to finish terminating"),
                    timeouts.namespace,
                    timeouts.poll,
                    progress,
                    || async {
                        Ok(match ours(client, names).await? {
                            None => Poll::Ready(()),
                            Some(_) => Poll::Pending("terminating".to_owned()),
                        })
                    },
                )
                .await?;
                if let Err(state) = gone {
                    return Err(not_ready(namespace, timeouts, state));
                }
            }
            match api
                .create(&PostParams::default(), &render(names, origin))
                .await
            {
                Ok(_) => Action::Created,
                // Made meanwhile: judge it as found.
                Err(e) if is_status(&e, 409) => match ours(client, names).await? {
                    Some(_) => Action::Reused,
                    None => {
                        return Err(refused(format!("create namespace {namespace}"))(e));
                    }
                },
                Err(e) => return Err(refused(format!("create namespace {namespace}"))(e)),
            }
        }
    };
    let accounts: Api<ServiceAccount> = Api::namespaced(client.clone(), namespace);
    let ready = wait::until(
        &format!("namespace {namespace}"),
        timeouts.namespace,
        timeouts.poll,
        progress,
        || async {
            let found = accounts
                .get_opt("default")
                .await
                .map_err(refused(format!("read the service accounts of {namespace}")))?;
            Ok(match found {
                Some(_) => Poll::Ready(()),
                None => Poll::Pending("no default service account yet".to_owned()),
            })
        },
    )
    .await?;
    ready
        .map(|()| action)
        .map_err(|state| not_ready(namespace, timeouts, state))
}

fn not_ready(namespace: &str, timeouts: &Timeouts, state: String) -> RuntimeError {
    RuntimeError::Timeout {
        what: format!("Making the namespace {namespace} ready"),
        seconds: timeouts.namespace.as_secs(),
        state,
        knob: "AF_KUBE_NAMESPACE_TIMEOUT",
    }
}
