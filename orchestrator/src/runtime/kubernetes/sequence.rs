//! The runtime's calls, in order, against the fake API server: what is asked and made before
//! the probe, that nothing follows a probe, that a foreign namespace is never touched, and
//! that teardown waits and names what holds a namespace.

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use af_policy::egress::EgressSpec;
use af_policy::placement::{self, Runtime as Section};
use futures_util::FutureExt;
use futures_util::future::BoxFuture;
use serde_json::json;

use super::mock::{Fake, Kubelet, PodEnd};
use super::names::Names;
use super::probe::image::ProbeSource;
use super::supply::{PullCredentials, PullSecret, ServiceImage, Sources, Supplied, Supply};
use super::{ClusterId, KubeOptions, KubernetesRuntime, Timeouts};
use crate::env_id::EnvId;
use crate::plan::{EnvPlan, Kind, ServicePlan};
use crate::runtime::images::{Delivery, SidecarSource};
use crate::runtime::{DownReport, Progress, Quiet, Runtime, RuntimeError};

pub(super) const NS: &str = "/api/v1/namespaces/af-pr-42";
const POLICIES: &str = "/apis/networking.k8s.io/v1/namespaces/af-pr-42/networkpolicies";

pub(super) fn env() -> EnvId {
    EnvId::parse("pr-42").expect("id")
}

/// The fake cluster holds the environment's namespace, made by af and active.
pub(super) fn ours(fake: &Fake) {
    fake.with(|s| {
        s.objects.insert(
            NS.to_owned(),
            json!({"apiVersion": "v1", "kind": "Namespace",
                   "metadata": {"name": "af-pr-42", "labels": {
                       "dev.antifailure.managed": "true", "dev.antifailure.env": "pr-42",
                       "dev.antifailure.kind": "namespace"}},
                   "status": {"phase": "Active"}}),
        );
    });
}

pub(super) fn plan() -> EnvPlan {
    let web = ServicePlan::new("web", Kind::Web, "/x");
    EnvPlan::new(env(), "shop", vec![web], EgressSpec::default()).expect("plan")
}

pub(super) fn runtime(fake: &Fake) -> KubernetesRuntime {
    let vars: HashMap<&str, &str> = HashMap::from([
        ("AF_PROBE_DEFAULTS", "forbid"),
        ("AF_PROBE_TCP", "198.51.100.10:8443"),
        ("AF_PROBE_DNS", "198.51.100.10:5353"),
        ("AF_PROBE_METADATA", "169.254.44.10:8080"),
        ("AF_PROBE_TCP6", "[2001:db8:4b::10]:8443"),
        ("AF_PROBE_DNS6", "[2001:db8:4b::10]:5353"),
        ("AF_PROBE_METADATA6", "[2001:db8:4b::11]:8080"),
        ("AF_PROBE_IMAGE", "af-probe:test"),
        ("AF_KUBE_IMAGES", "registry"),
    ]);
    let section = Section {
        provider: Some("kubernetes".to_owned()),
        ..Section::default()
    };
    let placement = placement::place(&section).expect("placed");
    let mut options = KubeOptions::from_vars(&placement, &|k| vars.get(k).map(|v| (*v).to_owned()))
        .expect("options");
    options.timeouts = Timeouts {
        namespace: Duration::from_millis(50),
        probe: Duration::from_secs(5),
        down: Duration::from_millis(50),
        sidecar: Duration::from_millis(50),
        service: Duration::from_millis(50),
        gate: Duration::from_secs(1),
        migration: Duration::from_millis(50),
        watch: Duration::from_secs(10),
        poll: Duration::from_millis(1),
    };
    let cluster = ClusterId {
        context: "fake".to_owned(),
        server: "https://fake.test".to_owned(),
    };
    let mut rt = KubernetesRuntime::new(fake.client(), cluster, options).expect("runtime");
    rt.images = Box::new(Fixed(supplied()));
    rt
}

