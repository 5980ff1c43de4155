//! The Kubernetes runtime against a real cluster: the one `AF_KUBE_CONTEXT` names (KUBECONFIG
//! the file), or else the project's own local cluster (`fixtures/k8s-local`), which the first
//! test starts. Without a cluster these tests fail; none passes having proved nothing.
//!
//! On the local test cluster, whose CNI stores NetworkPolicy and enforces none, the correct
//! outcome of `af up` is AF-RUN-043 naming the NetworkPolicy layer as not in force, found
//! inside the environment (the probe's witness reached on the port the policy refuses) before
//! anything was aimed outside: nothing arrives at the test's own hosts. No sidecar and no
//! service is started, and `af down` leaves nothing.
//! Reaching an environment (admin API by port-forward, logs, exec) is proven on pods the test
//! makes itself in a namespace of its own, a busybox standing in for the sidecar.

mod cluster;
mod process;

use std::collections::BTreeMap;
use std::time::Duration;

use af_orchestrator::env_id::EnvId;
use af_orchestrator::runtime::kubernetes::cluster::ClusterId;
use af_orchestrator::runtime::kubernetes::names::{self as kube_names, Names, kind};
use af_orchestrator::runtime::kubernetes::{KubeOptions, KubernetesRuntime, namespace, selection};
use af_orchestrator::runtime::{Runtime, RuntimeError, labels};
use af_policy::placement;
use bollard::Docker;
use bollard::query_parameters::ListContainersOptionsBuilder;
use futures_util::StreamExt;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Pod, Secret, ServiceAccount};
use k8s_openapi::api::networking::v1::NetworkPolicy;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};

use cluster::World;
use process::in_terminal;

