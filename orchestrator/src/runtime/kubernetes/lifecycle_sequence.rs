//! The environment's lifecycle against the fake API server: what `status` says of each pod and
//! of the journal, a sidecar restart rolled and waited for, where the journal goes on clusters
//! with and without a default StorageClass, and what a failed `af up` does with the namespace
//! it made, with and without `AF_PRESERVE=1`.

use serde_json::{Value, json};

use super::deploy::journal::{self, Journal};
use super::deploy::sidecar;
use super::inspect::tests::{Shape, UP, pod_json};
use super::mock::Fake;
use super::names::{self, DEFAULT_PREFIX, Names, kind};
use super::restart::RESTARTED_AT;
use super::sequence::{NS, changes, env, plan, preserving, probe_says, runtime};
use crate::runtime::{JournalStorage, Quiet, Runtime, RuntimeError};

const DEPLOYMENTS: &str = "/apis/apps/v1/namespaces/af-pr-42/deployments";
const PODS: &str = "/api/v1/namespaces/af-pr-42/pods";
const CLASSES: &str = "/apis/storage.k8s.io/v1/storageclasses";

fn names() -> Names {
    Names::new(DEFAULT_PREFIX, &env())
}

/// The sidecar's Deployment as rendered, its journal in the pod, available at generation 1.
fn put_sidecar(fake: &Fake) {
    let rendered = sidecar::deployment(
        &names(),
        "af-proxy:test",
        "Never",
        "d1g3st",
        &Journal::InPod("the cluster has no default StorageClass".to_owned()),
        None,
        af_policy::manifest::OnLoss::Keep,
    );
    let mut value = serde_json::to_value(&rendered).expect("json");
    value["metadata"]["generation"] = json!(1);
    value["status"] = json!({"observedGeneration": 1, "replicas": 1, "updatedReplicas": 1,
                             "readyReplicas": 1, "availableReplicas": 1});
    fake.with(|s| {
        s.objects
            .insert(format!("{DEPLOYMENTS}/{}", names::SIDECAR), value)
    });
}

fn put_service_deployment(fake: &Fake, service: &str) {
    fake.with(|s| {
        s.objects.insert(
            format!("{DEPLOYMENTS}/{service}"),
            json!({"apiVersion": "apps/v1", "kind": "Deployment",
                   "metadata": {"name": service, "namespace": "af-pr-42", "labels": {
                       "dev.antifailure.managed": "true", "dev.antifailure.env": "pr-42",
                       "dev.antifailure.kind": "service", "dev.antifailure.service": service}},
                   "spec": {"replicas": 1, "selector": {"matchLabels": {}},
                            "template": {"spec": {"containers": [{"name": service}]}}}}),
        )
    });
}

fn put_pod(fake: &Fake, name: &str, pod: Value) {
    fake.with(|s| s.objects.insert(format!("{PODS}/{name}"), pod));
}

/// A pod of `service` whose main container waits on `reason`.
fn waiting(name: &str, service: &str, reason: &str) -> Value {
    let mut pod = pod_json(
        name,
        service,
        kind::SERVICE,
        Shape {
            phase: "Running",
            running: false,
            ready: false,
            ..UP
        },
    );
    pod["status"]["containerStatuses"][0]["state"] = json!({"waiting": {"reason": reason}});
    pod
}

/// A pod of `service` whose gate still runs.
fn gated(name: &str, service: &str) -> Value {
    let mut pod = pod_json(
        name,
        service,
        kind::SERVICE,
        Shape {
            phase: "Pending",
            running: false,
            ready: false,
            ..UP
        },
    );
    pod["status"]["initContainerStatuses"] = json!([{"name": "af-gate", "image": "",
        "imageID": "", "ready": false, "restartCount": 0, "state": {"running": {}}}]);
    pod
}