/// The images of [`plan`], as a registry cluster's nodes are told them; nothing is built.
pub(super) fn supplied() -> Supplied {
    let web = ServiceImage {
        reference: "registry.test/af@sha256:0b".to_owned(),
        stores: Vec::new(),
    };
    Supplied {
        pull_policy: "IfNotPresent",
        probe: "af-probe:test".to_owned(),
        sidecar: "registry.test/af@sha256:0a".to_owned(),
        services: BTreeMap::from([("web".to_owned(), web)]),
        pull_secret: None,
    }
}

/// Images supplied as they are: the call-sequence tests build and push nothing.
pub(super) struct Fixed(pub Supplied);

impl Supply for Fixed {
    fn supply<'a>(
        &'a self,
        _: &'a EnvPlan,
        _: &'a Names,
        _: &'a dyn Progress,
    ) -> BoxFuture<'a, Result<Supplied, RuntimeError>> {
        let supplied = self.0.clone();
        async move { Ok(supplied) }.boxed()
    }
}

/// The runtime with `AF_PRESERVE=1`: a failed `af up` keeps the namespace it made.
pub(super) fn preserving(fake: &Fake) -> KubernetesRuntime {
    let mut rt = runtime(fake);
    rt.options.preserve = true;
    rt
}

/// Every probe container's log line, with the ones in `open` reporting success.
pub(super) fn probe_says(fake: &Fake, open: &[&str]) {
    fake.with(|s| {
        for id in ["tcp", "metadata", "tcp6", "metadata6", "api-server"] {
            let connected = if open.contains(&id) { "true" } else { "false" };
            s.logs.insert(
                id.to_owned(),
                format!("{{\"connected\":\"{connected}\",\"error\":\"timed out\"}}"),
            );
        }
        for id in ["dns", "dns6"] {
            let answered = if open.contains(&id) { "true" } else { "false" };
            s.logs.insert(
                id.to_owned(),
                format!("{{\"answered\":\"{answered}\",\"error\":\"no answer\"}}"),
            );
        }
        // The policy lets a service reach the witness's fenced port, as a policy must.
        s.logs.insert(
            super::probe::pod::FENCED_CONTROL.to_owned(),
            "{\"connected\":\"true\"}".to_owned(),
        );
    });
}

pub(super) fn changes(calls: &[String]) -> Vec<String> {
    calls
        .iter()
        .filter(|c| !c.starts_with("GET "))
        .map(|c| match c.split_once("/pods/af-probe-") {
            Some((head, _)) => format!("{head}/pods/af-probe-*"),
            None => c.clone(),
        })
        .collect()
}

fn policy_posts(n: usize) -> Vec<String> {
    vec![format!("POST {POLICIES}"); n]
}

#[tokio::test]
async fn the_namespace_and_policies_come_before_the_probe_and_nothing_after_it() {
    let fake = Fake::new();
    probe_says(&fake, &[]);
    let rt = runtime(&fake);
    // The fake serves no cluster resolver: the first thing after the probe stops there.
    let refused = rt
        .up(&plan(), &Quiet)
        .await
        .expect_err("no resolver for the sidecar");
    assert_eq!(refused.report().code.code, "AF-RUN-044", "{refused}");
    assert!(
        refused
            .to_string()
            .contains("no resolver the sidecar can use"),
        "{refused}"
    );

    let calls = fake.calls();
    let first_change = calls
        .iter()
        .position(|c| !c.starts_with("GET "))
        .expect("a change");
    assert!(
        calls[..first_change].contains(&"GET /apis/networking.k8s.io/v1".to_owned()),
        "NetworkPolicy is asked for before anything is made: {calls:?}"
    );
    let mut expected = vec!["POST /api/v1/namespaces".to_owned()];
    expected.extend(policy_posts(5));
    // The witness, then the probe of the policy and the fenced one; all three go.
    expected.extend(vec!["POST /api/v1/namespaces/af-pr-42/pods".to_owned(); 3]);
    expected.extend(vec![
        "DELETE /api/v1/namespaces/af-pr-42/pods/af-probe-*"
            .to_owned();
        3
    ]);
    expected.push("DELETE /api/v1/namespaces/af-pr-42".to_owned());
    assert_eq!(
        changes(&calls),
        expected,
        "the namespace this failed up made goes again"
    );
}

