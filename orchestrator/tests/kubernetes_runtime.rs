//! The Kubernetes runtime against a real cluster: the one `AF_KUBE_CONTEXT` names (KUBECONFIG
//! the file), or else the project's own local cluster (`fixtures/k8s-local`), which the first
//! test starts. Without a cluster these tests fail; none passes having proved nothing.
//!
//! On the local test cluster, whose CNI stores NetworkPolicy and enforces none, the correct
//! outcome of `af up` is AF-RUN-043 naming every route that got out, each seen arriving at
//! the test's own host, with no sidecar and no service started, and `af down` leaving nothing.

#[path = "support/binaries.rs"]
mod binaries;
mod cluster;

use std::collections::BTreeMap;

use bollard::Docker;
use bollard::query_parameters::ListContainersOptionsBuilder;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Pod};
use k8s_openapi::api::networking::v1::NetworkPolicy;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};

use cluster::World;

/// Exit statuses of the codes these tests expect (docs/errors.md).
const RUNTIME_EXIT: i32 = 4;
const TEARDOWN_EXIT: i32 = 5;

/// The pods of the namespace and the names of its containers on this machine's Docker daemon
/// (the local test cluster's kubelet runs them there).
async fn pods_and_containers(world: &World) -> (Vec<Pod>, Vec<String>) {
    let ns = world.namespace();
    let pods = Api::<Pod>::namespaced(world.client.clone(), &ns)
        .list(&ListParams::default())
        .await
        .unwrap_or_else(|e| panic!("list pods: {e}"))
        .items;
    let docker = Docker::connect_with_local_defaults().unwrap_or_else(|e| panic!("docker: {e}"));
    let filters = BTreeMap::from([(
        "label".to_owned(),
        vec![format!("io.kubernetes.pod.namespace={ns}")],
    )]);
    let options = ListContainersOptionsBuilder::default()
        .all(true)
        .filters(&filters.into_iter().collect())
        .build();
    let containers = docker
        .list_containers(Some(options))
        .await
        .unwrap_or_else(|e| panic!("docker ps: {e}"))
        .into_iter()
        .filter_map(|c| {
            let labels = c.labels.unwrap_or_default();
            Some(format!(
                "{}/{}",
                labels.get("io.kubernetes.pod.name")?,
                labels.get("io.kubernetes.container.name")?
            ))
        })
        .collect();
    (pods, containers)
}

fn is_probe(pod: &Pod) -> bool {
    pod.metadata
        .labels
        .as_ref()
        .and_then(|l| l.get("dev.antifailure.kind"))
        .map(String::as_str)
        == Some("probe")
}

#[tokio::test]
async fn a_decorative_cluster_is_refused_naming_every_route_that_got_out() {
    let world = World::new("decorative", 1).await;
    let up = world.af(&["up"], &[]).await;
    assert_eq!(up.code, RUNTIME_EXIT, "{}{}", up.stdout, up.stderr);
    assert!(up.stderr.contains("AF-RUN-043"), "{}", up.stderr);
    assert!(
        up.stderr.contains(&format!(
            "runtime kubernetes: kubeconfig context {}, API server https://",
            cluster::context()
        )),
        "af up says where it runs: {}",
        up.stderr
    );
    // Each route is named exactly when the test's host saw it arrive: the positive control
    // (something did get out, from a pod under the services' rules) and the claim together.
    let arrivals = world.hosts.arrivals();
    for (route, arrived) in &arrivals {
        assert_eq!(
            up.stderr.contains(route.as_str()),
            *arrived,
            "{route}: {}",
            up.stderr
        );
    }
    let ipv4: Vec<&(String, bool)> = arrivals
        .iter()
        .filter(|(r, _)| !r.contains("IPv6"))
        .collect();
    assert!(ipv4.iter().all(|(_, arrived)| *arrived), "{arrivals:?}");
    assert!(
        up.stderr.contains("the cluster's API server ("),
        "{}",
        up.stderr
    );
    assert!(up.stderr.contains("No sidecar and no service was started"));

    // Nothing but the probe ran.
    let (pods, containers) = pods_and_containers(&world).await;
    assert!(
        pods.iter().all(is_probe),
        "{:?}",
        pods.iter().map(|p| &p.metadata.name).collect::<Vec<_>>()
    );
    assert!(
        containers.iter().all(|c| c.starts_with("af-probe-")),
        "only probe containers ran in the namespace: {containers:?}"
    );
    assert!(
        !containers.is_empty(),
        "the probe ran on this machine's Docker daemon"
    );

    let down = world.af(&["down"], &[]).await;
    assert_eq!(down.code, 0, "{}{}", down.stdout, down.stderr);
    assert!(
        down.stdout
            .contains(&format!("removed namespace {}", world.namespace())),
        "{}",
        down.stdout
    );
    assert!(
        world.read_namespace().await.is_none(),
        "af down returned once the namespace was gone"
    );
}