#[tokio::test]
async fn status_names_each_pods_state_and_that_the_journal_is_in_the_sidecars_pod() {
    let fake = Fake::new();
    let rt = runtime(&fake);
    let absent = rt.status(&env()).await.expect("status");
    assert!(!absent.exists && absent.sidecar.is_none() && absent.journal.is_none());

    super::sequence::ours(&fake);
    put_sidecar(&fake);
    put_pod(
        &fake,
        "af-sidecar-1",
        pod_json("af-sidecar-1", "sidecar", kind::SIDECAR, UP),
    );
    for service in ["api", "web", "worker"] {
        put_service_deployment(&fake, service);
    }
    put_pod(&fake, "api-1", waiting("api-1", "api", "CrashLoopBackOff"));
    let mut web = gated("web-1", "web");
    web["status"]["podIP"] = json!("10.244.0.7");
    put_pod(&fake, "web-1", web);
    // The probe's pod belongs to no Deployment: not a service.
    put_pod(
        &fake,
        "af-probe-1",
        pod_json("af-probe-1", "", kind::PROBE, UP),
    );
    fake.with(|s| s.calls.clear());

    let status = rt.status(&env()).await.expect("status");
    assert!(status.exists);
    let sidecar = status.sidecar.as_ref().expect("the sidecar");
    assert_eq!((sidecar.state.as_str(), sidecar.running), ("running", true));
    let states: Vec<(&str, &str, bool)> = status
        .services
        .iter()
        .map(|s| (s.name.as_str(), s.state.as_str(), s.running))
        .collect();
    assert_eq!(
        states,
        [
            ("api", "crashloop", false),
            ("web", "pending (gate running)", false),
            ("worker", "no pod yet", false),
        ]
    );
    // Each service's pod addresses, which `af ui` names a request's client by; a pod the
    // cluster gave no address yet has none.
    let addresses: Vec<(&str, Vec<String>)> = status
        .services
        .iter()
        .map(|s| {
            let ips = s.addresses.iter().map(ToString::to_string).collect();
            (s.name.as_str(), ips)
        })
        .collect();
    assert_eq!(
        addresses,
        [
            ("api", vec![]),
            ("web", vec!["10.244.0.7".to_owned()]),
            ("worker", vec![]),
        ]
    );
    let journal = status.journal.expect("where the journal is");
    assert_eq!(journal.storage, JournalStorage::Pod);
    assert_eq!(journal.name, "af-sidecar-1");
    assert_eq!(
        journal.reason.as_deref(),
        Some("the cluster has no default StorageClass")
    );
    assert!(changes(&fake.calls()).is_empty(), "status changes nothing");
}

#[tokio::test]
async fn a_sidecar_restart_rolls_its_deployment_and_waits_for_a_new_ready_pod() {
    let fake = Fake::new();
    let rt = runtime(&fake);
    assert!(rt.capabilities().restart_sidecar);
    let refused = rt
        .restart_sidecar(&env())
        .await
        .expect_err("no environment");
    assert!(
        matches!(refused, RuntimeError::NoEnvironment(_)),
        "{refused:?}"
    );
    super::sequence::ours(&fake);
    let refused = rt.restart_sidecar(&env()).await.expect_err("no sidecar");
    assert!(
        matches!(&refused, RuntimeError::NoService { service, .. } if service == "sidecar"),
        "{refused:?}"
    );
    assert!(
        changes(&fake.calls()).is_empty(),
        "a refusal changes nothing"
    );

    put_sidecar(&fake);
    let mut old = pod_json("af-sidecar-old", "sidecar", kind::SIDECAR, UP);
    old["metadata"]["labels"]["dev.antifailure.network"] = json!("sidecar");
    put_pod(&fake, "af-sidecar-old", old);
    fake.with(|s| s.calls.clear());
    rt.restart_sidecar(&env()).await.expect("restarted");
    assert_eq!(
        changes(&fake.calls()),
        [format!("PATCH {DEPLOYMENTS}/af-sidecar")],
        "rolled, never a pod deleted beside its Deployment's Recreate"
    );
    let (old, new, stamped) = fake.with(|s| {
        (
            s.objects.contains_key(&format!("{PODS}/af-sidecar-old")),
            s.objects.contains_key(&format!("{PODS}/af-sidecar-2")),
            s.objects[&format!("{DEPLOYMENTS}/af-sidecar")]["spec"]["template"]["metadata"]
                ["annotations"][RESTARTED_AT]
                .is_string(),
        )
    });
    assert!(
        !old && new && stamped,
        "old {old}, new {new}, stamped {stamped}"
    );
    let status = rt.status(&env()).await.expect("status");
    assert_eq!(
        status.journal.map(|j| j.name),
        Some("af-sidecar-2".to_owned()),
        "the journal is named in the new pod"
    );
}

