//! Where the sidecar's journal lives on a cluster: on a PersistentVolumeClaim when the cluster
//! has a default StorageClass (the journal then outlives the sidecar's pod: a restart, a new
//! configuration), in an emptyDir of the pod otherwise, and also when af may not read the
//! cluster's StorageClasses. A claim once made is kept for the environment's life (its class
//! is not changed under a running journal); `af down` removes it with the namespace.

use af_sidecar_api::config::JournalConfig;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{
    EmptyDirVolumeSource, PersistentVolumeClaim, PersistentVolumeClaimSpec,
    PersistentVolumeClaimVolumeSource, Volume, VolumeResourceRequirements,
};
use k8s_openapi::api::storage::v1::StorageClass;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{Api, ListParams};
use kube::{Client, ResourceExt};

use super::objects::stamp;
use crate::runtime::kubernetes::cluster::{is_status, refused};
use crate::runtime::kubernetes::names::{self, Names, kind};
use crate::runtime::labels::SERVICE;
use crate::runtime::{JournalPlace, JournalStorage, RuntimeError};

/// The annotation that makes a StorageClass the cluster's default.
pub const DEFAULT_CLASS: &str = "storageclass.kubernetes.io/is-default-class";
/// The same, as clusters before Kubernetes 1.13 spelled it (still honoured by the API server).
const DEFAULT_CLASS_BETA: &str = "storageclass.beta.kubernetes.io/is-default-class";
/// The annotation of the sidecar's Deployment saying why its journal is in the pod.
pub const IN_POD_REASON: &str = "dev.antifailure.journal-in-pod";
/// The journal's volume in the sidecar's pod.
pub const VOLUME: &str = "journal";

/// Where the journal goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Journal {
    /// On the claim [`names::JOURNAL_CLAIM`], of this StorageClass; `made` when it exists.
    Claim {
        /// The StorageClass.
        class: String,
        /// Whether the claim is already there (it is then used as it is).
        made: bool,
    },
    /// In an emptyDir of the pod, for this reason.
    InPod(String),
}

/// The cluster's default StorageClass among `classes`, if one is marked so.
pub fn default_class(classes: &[StorageClass]) -> Option<String> {
    classes
        .iter()
        .find(|c| {
            let annotations = c.metadata.annotations.as_ref();
            [DEFAULT_CLASS, DEFAULT_CLASS_BETA].iter().any(|key| {
                annotations
                    .and_then(|a| a.get(*key))
                    .is_some_and(|v| v == "true")
            })
        })
        .map(ResourceExt::name_any)
}

/// Where the journal of `names`' sidecar goes: the claim there is, else a new claim of the
/// default StorageClass, else the pod.
pub async fn choose(client: &Client, names: &Names) -> Result<Journal, RuntimeError> {
    let ns = names.namespace();
    let claims: Api<PersistentVolumeClaim> = Api::namespaced(client.clone(), ns);
    if let Some(found) = claims
        .get_opt(names::JOURNAL_CLAIM)
        .await
        .map_err(refused(format!(
            "read PersistentVolumeClaim {} in {ns}",
            names::JOURNAL_CLAIM
        )))?
    {
        let class = found
            .spec
            .and_then(|s| s.storage_class_name)
            .unwrap_or_default();
        return Ok(Journal::Claim { class, made: true });
    }
    let classes: Api<StorageClass> = Api::all(client.clone());
    match classes.list(&ListParams::default()).await {
        Ok(listed) => Ok(match default_class(&listed.items) {
            Some(class) => Journal::Claim { class, made: false },
            None => Journal::InPod("the cluster has no default StorageClass".to_owned()),
        }),
        Err(e) if is_status(&e, 403) => Ok(Journal::InPod(
            "af may not read the cluster's StorageClasses".to_owned(),
        )),
        Err(e) if is_status(&e, 404) => Ok(Journal::InPod(
            "the cluster serves no StorageClasses".to_owned(),
        )),
        Err(e) => Err(refused("list the cluster's StorageClasses")(e)),
    }
}

/// The claim's size: the journal's bound (every segment and the one being written), twice.
fn claim_size() -> Quantity {
    let journal = JournalConfig::default();
    let segments = u64::try_from(journal.max_segments).unwrap_or(u64::MAX);
    let bytes = journal
        .segment_bytes
        .saturating_mul(segments.saturating_add(1));
    Quantity(format!("{}Mi", bytes.div_ceil(1 << 20).saturating_mul(2)))
}

/// The journal's PersistentVolumeClaim, of StorageClass `class`.
pub fn claim(names: &Names, class: &str) -> PersistentVolumeClaim {
    let mut labels = names.labels(kind::SIDECAR);
    labels.insert(SERVICE.to_owned(), "sidecar".to_owned());
    stamp(PersistentVolumeClaim {
        metadata: ObjectMeta {
            name: Some(names::JOURNAL_CLAIM.to_owned()),
            namespace: Some(names.namespace().to_owned()),
            labels: Some(labels),
            ..ObjectMeta::default()
        },
        spec: Some(PersistentVolumeClaimSpec {
            // One writer: the sidecar's Deployment never runs two pods (Recreate).
            access_modes: Some(vec!["ReadWriteOnce".to_owned()]),
            storage_class_name: Some(class.to_owned()),
            resources: Some(VolumeResourceRequirements {
                requests: Some([("storage".to_owned(), claim_size())].into()),
                ..VolumeResourceRequirements::default()
            }),
            ..PersistentVolumeClaimSpec::default()
        }),
        status: None,
    })
}

/// The journal's volume in the sidecar's pod.
pub fn volume(journal: &Journal) -> Volume {
    match journal {
        Journal::Claim { .. } => Volume {
            name: VOLUME.to_owned(),
            persistent_volume_claim: Some(PersistentVolumeClaimVolumeSource {
                claim_name: names::JOURNAL_CLAIM.to_owned(),
                read_only: None,
            }),
            ..Volume::default()
        },
        Journal::InPod(_) => Volume {
            name: VOLUME.to_owned(),
            empty_dir: Some(EmptyDirVolumeSource::default()),
            ..Volume::default()
        },
    }
}

/// Where the sidecar's Deployment keeps its journal, as `af status` says it; `pod` names the
/// sidecar's pod (the Deployment's, when it has none yet).
pub fn place(deployment: &Deployment, pod: Option<&str>) -> Option<JournalPlace> {
    let volumes = deployment.spec.template.spec.as_ref()?.volumes.as_ref()?;
    let journal = volumes.iter().find(|v| v.name == VOLUME)?;
    if let Some(claim) = &journal.persistent_volume_claim {
        return Some(JournalPlace {
            storage: JournalStorage::PersistentVolumeClaim,
            name: claim.claim_name.clone(),
            reason: None,
        });
    }
    journal.empty_dir.as_ref()?;
    Some(JournalPlace {
        storage: JournalStorage::Pod,
        name: pod.map_or_else(|| deployment.name_any(), str::to_owned),
        reason: deployment
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(IN_POD_REASON))
            .cloned(),
    })
}
