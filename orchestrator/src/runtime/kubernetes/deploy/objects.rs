//! Making one namespaced object as rendered, or reusing it: an object carries the digest of
//! what it was rendered from (`dev.antifailure.config`); the same digest is reused, another is
//! replaced in place (so a Deployment rolls and a Service keeps its address).

use std::fmt::Debug;

use k8s_openapi::NamespaceResourceScope;
use kube::api::{Api, PostParams};
use kube::{Client, Resource, ResourceExt};
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::plan::short_digest;
use crate::runtime::kubernetes::cluster::refused;
use crate::runtime::labels::CONFIG;
use crate::runtime::{Action, RuntimeError};

/// Label `object` with the digest of its own rendering (everything but its metadata's status).
pub fn stamp<K: Resource + Serialize>(mut object: K) -> K {
    let text = serde_json::to_string(&object).unwrap_or_default();
    object
        .meta_mut()
        .labels
        .get_or_insert_with(Default::default)
        .insert(CONFIG.to_owned(), short_digest(text.as_bytes()));
    object
}

/// Create `wanted` in `namespace`, reuse the object of its name when its digest matches, or
/// replace that object in place; `keep` copies what the API server will not let change (a
/// Service's cluster address) from the existing object into `wanted` first.
pub async fn ensure<K>(
    client: &Client,
    namespace: &str,
    wanted: K,
    keep: impl FnOnce(&K, &mut K),
) -> Result<(K, Action), RuntimeError>
where
    K: Resource<Scope = NamespaceResourceScope, DynamicType = ()>
        + Clone
        + Debug
        + Serialize
        + DeserializeOwned,
{
    let api: Api<K> = Api::namespaced(client.clone(), namespace);
    let what = format!("{} {} in {namespace}", K::kind(&()), wanted.name_any());
    ensure_in(&api, &what, wanted, keep).await
}

/// [`ensure`] through `api`, for an object whose type is only known at run time (a CronJob
/// under the version the cluster serves); `what` names it in errors.
pub async fn ensure_in<K>(
    api: &Api<K>,
    what: &str,
    wanted: K,
    keep: impl FnOnce(&K, &mut K),
) -> Result<(K, Action), RuntimeError>
where
    K: Resource + Clone + Debug + Serialize + DeserializeOwned,
{
    let name = wanted.name_any();
    let existing = api
        .get_opt(&name)
        .await
        .map_err(refused(format!("read {what}")))?;
    let pp = PostParams::default();
    match existing {
        Some(found) if digest(&found) == digest(&wanted) && digest(&wanted).is_some() => {
            Ok((found, Action::Reused))
        }
        Some(found) => {
            let mut wanted = wanted;
            keep(&found, &mut wanted);
            wanted.meta_mut().resource_version = found.meta().resource_version.clone();
            let made = api
                .replace(&name, &pp, &wanted)
                .await
                .map_err(refused(format!("replace {what}")))?;
            Ok((made, Action::Replaced))
        }
        None => {
            let made = api
                .create(&pp, &wanted)
                .await
                .map_err(refused(format!("create {what}")))?;
            Ok((made, Action::Created))
        }
    }
}

/// The digest `object` was stamped with.
pub fn digest<K: Resource>(object: &K) -> Option<&String> {
    object.meta().labels.as_ref().and_then(|l| l.get(CONFIG))
}