fn storage_class(name: &str, default: Option<&str>) -> Value {
    let mut class = json!({"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",
                           "metadata": {"name": name}, "provisioner": "test.local/none"});
    if let Some(v) = default {
        class["metadata"]["annotations"] = json!({(journal::DEFAULT_CLASS): v});
    }
    class
}

#[tokio::test]
async fn the_journal_goes_on_a_claim_of_the_default_storage_class_else_in_the_pod() {
    let fake = Fake::new();
    super::sequence::ours(&fake);
    let client = fake.client();
    let names = names();
    assert_eq!(
        journal::choose(&client, &names).await.expect("chosen"),
        Journal::InPod("the cluster has no default StorageClass".to_owned())
    );
    fake.with(|s| {
        s.objects.insert(
            format!("{CLASSES}/slow"),
            storage_class("slow", Some("false")),
        );
        s.objects
            .insert(format!("{CLASSES}/plain"), storage_class("plain", None));
    });
    assert!(matches!(
        journal::choose(&client, &names).await.expect("chosen"),
        Journal::InPod(_)
    ));
    fake.with(|s| {
        s.objects.insert(
            format!("{CLASSES}/standard"),
            storage_class("standard", Some("true")),
        )
    });
    assert_eq!(
        journal::choose(&client, &names).await.expect("chosen"),
        Journal::Claim {
            class: "standard".to_owned(),
            made: false
        }
    );
    fake.with(|s| s.forbidden.push(CLASSES.to_owned()));
    assert_eq!(
        journal::choose(&client, &names).await.expect("chosen"),
        Journal::InPod("af may not read the cluster's StorageClasses".to_owned())
    );
    // A claim there is is used as it is, whatever the classes say now.
    let claim = serde_json::to_value(journal::claim(&names, "old-default")).expect("json");
    fake.with(|s| {
        s.objects.insert(
            format!(
                "/api/v1/namespaces/af-pr-42/persistentvolumeclaims/{}",
                names::JOURNAL_CLAIM
            ),
            claim,
        )
    });
    assert_eq!(
        journal::choose(&client, &names).await.expect("chosen"),
        Journal::Claim {
            class: "old-default".to_owned(),
            made: true
        }
    );
    assert!(changes(&fake.calls()).is_empty(), "choosing makes nothing");
}

#[tokio::test]
async fn a_failed_up_keeps_the_namespace_it_made_only_with_af_preserve_and_says_so() {
    let fake = Fake::new();
    probe_says(&fake, &["tcp"]);
    let refused = preserving(&fake)
        .up(&plan(), &Quiet)
        .await
        .expect_err("refused");
    let report = refused.report();
    assert_eq!(report.code.code, "AF-RUN-043", "{report}");
    assert!(
        report.statement.ends_with(
            "The namespace af-pr-42 is kept for inspection (AF_PRESERVE=1); `af down` removes it."
        ),
        "{}",
        report.statement
    );
    assert!(fake.with(|s| s.objects.contains_key(NS)), "kept");

    // A namespace that was there before this `af up` stays, AF_PRESERVE or not.
    fake.with(|s| s.calls.clear());
    let refused = runtime(&fake)
        .up(&plan(), &Quiet)
        .await
        .expect_err("refused");
    let report = refused.report();
    assert_eq!(report.code.code, "AF-RUN-043", "{report}");
    assert!(
        report.statement.ends_with(
            "The namespace af-pr-42 was there before this `af up` and stays; `af down` removes it."
        ),
        "{}",
        report.statement
    );
    assert!(
        !changes(&fake.calls()).contains(&format!("DELETE {NS}")),
        "{:?}",
        fake.calls()
    );
    assert!(fake.with(|s| s.objects.contains_key(NS)), "still there");
}

#[test]
fn af_preserve_is_one_or_zero() {
    use af_policy::placement::{self, Runtime as Section};

    let section = Section {
        provider: Some("kubernetes".to_owned()),
        ..Section::default()
    };
    let placed = placement::place(&section).expect("placed");
    let with = |v: &'static str| {
        super::KubeOptions::from_vars(&placed, &move |k| {
            (k == "AF_PRESERVE").then(|| v.to_owned())
        })
    };
    assert!(with("1").expect("1").preserve);
    assert!(!with("0").expect("0").preserve);
    let refused = with("yes").expect_err("refused");
    assert_eq!(refused.report().code.code, "AF-RUN-044");
}