#[tokio::test]
async fn up_again_reuses_the_namespace_and_its_policies() {
    let world = World::new("idempotent", 2).await;
    let snapshot = || async {
        let ns = world
            .read_namespace()
            .await
            .unwrap_or_else(|| panic!("no namespace"));
        let policies: BTreeMap<String, (String, String)> =
            Api::<NetworkPolicy>::namespaced(world.client.clone(), &world.namespace())
                .list(&ListParams::default())
                .await
                .unwrap_or_else(|e| panic!("list policies: {e}"))
                .items
                .into_iter()
                .map(|p| {
                    let m = p.metadata;
                    (
                        m.name.unwrap_or_default(),
                        (
                            m.uid.unwrap_or_default(),
                            m.resource_version.unwrap_or_default(),
                        ),
                    )
                })
                .collect();
        (ns.metadata.uid, policies)
    };
    let first = world.af(&["up"], &[]).await;
    assert_eq!(first.code, RUNTIME_EXIT, "{}", first.stderr);
    assert!(
        first
            .stderr
            .contains(&format!("namespace {} created", world.namespace())),
        "{}",
        first.stderr
    );
    assert!(
        first.stderr.contains("network policies: 5 created"),
        "{}",
        first.stderr
    );
    let before = snapshot().await;
    assert_eq!(before.1.len(), 5, "{:?}", before.1);

    let second = world.af(&["up"], &[]).await;
    assert_eq!(second.code, RUNTIME_EXIT, "{}", second.stderr);
    assert!(second.stderr.contains("AF-RUN-043"), "{}", second.stderr);
    assert!(
        second
            .stderr
            .contains(&format!("namespace {} reused", world.namespace())),
        "{}",
        second.stderr
    );
    assert!(
        second.stderr.contains("network policies: 5 reused"),
        "{}",
        second.stderr
    );
    assert_eq!(
        snapshot().await,
        before,
        "the same namespace and the same policies, unchanged"
    );

    let down = world.af(&["down"], &[]).await;
    assert_eq!(down.code, 0, "{}", down.stderr);
}

#[tokio::test]
async fn a_namespace_with_our_name_but_not_our_label_is_refused_and_left_untouched() {
    let world = World::new("foreign", 3).await;
    let namespaces = Api::<Namespace>::all(world.client.clone());
    let foreign = Namespace {
        metadata: ObjectMeta {
            name: Some(world.namespace()),
            labels: Some(BTreeMap::from([("team".to_owned(), "payments".to_owned())])),
            ..ObjectMeta::default()
        },
        ..Namespace::default()
    };
    namespaces
        .create(&PostParams::default(), &foreign)
        .await
        .unwrap_or_else(|e| panic!("create the foreign namespace: {e}"));
    let keep = ConfigMap {
        metadata: ObjectMeta {
            name: Some("keep-me".to_owned()),
            ..ObjectMeta::default()
        },
        ..ConfigMap::default()
    };
    let maps = Api::<ConfigMap>::namespaced(world.client.clone(), &world.namespace());
    maps.create(&PostParams::default(), &keep)
        .await
        .unwrap_or_else(|e| panic!("create a config map in it: {e}"));
    let before = world.read_namespace().await.map(|n| n.metadata);

    for command in ["up", "down"] {
        let ran = world.af(&[command], &[]).await;
        assert_eq!(ran.code, RUNTIME_EXIT, "af {command}: {}", ran.stderr);
        assert!(
            ran.stderr.contains("AF-RUN-045"),
            "af {command}: {}",
            ran.stderr
        );
        assert!(
            ran.stderr
                .contains(&format!("namespace {}", world.namespace())),
            "{}",
            ran.stderr
        );
    }
    let after = world.read_namespace().await.map(|n| n.metadata);
    assert_eq!(
        after
            .as_ref()
            .map(|m| (&m.uid, &m.resource_version, &m.labels)),
        before
            .as_ref()
            .map(|m| (&m.uid, &m.resource_version, &m.labels)),
        "the namespace is as it was"
    );
    let policies = Api::<NetworkPolicy>::namespaced(world.client.clone(), &world.namespace())
        .list(&ListParams::default())
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(
        policies.items.is_empty(),
        "no policy was put in somebody else's namespace"
    );
    assert!(maps.get_opt("keep-me").await.ok().flatten().is_some());
    let (pods, _) = pods_and_containers(&world).await;
    assert!(pods.is_empty(), "no probe ran in it");
}