/// Exit statuses of the codes these tests expect (docs/errors.md).
const RUNTIME_EXIT: i32 = 4;
const TEARDOWN_EXIT: i32 = 5;
/// The local test cluster's busybox (`fixtures/k8s-local/05-images.sh`), on the node already.
const BUSYBOX: &str = "local/busybox:1.35";

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
async fn a_decorative_cluster_is_refused_before_the_probe_aims_anything_outside() {
    let world = World::new("decorative", 1).await;
    // Kept, so that what ran in it can be looked at.
    let up = world.af(&["up"], &[("AF_PRESERVE", "1")]).await;
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
    // The positive control: the probe ran under the services' rules and reached the witness's
    // port those rules refuse, so the policy is not in force ...
    assert!(
        up.stderr.contains(
            "the NetworkPolicy layer is not in force: the pod was never governed (TCP to "
        ),
        "{}",
        up.stderr
    );
    assert!(up.stderr.contains(":9901 got out)"), "{}", up.stderr);
    // Each pod's own fence held there: the pod layer is not named.
    assert!(!up.stderr.contains("the pod layer"), "{}", up.stderr);
    // ... and so nothing was aimed outside: none of the test's hosts saw anything arrive.
    let arrivals = world.hosts.arrivals();
    assert!(
        arrivals.iter().all(|(_, arrived)| !*arrived),
        "the probe aimed outside before its pod was governed: {arrivals:?}"
    );
    assert!(!up.stderr.contains("got out: direct TCP"), "{}", up.stderr);
    assert!(up.stderr.contains("No sidecar and no service was started"));
    assert!(
        up.stderr
            .contains("is kept for inspection (AF_PRESERVE=1); `af down` removes it."),
        "{}",
        up.stderr
    );

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
    let first = world.af(&["up"], &[("AF_PRESERVE", "1")]).await;
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
            .contains("was there before this `af up` and stays; `af down` removes it."),
        "{}",
        second.stderr
    );
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
    let up = world.af(&["up"], &[("AF_PRESERVE", "1")]).await;
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
    assert!(
        refused.stderr.contains(&format!(
            "The namespace {} this `af up` made was removed again",
            decorative.namespace()
        )),
        "{}",
        refused.stderr
    );
    assert!(decorative.read_namespace().await.is_none(), "removed");

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
    assert!(
        web[0].1,
        "the service started after its gate passed: {web:?}"
    );

    // A second up changes nothing.
    let again = world.af(&["up"], &[]).await;
    assert_eq!(again.code, 0, "{}{}", again.stdout, again.stderr);
    assert_eq!(running_pods(&world, "web").await, web, "the same pod");

    // `af status` names each, and where the journal is: the local cluster has a default
    // StorageClass (fixtures/k8s-local/04-start.sh), so a claim.
    let status = world.af(&["status"], &[]).await;
    assert_eq!(status.code, 0, "{}{}", status.stdout, status.stderr);
    assert!(status.stdout.contains("✓ sidecar"), "{}", status.stdout);
    assert!(status.stdout.contains("✓ web"), "{}", status.stdout);
    assert!(
        status.stdout.contains(
            "journal: PersistentVolumeClaim af-sidecar-journal (kept when the sidecar is restarted or replaced"
        ),
        "{}",
        status.stdout
    );

    // `af ls` finds it on the manifest's cluster, running, with where it was made from.
    let listed = world.af_ls(&["-o", "json"]).await;
    assert_eq!(listed.code, 0, "{}{}", listed.stdout, listed.stderr);
    let listed: serde_json::Value =
        serde_json::from_str(&listed.stdout).unwrap_or_else(|e| panic!("{e}: {}", listed.stdout));
    let ours = listed["environments"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|e| e["env"] == world.env.as_str() && e["runtime"] == "kubernetes")
        .unwrap_or_else(|| panic!("{} in {listed}", world.env));
    let repository = std::fs::canonicalize(world.dir()).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        (
            &ours["context"],
            &ours["state"],
            &ours["project"],
            &ours["repository"]
        ),
        (
            &serde_json::json!(cluster::context()),
            &serde_json::json!("running"),
            &serde_json::json!("kube-test"),
            &serde_json::json!(repository.to_string_lossy()),
        ),
        "{ours}"
    );
    assert_eq!(
        ours["services"],
        serde_json::json!([{"name": "web", "running": true}])
    );

    // A restart of the sidecar gives it a new pod, Ready when the restart returns.
    kubernetes_runtime(&world)
        .restart_sidecar(&EnvId::parse(&world.env).unwrap_or_else(|e| panic!("{e}")))
        .await
        .unwrap_or_else(|e| panic!("{}", e.report()));
    let restarted = running_pods(&world, "sidecar").await;
    assert_eq!(restarted.len(), 1, "{restarted:?}");
    assert_ne!(
        restarted[0].0, sidecar[0].0,
        "a new pod, running: {restarted:?}"
    );

    let down = world.af(&["down"], &[]).await;
    assert_eq!(down.code, 0, "{}{}", down.stdout, down.stderr);
    assert!(world.read_namespace().await.is_none());
    let listed = world.af_ls(&[]).await;
    assert!(
        listed.code == 0 && !listed.stdout.contains(&world.env),
        "after af down: {}{}",
        listed.stdout,
        listed.stderr
    );
}

/// The token the stand-in sidecar's document holds.
const INSPECT_TOKEN: &str = "inspect-test-token-0123456789";

/// A pod of the environment labelled as `service`'s (`sidecar` for the sidecar), running the
/// cluster's busybox under `script`, Ready when `ready` (a shell test) passes.
fn workload_pod(names: &Names, name: &str, service: &str, script: &str, ready: &str) -> Pod {
    let kind = if service == "sidecar" {
        kind::SIDECAR
    } else {
        kind::SERVICE
    };
    let mut labels = names.labels(kind);
    labels.insert(labels::SERVICE.to_owned(), service.to_owned());
    serde_json::from_value(serde_json::json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "labels": labels},
        "spec": {
            "terminationGracePeriodSeconds": 0,
            "automountServiceAccountToken": false,
            "containers": [{
                "name": selection::container_of(service),
                "image": BUSYBOX,
                "imagePullPolicy": "Never",
                "command": ["sh", "-c", script],
                "readinessProbe": {"exec": {"command": ["sh", "-c", ready]}, "periodSeconds": 1},
            }],
        },
    }))
    .unwrap_or_else(|e| panic!("pod {name}: {e}"))
}

