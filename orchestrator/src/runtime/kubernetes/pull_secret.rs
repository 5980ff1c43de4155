//! The image pull secret of a registry the nodes pull from with credentials: one Secret in the
//! environment's namespace (`kubernetes.io/dockerconfigjson`, from the credentials
//! `AF_IMAGE_PULL_CREDENTIALS` names), and the namespace's default service account pointing at
//! it, so every pod made there pulls with it (the probe's, the sidecar's, the services', their
//! Jobs'), as Kubernetes' own ServiceAccount admission gives it to each; the keeper's account
//! names it too ([`super::deploy::keeper::service_account`]).

use std::collections::BTreeMap;

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::{
    Container, LocalObjectReference, Pod, PodSpec, Secret, ServiceAccount,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::Client;
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::json;

use super::Timeouts;
use super::cluster::refused;
use super::deploy::objects::{self, stamp};
use super::names::{self, Names, kind};
use super::supply::PullSecret;
use super::wait::{self, Poll};
use crate::runtime::{Action, Progress, RuntimeError};

/// The key of a `kubernetes.io/dockerconfigjson` Secret.
const KEY: &str = ".dockerconfigjson";
/// The account every pod of the namespace runs under unless it names another.
const DEFAULT_ACCOUNT: &str = "default";

/// A pod spec's or service account's reference to the pull secret.
pub fn reference() -> LocalObjectReference {
    LocalObjectReference {
        name: names::PULL_SECRET.to_owned(),
    }
}

/// The Secret holding `secret`.
pub fn secret(names: &Names, secret: &PullSecret) -> Secret {
    stamp(Secret {
        metadata: ObjectMeta {
            name: Some(names::PULL_SECRET.to_owned()),
            namespace: Some(names.namespace().to_owned()),
            labels: Some(names.labels(kind::PULL_SECRET)),
            ..ObjectMeta::default()
        },
        type_: Some("kubernetes.io/dockerconfigjson".to_owned()),
        data: Some(BTreeMap::from([(
            KEY.to_owned(),
            ByteString(secret.0.clone()),
        )])),
        ..Secret::default()
    })
}

/// Make or update the pull secret, let the namespace's default account pull with it (added to
/// the secrets it has), and wait until admission gives it to a new pod: the API server's
/// ServiceAccount admission reads accounts from a cache, so a pod made the moment after the
/// change could be admitted without it (a dry run shows what admission does, and makes
/// nothing).
pub async fn ensure(
    client: &Client,
    names: &Names,
    pull: &PullSecret,
    timeouts: &Timeouts,
    progress: &dyn Progress,
) -> Result<Action, RuntimeError> {
    let namespace = names.namespace();
    let (_, action) = objects::ensure(client, namespace, secret(names, pull), |_, _| {}).await?;
    let accounts: Api<ServiceAccount> = Api::namespaced(client.clone(), namespace);
    let account = accounts
        .get(DEFAULT_ACCOUNT)
        .await
        .map_err(refused(format!(
            "read the default service account of {namespace}"
        )))?;
    let mut secrets = account.image_pull_secrets.unwrap_or_default();
    if !secrets.contains(&reference()) {
        secrets.push(reference());
        let patch = json!({"imagePullSecrets": secrets});
        accounts
            .patch(
                DEFAULT_ACCOUNT,
                &PatchParams::default(),
                &Patch::Merge(&patch),
            )
            .await
            .map_err(refused(format!(
                "let the default service account of {namespace} pull with {}",
                names::PULL_SECRET
            )))?;
    }
    let pods: Api<Pod> = Api::namespaced(client.clone(), namespace);
    let dry_run = PostParams {
        dry_run: true,
        ..PostParams::default()
    };
    let trial = trial_pod(names);
    let given = wait::until(
        "the pull secret to reach new pods",
        timeouts.namespace,
        timeouts.poll,
        progress,
        || async {
            let admitted = pods
                .create(&dry_run, &trial)
                .await
                .map_err(refused(format!("ask admission about a pod in {namespace}")))?;
            let has = admitted
                .spec
                .and_then(|s| s.image_pull_secrets)
                .is_some_and(|s| s.contains(&reference()));
            Ok(if has {
                Poll::Ready(())
            } else {
                Poll::Pending("admission does not give it to new pods yet".to_owned())
            })
        },
    )
    .await?;
    given.map_err(|state| RuntimeError::Timeout {
        what: format!("the pull secret to reach new pods in {namespace}"),
        seconds: timeouts.namespace.as_secs(),
        state,
        knob: "AF_KUBE_NAMESPACE_TIMEOUT",
    })?;
    Ok(action)
}

/// The pod a dry run shows admission's work on: never made.
fn trial_pod(names: &Names) -> Pod {
    Pod {
        metadata: ObjectMeta {
            name: Some("af-pull-secret-trial".to_owned()),
            namespace: Some(names.namespace().to_owned()),
            labels: Some(names.labels(kind::PULL_SECRET)),
            ..ObjectMeta::default()
        },
        spec: Some(PodSpec {
            containers: vec![Container {
                name: "trial".to_owned(),
                image: Some("af-pull-secret-trial".to_owned()),
                ..Container::default()
            }],
            ..PodSpec::default()
        }),
        status: None,
    }
}