#[tokio::test]
async fn down_waits_for_the_namespace_and_names_the_finalizer_that_holds_it() {
    let world = World::new("finalizer", 4).await;
    let up = world.af(&["up"], &[]).await;
    assert_eq!(up.code, RUNTIME_EXIT, "{}", up.stderr);
    const HOLD: &str = "dev.antifailure.test/hold";
    let maps = Api::<ConfigMap>::namespaced(world.client.clone(), &world.namespace());
    let held = ConfigMap {
        metadata: ObjectMeta {
            name: Some("held".to_owned()),
            finalizers: Some(vec![HOLD.to_owned()]),
            ..ObjectMeta::default()
        },
        ..ConfigMap::default()
    };
    maps.create(&PostParams::default(), &held)
        .await
        .unwrap_or_else(|e| panic!("create the held config map: {e}"));

    let stuck = world.af(&["down"], &[("AF_KUBE_DOWN_TIMEOUT", "10")]).await;
    assert_eq!(
        stuck.code, TEARDOWN_EXIT,
        "{}{}",
        stuck.stdout, stuck.stderr
    );
    assert!(stuck.stderr.contains("AF-RUN-030"), "{}", stuck.stderr);
    assert!(
        stuck.stdout.contains("still terminating after 10 s"),
        "{}",
        stuck.stdout
    );
    assert!(
        stuck.stdout.contains(HOLD),
        "the finalizer is named: {}",
        stuck.stdout
    );
    assert!(
        world.read_namespace().await.is_some(),
        "it is still there, terminating"
    );

    maps.patch(
        "held",
        &PatchParams::default(),
        &Patch::Merge(serde_json::json!({"metadata": {"finalizers": null}})),
    )
    .await
    .unwrap_or_else(|e| panic!("release the finalizer: {e}"));
    let down = world.af(&["down"], &[]).await;
    assert_eq!(down.code, 0, "{}{}", down.stdout, down.stderr);
    assert!(
        world.read_namespace().await.is_none(),
        "af down returned once the namespace was gone"
    );
}

/// The names of the running pods of `service` in the world's namespace, and whether each
/// passed its gate.
async fn running_pods(world: &World, service: &str) -> Vec<(String, bool)> {
    let pods: Api<Pod> = Api::namespaced(world.client.clone(), &world.namespace());
    let lp = ListParams::default().labels(&format!("dev.antifailure.service={service}"));
    pods.list(&lp)
        .await
        .unwrap_or_else(|e| panic!("list pods: {e}"))
        .items
        .into_iter()
        .filter(|p| p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running"))
        .map(|p| {
            let gate_passed = p
                .status
                .as_ref()
                .and_then(|s| s.init_container_statuses.as_ref())
                .and_then(|s| s.iter().find(|c| c.name == "af-gate"))
                .and_then(|c| c.state.as_ref()?.terminated.as_ref())
                .is_some_and(|t| t.exit_code == 0);
            (p.metadata.name.unwrap_or_default(), gate_passed)
        })
        .collect()
}

#[tokio::test]
async fn an_enforcing_cluster_passes_the_probe_and_runs_the_sidecar_then_the_services() {
    // The control in the same run: the same cluster without enforcement refuses.
    let decorative = World::new("enforced-control", 6).await;
    let refused = decorative.af(&["up"], &[]).await;
    assert_eq!(refused.code, RUNTIME_EXIT, "{}", refused.stderr);
    assert!(refused.stderr.contains("AF-RUN-043"), "{}", refused.stderr);
    let _ = decorative.af(&["down"], &[]).await;

    let world = World::enforced("enforced", 7).await;
    let up = world.af(&["up"], &[]).await;
    assert_eq!(up.code, 0, "{}{}", up.stdout, up.stderr);
    assert!(
        up.stderr.contains("network policies: 5 created"),
        "the probe ran after the policies: {}",
        up.stderr
    );
    let sidecar = running_pods(&world, "sidecar").await;
    assert_eq!(sidecar.len(), 1, "{sidecar:?}");
    let web = running_pods(&world, "web").await;
    assert_eq!(web.len(), 1, "{web:?}");
    assert!(web[0].1, "the service started after its gate passed: {web:?}");

    // A second up changes nothing.
    let again = world.af(&["up"], &[]).await;
    assert_eq!(again.code, 0, "{}{}", again.stdout, again.stderr);
    assert_eq!(running_pods(&world, "web").await, web, "the same pod");

    let down = world.af(&["down"], &[]).await;
    assert_eq!(down.code, 0, "{}{}", down.stdout, down.stderr);
    assert!(world.read_namespace().await.is_none());
}