/// A stand-in sidecar: busybox's httpd on the pod's loopback at the admin port, its
/// `/healthz` a file holding `said`.
fn stand_in_sidecar(names: &Names, name: &str, said: &str) -> Pod {
    let script = format!(
        "mkdir -p /www && echo {said} > /www/healthz && echo sidecar {said} serving && exec httpd -f -p 127.0.0.1:9901 -h /www"
    );
    workload_pod(
        names,
        name,
        "sidecar",
        &script,
        "wget -q -O /dev/null http://127.0.0.1:9901/healthz",
    )
}

/// Wait until `name` is Ready, or fail.
async fn wait_ready(pods: &Api<Pod>, name: &str) {
    for _ in 0..120 {
        let pod = pods.get_opt(name).await.unwrap_or_else(|e| panic!("{e}"));
        if pod.as_ref().is_some_and(|p| {
            selection::usable(
                p,
                selection::container_of(service_of(p)),
                selection::Need::Ready,
            )
        }) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let pod = pods.get_opt(name).await.ok().flatten();
    panic!(
        "pod {name} was not ready within 60 s: {:?}",
        pod.and_then(|p| p.status)
    );
}

fn service_of(pod: &Pod) -> &str {
    pod.metadata
        .labels
        .as_ref()
        .and_then(|l| l.get(labels::SERVICE))
        .map_or("", String::as_str)
}

/// `GET path` on `addr`: the status and body.
async fn get(addr: std::net::SocketAddr, path: &str) -> (u16, String) {
    let stream = tokio::net::TcpStream::connect(addr)
        .await
        .unwrap_or_else(|e| panic!("connect {addr}: {e}"));
    let (mut sender, conn) =
        hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(stream))
            .await
            .unwrap_or_else(|e| panic!("handshake: {e}"));
    tokio::spawn(conn);
    let request = hyper::Request::get(path)
        .header("host", addr.to_string())
        .body(http_body_util::Empty::<bytes::Bytes>::new())
        .unwrap_or_else(|e| panic!("{e}"));
    let response = tokio::time::timeout(Duration::from_secs(20), sender.send_request(request))
        .await
        .unwrap_or_else(|_| panic!("GET {path} through {addr}: no answer in 20 s"))
        .unwrap_or_else(|e| panic!("GET {path} through {addr}: {e}"));
    let status = response.status().as_u16();
    let body = http_body_util::BodyExt::collect(response.into_body())
        .await
        .unwrap_or_else(|e| panic!("{e}"))
        .to_bytes();
    (status, String::from_utf8_lossy(&body).into_owned())
}

async fn read_logs(
    runtime: &KubernetesRuntime,
    env: &EnvId,
    service: Option<&str>,
    tail: Option<usize>,
) -> Vec<(String, String)> {
    runtime
        .logs(env, service, false, tail)
        .await
        .unwrap_or_else(|e| panic!("logs {service:?}: {}", e.report()))
        .map(|l| {
            let l = l.unwrap_or_else(|e| panic!("a log line: {}", e.report()));
            (l.service, l.line)
        })
        .collect()
        .await
}

/// The runtime under test, in this process, on the harness's client.
fn kubernetes_runtime(world: &World) -> KubernetesRuntime {
    let section = placement::Runtime {
        provider: Some("kubernetes".to_owned()),
        kubeconfig_context: Some(cluster::context()),
        namespace_prefix: Some(world.prefix().to_owned()),
        ..placement::Runtime::default()
    };
    let placed = placement::place(&section).unwrap_or_else(|e| panic!("{e}"));
    let options = KubeOptions::from_vars(&placed, &|_| None).unwrap_or_else(|e| panic!("{e:?}"));
    let id = ClusterId {
        context: cluster::context(),
        server: "(the harness's client)".to_owned(),
    };
    KubernetesRuntime::new(world.client.clone(), id, options).unwrap_or_else(|e| panic!("{e:?}"))
}

