//! The image pull secret of a registry the nodes pull from with credentials: one Secret in the
//! environment's namespace (`kubernetes.io/dockerconfigjson`, from the credentials
//! `AF_IMAGE_PULL_CREDENTIALS` names), and the namespace's default service account pointing at
//! it, so every pod made there pulls with it (the probe's, the sidecar's, the services', their
//! Jobs'), as Kubernetes' own ServiceAccount admission gives it to each; the keeper's account
//! names it too ([`super::deploy::keeper::service_account`]).

use std::collections::BTreeMap;

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::{LocalObjectReference, Secret, ServiceAccount};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::Client;
use kube::api::{Api, Patch, PatchParams};
use serde_json::json;

use super::cluster::refused;
use super::deploy::objects::{self, stamp};
use super::names::{self, Names, kind};
use super::supply::PullSecret;
use crate::runtime::{Action, RuntimeError};

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

/// Make or update the pull secret, then let the namespace's default account pull with it.
pub async fn ensure(
    client: &Client,
    names: &Names,
    pull: &PullSecret,
) -> Result<Action, RuntimeError> {
    let namespace = names.namespace();
    let (_, action) = objects::ensure(client, namespace, secret(names, pull), |_, _| {}).await?;
    let accounts: Api<ServiceAccount> = Api::namespaced(client.clone(), namespace);
    let patch = json!({"imagePullSecrets": [{"name": names::PULL_SECRET}]});
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
    Ok(action)
}