#[tokio::test]
async fn a_registry_cluster_with_no_repository_named_is_refused_before_anything_is_made() {
    let fake = Fake::new();
    let mut rt = runtime(&fake);
    rt.images = Box::new(Sources {
        delivery: Delivery::Registry,
        repository: None,
        pull_credentials: PullCredentials::Docker,
        sidecar: SidecarSource::Lookup,
        probe: ProbeSource::Image("af-probe:test".to_owned()),
    });
    let refused = rt.up(&plan(), &Quiet).await.expect_err("refused");
    let report = refused.report();
    assert_eq!(report.code.code, "AF-RUN-013", "{report:?}");
    assert!(
        report.statement.contains("nothing was created"),
        "{report:?}"
    );
    assert!(report.next.contains("AF_IMAGE_REPOSITORY"), "{report:?}");
    assert_eq!(changes(&fake.calls()), Vec::<String>::new(), "nothing made");
}

#[tokio::test]
async fn a_pull_secret_is_made_and_given_to_every_pod_before_the_probe() {
    let fake = Fake::new();
    probe_says(&fake, &[]);
    let mut rt = preserving(&fake);
    let mut images = supplied();
    images.pull_secret = Some(PullSecret(br#"{"auths":{}}"#.to_vec()));
    rt.images = Box::new(Fixed(images));
    let _ = rt.up(&plan(), &Quiet).await;

    let calls = changes(&fake.calls());
    let at = |call: &str| calls.iter().position(|c| c == call);
    let secret = at(&format!("POST {NS}/secrets")).expect("the secret made");
    let account = at(&format!("PATCH {NS}/serviceaccounts/default")).expect("the account");
    let probe = at(&format!("POST {NS}/pods")).expect("the probe");
    assert!(secret < account && account < probe, "{calls:?}");
    fake.with(|s| {
        let made = &s.objects[&format!("{NS}/secrets/af-registry")];
        assert_eq!(made["type"], "kubernetes.io/dockerconfigjson");
        let account = &s.objects[&format!("{NS}/serviceaccounts/default")];
        assert_eq!(
            account["imagePullSecrets"],
            json!([{"name": "af-registry"}])
        );
        assert!(
            !s.objects
                .keys()
                .any(|k| k.ends_with("/af-pull-secret-trial")),
            "the admission trial is a dry run"
        );
    });
}

#[tokio::test]
async fn the_default_deny_is_the_first_policy_applied() {
    let fake = Fake::new();
    probe_says(&fake, &[]);
    let _ = runtime(&fake).up(&plan(), &Quiet).await;
    let first = fake
        .calls()
        .into_iter()
        .find(|c| c.starts_with(&format!("GET {POLICIES}/")));
    assert_eq!(first, Some(format!("GET {POLICIES}/af-default-deny")));
}

#[tokio::test]
async fn routes_that_got_out_refuse_with_043_naming_each_and_nothing_follows() {
    let fake = Fake::new();
    probe_says(&fake, &["tcp", "dns", "metadata", "api-server"]);
    let refused = runtime(&fake)
        .up(&plan(), &Quiet)
        .await
        .expect_err("refused");
    let report = refused.report();
    assert_eq!(report.code.code, "AF-RUN-043");
    for named in [
        "direct TCP to a public address (198.51.100.10:8443)",
        "UDP DNS straight to a public resolver (198.51.100.10:5353)",
        "the metadata endpoint (169.254.44.10:8080)",
        "the cluster's API server (10.96.0.1:443)",
    ] {
        assert!(
            report.statement.contains(named),
            "{named}: {}",
            report.statement
        );
    }
    assert!(
        !report.statement.contains("over IPv6"),
        "{}",
        report.statement
    );
    assert!(
        report
            .statement
            .contains("No sidecar and no service was started")
    );
    let after_probe: Vec<String> = changes(&fake.calls())
        .into_iter()
        .skip_while(|c| !c.ends_with("/pods"))
        .skip(1)
        .collect();
    assert_eq!(
        after_probe,
        [
            "POST /api/v1/namespaces/af-pr-42/pods",
            "POST /api/v1/namespaces/af-pr-42/pods",
            "DELETE /api/v1/namespaces/af-pr-42/pods/af-probe-*",
            "DELETE /api/v1/namespaces/af-pr-42/pods/af-probe-*",
            "DELETE /api/v1/namespaces/af-pr-42/pods/af-probe-*",
            "DELETE /api/v1/namespaces/af-pr-42"
        ],
        "after the witness only the two probes, then the removal of the three pods and of the namespace this up made"
    );
    assert!(
        report.statement.ends_with(
            "The namespace af-pr-42 this `af up` made was removed again (AF_PRESERVE=1 keeps it for inspection)."
        ),
        "{}",
        report.statement
    );
    assert!(!fake.with(|s| s.objects.contains_key(NS)), "removed");
}

#[tokio::test]
async fn a_probe_that_cannot_run_answers_nothing_and_is_refused() {
    let fake = Fake::new();
    fake.with(|s| s.pods = PodEnd::Stuck("CreateContainerError"));
    let refused = runtime(&fake)
        .up(&plan(), &Quiet)
        .await
        .expect_err("refused");
    let report = refused.report();
    assert_eq!(report.code.code, "AF-RUN-043");
    assert!(
        report.statement.contains("could not be answered"),
        "{}",
        report.statement
    );
    assert!(
        report.statement.contains("CreateContainerError"),
        "{}",
        report.statement
    );
}

#[tokio::test]
async fn an_image_the_nodes_cannot_pull_is_named_with_what_the_kubelet_said() {
    let fake = Fake::new();
    let said = "Failed to pull image \"af-probe:test\": rpc error: code = Unknown desc = Error response from daemon: unauthorized: authentication required";
    fake.with(|s| {
        s.pods = PodEnd::Stuck("ImagePullBackOff");
        s.objects.insert(
            format!("{NS}/events/pull-1"),
            json!({"apiVersion": "v1", "kind": "Event",
                   "metadata": {"name": "pull-1", "namespace": "af-pr-42"},
                   "involvedObject": {"kind": "Pod", "name": "whichever"},
                   "reason": "Failed", "message": said,
                   "lastTimestamp": "2026-12-01T00:00:00Z"}),
        );
    });
    let refused = runtime(&fake)
        .up(&plan(), &Quiet)
        .await
        .expect_err("refused");
    let report = refused.report();
    assert_eq!(report.code.code, "AF-RUN-012", "{report:?}");
    assert!(
        report
            .statement
            .contains("could not pull af-probe:test for probe"),
        "{}",
        report.statement
    );
    assert!(
        report
            .statement
            .contains("unauthorized: authentication required"),
        "the kubelet's event, not only ImagePullBackOff: {}",
        report.statement
    );
    assert!(
        report.next.contains("AF_IMAGE_PULL_CREDENTIALS"),
        "{report:?}"
    );
}

#[tokio::test]
async fn a_foreign_namespace_is_refused_by_up_and_down_and_nothing_is_touched() {
    let fake = Fake::new();
    fake.with(|s| {
        s.objects.insert(
            NS.to_owned(),
            json!({"apiVersion": "v1", "kind": "Namespace",
                   "metadata": {"name": "af-pr-42", "labels": {"team": "payments"}}}),
        );
    });
    let rt = runtime(&fake);
    for refused in [
        rt.up(&plan(), &Quiet).await.expect_err("up refused"),
        rt.down(&env(), &Quiet).await.expect_err("down refused"),
    ] {
        assert!(matches!(
            refused,
            RuntimeError::NotOurs {
                class: "namespace",
                ..
            }
        ));
        assert_eq!(refused.report().code.code, "AF-RUN-045");
    }
    assert_eq!(
        changes(&fake.calls()),
        Vec::<String>::new(),
        "nothing was changed"
    );
}

#[tokio::test]
async fn a_probe_never_governed_names_the_missing_policy_layer_and_aims_nothing_outside() {
    let fake = Fake::new();
    fake.with(|s| {
        for id in [
            "tcp",
            "dns",
            "metadata",
            "tcp6",
            "dns6",
            "metadata6",
            "api-server",
        ] {
            s.logs.insert(
                id.to_owned(),
                r#"{"governed":"false","route":"TCP to 10.244.0.99:9901 got out"}"#.to_owned(),
            );
        }
    });
    let refused = runtime(&fake)
        .up(&plan(), &Quiet)
        .await
        .expect_err("refused");
    let report = refused.report();
    assert_eq!(report.code.code, "AF-RUN-043");
    assert!(
        report.statement.contains(
            "the NetworkPolicy layer is not in force: the pod was never governed (TCP to 10.244.0.99:9901 got out), so nothing was aimed outside"
        ),
        "{}",
        report.statement
    );
    assert!(
        !report.statement.contains("got out: direct TCP"),
        "{}",
        report.statement
    );
}

#[tokio::test]
async fn admission_that_refuses_the_fence_is_named_as_the_pod_layer_refused() {
    let fake = Fake::new();
    probe_says(&fake, &[]);
    fake.with(|s| s.refused_init = Some(super::deploy::services::FENCE));
    let refused = runtime(&fake)
        .up(&plan(), &Quiet)
        .await
        .expect_err("refused");
    let report = refused.report();
    assert_eq!(report.code.code, "AF-RUN-043", "{}", report.statement);
    assert!(
        report.statement.contains(
            "the pod layer could not be set: the cluster's admission refused a pod whose `af-fence` init container holds NET_ADMIN (pods is forbidden: violates PodSecurity"
        ),
        "{}",
        report.statement
    );
}

#[tokio::test]
async fn up_again_reuses_the_namespace_and_policies_and_replaces_what_changed() {
    let fake = Fake::new();
    probe_says(&fake, &[]);
    let rt = preserving(&fake);
    let _ = rt.up(&plan(), &Quiet).await;
    let stale = json!({"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
        "metadata": {"name": "af-old", "namespace": "af-pr-42", "resourceVersion": "1",
            "labels": {"dev.antifailure.managed": "true", "dev.antifailure.env": "pr-42",
                       "dev.antifailure.kind": "network-policy"}},
        "spec": {"podSelector": {}}});
    fake.with(|s| {
        s.calls.clear();
        s.objects.insert(format!("{POLICIES}/af-old"), stale);
        let changed = s
            .objects
            .get_mut(&format!("{POLICIES}/af-sidecar-egress"))
            .expect("policy");
        changed["metadata"]["labels"]["dev.antifailure.config"] = json!("edited");
    });
    let _ = rt.up(&plan(), &Quiet).await;
    let calls = changes(&fake.calls());
    assert_eq!(
        calls,
        [
            format!("PUT {POLICIES}/af-sidecar-egress"),
            format!("DELETE {POLICIES}/af-old"),
            "POST /api/v1/namespaces/af-pr-42/pods".to_owned(),
            "POST /api/v1/namespaces/af-pr-42/pods".to_owned(),
            "POST /api/v1/namespaces/af-pr-42/pods".to_owned(),
            "DELETE /api/v1/namespaces/af-pr-42/pods/af-probe-*".to_owned(),
            "DELETE /api/v1/namespaces/af-pr-42/pods/af-probe-*".to_owned(),
            "DELETE /api/v1/namespaces/af-pr-42/pods/af-probe-*".to_owned(),
        ]
    );
}

#[tokio::test]
async fn down_waits_until_the_namespace_is_gone() {
    let fake = Fake::new();
    probe_says(&fake, &[]);
    let rt = preserving(&fake);
    let _ = rt.up(&plan(), &Quiet).await;
    let report = rt.down(&env(), &Quiet).await.expect("down");
    assert_eq!(report.removed, ["namespace af-pr-42"]);
    assert!(report.failed.is_empty());
    let calls = fake.calls();
    let deleted = calls
        .iter()
        .rposition(|c| *c == format!("DELETE {NS}"))
        .expect("deleted");
    assert_eq!(
        calls.last(),
        Some(&format!("GET {NS}")),
        "it read the namespace until it was gone"
    );
    assert!(calls.len() > deleted + 1);
    assert!(fake.with(|s| !s.objects.keys().any(|k| k.contains("af-pr-42"))));
    let again = rt.down(&env(), &Quiet).await.expect("down again");
    assert!(again.removed.is_empty() && again.failed.is_empty());
}

#[tokio::test]
async fn a_namespace_held_by_finalizers_is_named_with_them() {
    let fake = Fake::new();
    probe_says(&fake, &[]);
    fake.with(|s| s.hold_namespaces = Some("dev.antifailure.test/hold"));
    let rt = preserving(&fake);
    let _ = rt.up(&plan(), &Quiet).await;
    let report = rt.down(&env(), &Quiet).await.expect("down");
    assert!(report.removed.is_empty());
    let [(object, why)] = report.failed.as_slice() else {
        panic!("{:?}", report.failed);
    };
    assert_eq!(object, "namespace af-pr-42");
    assert!(why.contains("still terminating after"), "{why}");
    assert!(why.contains("finalizers kubernetes"), "{why}");
    assert!(why.contains("dev.antifailure.test/hold"), "{why}");
    let refused = RuntimeError::TeardownIncomplete(report.failed).report();
    assert_eq!(refused.code.code, "AF-RUN-030");
}

#[tokio::test]
async fn a_pod_whose_containers_stopped_but_its_kubelet_holds_is_let_go_with_grace_0() {
    let (fake, report) = down_with_a_pod_held(Kubelet::HoldsStopped).await;
    assert!(report.failed.is_empty(), "{:?}", report.failed);
    let [pod, namespace] = report.removed.as_slice() else {
        panic!("{:?}", report.removed);
    };
    assert!(
        pod.starts_with("pod web-1 (its containers had stopped;"),
        "{pod}"
    );
    assert!(pod.ends_with("removed with grace 0)"), "{pod}");
    assert_eq!(namespace, "namespace af-pr-42");
    assert!(fake.with(|s| !s.objects.keys().any(|k| k.contains("af-pr-42"))));
}

#[tokio::test]
async fn a_pod_still_running_past_its_deletion_is_never_forced_and_is_named() {
    let (fake, report) = down_with_a_pod_held(Kubelet::HoldsRunning).await;
    assert_eq!(report.removed, Vec::<String>::new());
    let [(object, why)] = report.failed.as_slice() else {
        panic!("{:?}", report.failed);
    };
    assert_eq!(object, "namespace af-pr-42");
    assert!(why.contains("Some resources are remaining: pods"), "{why}");
    assert!(
        why.contains("pod web-1 on node-1: app still running"),
        "{why}"
    );
    assert!(
        fake.with(|s| s.objects.contains_key(&format!("{NS}/pods/web-1"))),
        "a pod still running was not removed"
    );
}

/// `af down` of an environment whose service pod `web-1` the kubelet holds as `kubelet` says.
async fn down_with_a_pod_held(kubelet: Kubelet) -> (Fake, DownReport) {
    let fake = Fake::new();
    probe_says(&fake, &[]);
    fake.with(|s| s.kubelet = kubelet);
    let rt = preserving(&fake);
    let _ = rt.up(&plan(), &Quiet).await;
    a_pod_runs(&fake, "web-1");
    let report = rt.down(&env(), &Quiet).await.expect("down");
    (fake, report)
}

/// A service's pod running in the environment's namespace on `node-1`.
fn a_pod_runs(fake: &Fake, name: &str) {
    fake.with(|s| {
        s.objects.insert(
            format!("{NS}/pods/{name}"),
            json!({"apiVersion": "v1", "kind": "Pod",
                   "metadata": {"name": name, "namespace": "af-pr-42"},
                   "spec": {"nodeName": "node-1", "containers": [{"name": "app"}]},
                   "status": {"phase": "Running", "containerStatuses": [{
                       "name": "app", "image": "", "imageID": "", "ready": true,
                       "restartCount": 0, "state": {"running": {}}}]}}),
        )
    });
}

#[tokio::test]
async fn a_cluster_without_network_policy_is_refused_before_anything_is_made() {
    let fake = Fake::new();
    fake.with(|s| s.serves_network_policy = false);
    let refused = runtime(&fake)
        .up(&plan(), &Quiet)
        .await
        .expect_err("refused");
    assert_eq!(refused.report().code.code, "AF-RUN-044");
    assert!(
        refused
            .to_string()
            .contains("does not serve networking.k8s.io/v1 NetworkPolicy")
    );
    assert_eq!(changes(&fake.calls()), Vec::<String>::new());
}

#[tokio::test]
async fn status_and_inventory_find_the_namespace_and_what_carries_our_labels() {
    let fake = Fake::new();
    probe_says(&fake, &[]);
    let rt = preserving(&fake);
    assert!(!rt.status(&env()).await.expect("status").exists);
    let _ = rt.up(&plan(), &Quiet).await;
    assert!(rt.status(&env()).await.expect("status").exists);
    let found: Vec<(&str, String)> = rt
        .inventory(&env())
        .await
        .expect("inventory")
        .into_iter()
        .map(|o| (o.class, o.name))
        .collect();
    let expect = |class: &'static str, name: &str| (class, name.to_owned());
    assert_eq!(
        found,
        [
            expect("namespace", "af-pr-42"),
            expect("networkpolicy", "af-default-deny"),
            expect("networkpolicy", "af-services-egress"),
            expect("networkpolicy", "af-services-ingress"),
            expect("networkpolicy", "af-sidecar-egress"),
            expect("networkpolicy", "af-sidecar-ingress"),
        ],
        "the probe's pod is gone; nothing else is there"
    );
}

#[tokio::test]
async fn up_waits_for_a_namespace_still_terminating_and_names_the_knob_when_it_stays() {
    let fake = Fake::new();
    probe_says(&fake, &[]);
    fake.with(|s| s.hold_namespaces = Some("dev.antifailure.test/hold"));
    let rt = runtime(&fake);
    let _ = rt.up(&plan(), &Quiet).await;
    let _ = rt.down(&env(), &Quiet).await;
    fake.with(|s| s.calls.clear());
    let refused = rt.up(&plan(), &Quiet).await.expect_err("still terminating");
    let report = refused.report();
    assert_eq!(report.code.code, "AF-RUN-020", "{refused}");
    assert!(
        report.statement.contains("terminating"),
        "{}",
        report.statement
    );
    assert!(
        report.next.contains("AF_KUBE_NAMESPACE_TIMEOUT"),
        "{}",
        report.next
    );
    assert!(
        !fake.calls().iter().any(|c| c.starts_with("POST ")),
        "nothing is made while the old namespace goes"
    );
}