#[tokio::test]
async fn the_sidecars_admin_api_its_logs_and_a_services_shell_are_reached_through_the_api_server() {
    let world = World::new("inspect", 9).await;
    let env = EnvId::parse(&world.env).unwrap_or_else(|e| panic!("{e:?}"));
    let names = Names::new(kube_names::DEFAULT_PREFIX, &env);
    let runtime = kubernetes_runtime(&world);
    let refused = runtime.admin(&env).await.map(|_| ());
    assert!(
        matches!(refused, Err(RuntimeError::NoEnvironment(_))),
        "before the namespace exists: {refused:?}"
    );

    // The environment as `af up` leaves it, made by hand: namespace, the sidecar's Secret, a
    // stand-in sidecar and one service, all with our labels. Nothing else is aimed at.
    Api::<Namespace>::all(world.client.clone())
        .create(&PostParams::default(), &namespace::render(&names, &[]))
        .await
        .unwrap_or_else(|e| panic!("create the namespace: {e}"));
    let ns = names.namespace();
    let accounts = Api::<ServiceAccount>::namespaced(world.client.clone(), ns);
    for _ in 0..60 {
        if accounts.get_opt("default").await.ok().flatten().is_some() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let pods = Api::<Pod>::namespaced(world.client.clone(), ns);
    pods.create(
        &PostParams::default(),
        &stand_in_sidecar(&names, "af-sidecar-one", "first"),
    )
    .await
    .unwrap_or_else(|e| panic!("create the sidecar pod: {e}"));
    pods.create(
        &PostParams::default(),
        &workload_pod(
            &names,
            "web",
            "web",
            "echo web line 1; echo web line 2; exec sleep 3600",
            "true",
        ),
    )
    .await
    .unwrap_or_else(|e| panic!("create the web pod: {e}"));
    wait_ready(&pods, "af-sidecar-one").await;
    wait_ready(&pods, "web").await;

    let no_secret = runtime.admin(&env).await.map(|_| ());
    assert!(
        matches!(&no_secret, Err(RuntimeError::AdminUnreachable(m)) if m.contains("af-sidecar-config") && m.contains("af up")),
        "without the sidecar's Secret: {no_secret:?}"
    );
    let mut secret_labels = names.labels(kind::SIDECAR);
    secret_labels.insert(labels::SERVICE.to_owned(), "sidecar".to_owned());
    let secret: Secret = serde_json::from_value(serde_json::json!({
        "apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": kube_names::SIDECAR_CONFIG, "labels": secret_labels},
        "stringData": {
            kube_names::SIDECAR_CONFIG_KEY: serde_json::json!({"admin": {"token": INSPECT_TOKEN}}).to_string()
        },
    }))
    .unwrap_or_else(|e| panic!("{e}"));
    Api::<Secret>::namespaced(world.client.clone(), ns)
        .create(&PostParams::default(), &secret)
        .await
        .unwrap_or_else(|e| panic!("create the Secret: {e}"));

    // The admin API: a real HTTP request through the endpoint reaches the pod's loopback.
    let endpoint = runtime
        .admin(&env)
        .await
        .unwrap_or_else(|e| panic!("admin: {}", e.report()));
    assert!(endpoint.addr.ip().is_loopback(), "{}", endpoint.addr);
    assert_eq!(endpoint.token, INSPECT_TOKEN);
    af_orchestrator::admin::healthz(endpoint.addr)
        .await
        .unwrap_or_else(|e| panic!("healthz: {}", e.report()));
    assert_eq!(
        get(endpoint.addr, "/healthz").await,
        (200, "first\n".to_owned())
    );

    // The sidecar's pod replaced (a restart, a rollout): the same endpoint reaches the new one.
    pods.delete("af-sidecar-one", &DeleteParams::default().grace_period(0))
        .await
        .unwrap_or_else(|e| panic!("delete the first sidecar pod: {e}"));
    pods.create(
        &PostParams::default(),
        &stand_in_sidecar(&names, "af-sidecar-two", "second"),
    )
    .await
    .unwrap_or_else(|e| panic!("create the second sidecar pod: {e}"));
    wait_ready(&pods, "af-sidecar-two").await;
    for _ in 0..60 {
        if pods
            .get_opt("af-sidecar-one")
            .await
            .ok()
            .flatten()
            .is_none()
        {
            break;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    assert_eq!(
        get(endpoint.addr, "/healthz").await,
        (200, "second\n".to_owned()),
        "the forward found the new sidecar pod"
    );

    // Logs: one service, its tail, and every pod prefixed by its service.
    let web = |line: &str| ("web".to_owned(), line.to_owned());
    assert_eq!(
        read_logs(&runtime, &env, Some("web"), None).await,
        vec![web("web line 1"), web("web line 2")]
    );
    assert_eq!(
        read_logs(&runtime, &env, Some("web"), Some(1)).await,
        vec![web("web line 2")]
    );
    let all = read_logs(&runtime, &env, None, None).await;
    for want in [
        ("sidecar".to_owned(), "sidecar second serving".to_owned()),
        web("web line 1"),
    ] {
        assert!(all.contains(&want), "{want:?} in {all:?}");
    }
    let mut following = runtime
        .logs(&env, Some("web"), true, Some(1))
        .await
        .unwrap_or_else(|e| panic!("logs --follow: {}", e.report()));
    let first = tokio::time::timeout(Duration::from_secs(20), following.next())
        .await
        .unwrap_or_else(|_| panic!("no followed line in 20 s"));
    assert_eq!(
        first.map(|l| l.map(|l| l.line).ok()),
        Some(Some("web line 2".to_owned()))
    );
    assert!(
        tokio::time::timeout(Duration::from_secs(1), following.next())
            .await
            .is_err(),
        "a followed log stays open while the pod runs"
    );
    drop(following);

    // A command in the service: its output, apart, and its exit status.
    let argv = |words: &[&str]| words.iter().map(|w| (*w).to_owned()).collect::<Vec<_>>();
    let ran = runtime
        .exec(
            &env,
            "web",
            &argv(&["sh", "-c", "echo out; echo err >&2; exit 3"]),
        )
        .await
        .unwrap_or_else(|e| panic!("exec: {}", e.report()));
    assert_eq!(
        (ran.exit, ran.stdout.as_str(), ran.stderr.as_str()),
        (Some(3), "out\n", "err\n")
    );
    let ran = runtime
        .exec(&env, "web", &argv(&["cat", "/proc/1/cmdline"]))
        .await
        .unwrap_or_else(|e| panic!("exec: {}", e.report()));
    assert_eq!(ran.exit, Some(0), "{ran:?}");
    assert!(
        ran.stdout.contains("sleep"),
        "it ran in the web pod: {ran:?}"
    );
    // The same from the command line, through the manifest's context: the command's input,
    // its output and its status; in a terminal, with one.
    let ran = world
        .af_fed(
            &[
                "exec",
                "web",
                "--",
                "sh",
                "-c",
                "read line; echo got:$line; exit 3",
            ],
            &[],
            b"hello\n",
        )
        .await;
    assert_eq!(
        (ran.code, ran.stdout.as_str()),
        (3, "got:hello\n"),
        "{}",
        ran.stderr
    );
    let command = world.command(&["exec", "web", "--", "tty"], &[]);
    let shown = tokio::task::spawn_blocking(move || in_terminal(&command))
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(
        shown.status.success() && String::from_utf8_lossy(&shown.stdout).contains("/dev/pts/"),
        "{shown:?}"
    );

    let absent = runtime.exec(&env, "worker", &argv(&["true"])).await;
    assert!(
        matches!(&absent, Err(RuntimeError::NoService { service, .. }) if service == "worker"),
        "{absent:?}"
    );

    // The endpoint's listener goes with its last clone.
    let addr = endpoint.addr;
    let kept = endpoint.clone();
    drop(endpoint);
    assert_eq!(get(addr, "/healthz").await.0, 200, "a clone keeps it open");
    drop(kept);
    let mut closed = false;
    for _ in 0..50 {
        if tokio::net::TcpStream::connect(addr).await.is_err() {
            closed = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(
        closed,
        "nothing listens on {addr} once the endpoint is dropped"
    );
}
