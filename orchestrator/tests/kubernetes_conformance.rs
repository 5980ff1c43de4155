//! The conformance suite against the Kubernetes runtime, on a cluster that enforces
//! NetworkPolicy: the one `AF_KUBE_CONTEXT` names, or the project's own local cluster with its
//! enforcer governing the `afe-` namespaces ([`cluster::enforcer`]). Every egress behaviour
//! runs with its positive control in the same environment; none can be skipped.
//!
//! The simulated internet is this machine's: documentation-range addresses put on loopback,
//! each served by the test itself (an HTTP host per name, a resolver on port 53, a
//! link-local stand-in for the metadata endpoint), which a pod reaches through its bridge's
//! gateway. Nothing is aimed at a real address.

#[allow(dead_code, reason = "shared with the other Kubernetes tests")]
mod cluster;
#[allow(
    dead_code,
    reason = "the suite is shared with the local runtime, which runs every case"
)]
mod conformance;
#[allow(dead_code, reason = "shared with the other Kubernetes tests")]
mod process;
#[allow(dead_code, reason = "shared with the local runtime's tests")]
mod support;

use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use af_fixtures::sim;
use af_fixtures::test_resolver::TestResolver;
use af_orchestrator::containment::Containment;
use af_orchestrator::env_id::EnvId;
use af_orchestrator::lifecycle::output::Format;
use af_orchestrator::lifecycle::status;
use af_orchestrator::plan::short_digest;
use af_orchestrator::runtime::kubernetes::cluster::ClusterId;
use af_orchestrator::runtime::kubernetes::{KubeOptions, KubernetesRuntime};
use af_orchestrator::runtime::labels::{MANAGED, SERVICE};
use af_orchestrator::runtime::{Quiet, Runtime};
use af_policy::manifest::OnLoss;
use af_policy::placement::{self, Runtime as Section};
use futures_util::future::BoxFuture;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Container, Namespace, Pod, PodSpec, Secret};
use kube::api::{Api, DeleteParams, ListParams, LogParams, ObjectMeta, PostParams};
use kube::{Client, ResourceExt};
use tokio::net::TcpListener;

use cluster::enforcer;
use cluster::hosts::{self, Hosts};
use serde_json::Value;
use support::{Harness, Internet, Unconfined};

/// One test's world: the enforcing cluster, the simulated internet on its own addresses, and
/// a runtime pointed at both.
struct KubeHarness {
    runtime: KubernetesRuntime,
    prefix: &'static str,
    client: Client,
    internet: Internet,
    /// The probe's and the gates' targets (they must hold too).
    _probe_hosts: Hosts,
    _resolver: TestResolver,
    servers: Vec<tokio::task::JoinHandle<()>>,
    addrs: Vec<IpAddr>,
    probe_dir: PathBuf,
    run: String,
    envs: Mutex<Vec<EnvId>>,
}

impl KubeHarness {
    /// The world of test `test`, on `slot`'s addresses (each test its own slot, 8 to 31, none
    /// of the other Kubernetes tests' slots).
    async fn start(test: &str, slot: u8) -> KubeHarness {
        KubeHarness::start_under(test, slot, enforcer::PREFIX).await
    }

    /// The same, in namespaces under `prefix`.
    async fn start_under(test: &str, slot: u8, prefix: &'static str) -> KubeHarness {
        KubeHarness::start_with(test, slot, prefix, &[]).await
    }

    /// The same, with the runtime's variables `extra` set too.
    async fn start_with(
        test: &str,
        slot: u8,
        prefix: &'static str,
        extra: &[(&'static str, &str)],
    ) -> KubeHarness {
        enforcer::ensure();
        let bins = tokio::task::spawn_blocking(af_fixtures::cargo::static_binaries)
            .await
            .unwrap_or_else(|e| panic!("{e}"))
            .unwrap_or_else(|e| panic!("the static binaries: {e}"));
        let run = format!(
            "{}{}",
            &test[..test.len().min(6)],
            &short_digest(
                format!(
                    "{test}{}{:?}",
                    std::process::id(),
                    std::time::SystemTime::now()
                )
                .as_bytes()
            )[..4]
        );
        let base = 128 + 4 * slot;
        let v4 = |n: u8| IpAddr::V4(Ipv4Addr::new(198, 51, 100, base + n));
        let internet = Internet {
            allowed: ("api.allowed.test".to_owned(), v4(0)),
            unlisted: ("other.test".to_owned(), v4(1)),
            resolver: v4(2),
            metadata: IpAddr::V4(Ipv4Addr::new(169, 254, 44, 128 + slot)),
        };
        let addrs = vec![
            internet.allowed.1,
            internet.unlisted.1,
            internet.resolver,
            internet.metadata,
        ];
        for ip in &addrs {
            hosts::ip_addr("add", *ip, 32);
        }
        let mut servers = Vec::new();
        for (ip, name) in [
            (internet.allowed.1, "api.allowed.test"),
            (internet.unlisted.1, "other.test"),
            (internet.metadata, "metadata"),
        ] {
            for port in [80, 443] {
                servers.push(upstream(SocketAddr::new(ip, port), name).await);
            }
        }
        let resolver = TestResolver::start_at(
            SocketAddr::new(internet.resolver, 53),
            [
                (internet.allowed.0.clone(), vec![internet.allowed.1]),
                (internet.unlisted.0.clone(), vec![internet.unlisted.1]),
            ],
        )
        .await
        .unwrap_or_else(|e| panic!("resolver on {}: {e}", internet.resolver));
        let probe_hosts = Hosts::start(slot).await;

        let context = cluster::context();
        let mut vars: BTreeMap<&str, String> = probe_hosts.probe_vars().into_iter().collect();
        vars.insert(
            "AF_PROBE_BINARY",
            bins.join("af-probe").display().to_string(),
        );
        vars.insert(
            "AF_PROXY_BINARY",
            bins.join("af-proxy").display().to_string(),
        );
        vars.insert(
            "AF_UPSTREAM_RESOLVER",
            SocketAddr::new(internet.resolver, 53).to_string(),
        );
        for (name, value) in extra {
            vars.insert(name, (*value).to_owned());
        }
        let section = Section {
            provider: Some("kubernetes".to_owned()),
            kubeconfig_context: Some(context.clone()),
            namespace_prefix: Some(prefix.to_owned()),
            ..Section::default()
        };
        let placement = placement::place(&section).unwrap_or_else(|e| panic!("{e:?}"));
        let options = KubeOptions::from_vars(&placement, &|k| vars.get(k).cloned())
            .unwrap_or_else(|e| panic!("{}", e.report()));
        let client = cluster::client().await;
        let id = ClusterId {
            context,
            server: "the cluster under test".to_owned(),
        };
        let runtime = KubernetesRuntime::new(client.clone(), id, options)
            .unwrap_or_else(|e| panic!("{}", e.report()));
        KubeHarness {
            runtime,
            prefix,
            client,
            internet,
            _probe_hosts: probe_hosts,
            _resolver: resolver,
            servers,
            addrs,
            probe_dir: support::docker::probe_context(&bins, &run),
            run,
            envs: Mutex::default(),
        }
    }

    fn namespace(&self, env: &EnvId) -> String {
        format!("{}{env}", self.prefix)
    }

    /// The newest running pod of `service`.
    async fn pod(&self, env: &EnvId, service: &str) -> Option<Pod> {
        let pods: Api<Pod> = Api::namespaced(self.client.clone(), &self.namespace(env));
        let lp = ListParams::default().labels(&format!("{SERVICE}={service}"));
        let mut running: Vec<Pod> = pods
            .list(&lp)
            .await
            .ok()?
            .items
            .into_iter()
            .filter(|p| p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running"))
            .collect();
        running.sort_by_key(|p| p.creation_timestamp().map(|t| t.0));
        running.pop()
    }
}

/// The node's addresses a pod could dial it by (its bridge's gateway, its own address), those
/// this machine holds now.
fn node_addrs() -> Vec<IpAddr> {
    [Ipv4Addr::new(10, 244, 0, 1), Ipv4Addr::new(10, 250, 0, 1)]
        .into_iter()
        .filter(|ip| {
            std::process::Command::new("ip")
                .args(["-o", "addr", "show", "to", &ip.to_string()])
                .output()
                .is_ok_and(|o| !o.stdout.is_empty())
        })
        .map(IpAddr::V4)
        .collect()
}

/// A host of the simulated internet: every request answered with a body naming it.
async fn upstream(addr: SocketAddr, name: &'static str) -> tokio::task::JoinHandle<()> {
    let listener = TcpListener::bind(addr)
        .await
        .unwrap_or_else(|e| panic!("listen on {addr}: {e}"));
    tokio::spawn(async move {
        let _ = sim::serve(listener, move |seen| {
            let body = format!(
                "upstream {name} saw {} {} host={}\n",
                seen.method, seen.target, seen.host
            );
            async move { (200, "text/plain", body) }
        })
        .await;
    })
}

impl Drop for KubeHarness {
    fn drop(&mut self) {
        for s in &self.servers {
            s.abort();
        }
        for ip in &self.addrs {
            hosts::ip_addr("del", *ip, 32);
        }
        let namespaces: Vec<String> = self
            .envs
            .lock()
            .map(|e| e.iter().map(|env| self.namespace(env)).collect())
            .unwrap_or_default();
        let _ = std::fs::remove_dir_all(&self.probe_dir);
        let _ = std::thread::spawn(move || {
            let Ok(rt) = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            else {
                return;
            };
            rt.block_on(async {
                let api = Api::<Namespace>::all(cluster::client().await);
                for ns in namespaces {
                    let _ = api.delete(&ns, &DeleteParams::background()).await;
                }
            });
        })
        .join();
    }
}

impl Harness for KubeHarness {
    fn runtime(&self) -> &dyn Runtime {
        &self.runtime
    }

    fn internet(&self) -> &Internet {
        &self.internet
    }

    fn probe_context(&self) -> PathBuf {
        self.probe_dir.clone()
    }

    fn env(&self, tag: &str) -> EnvId {
        support::fresh_env('k', &self.run, tag, &self.envs)
    }

    fn service_addr<'a>(
        &'a self,
        env: &'a EnvId,
        service: &'a str,
    ) -> BoxFuture<'a, Option<IpAddr>> {
        Box::pin(async move { self.pod(env, service).await?.status?.pod_ip?.parse().ok() })
    }

    fn host_side_addrs<'a>(&'a self, _env: &'a EnvId) -> BoxFuture<'a, Vec<IpAddr>> {
        // The node as its pods see it: its bridge's gateway and the address the cluster's
        // daemons listen on (fixtures/k8s-local), each only while this machine holds it (the
        // bridge exists once a pod does): nothing is ever aimed past this machine.
        Box::pin(async {
            let node = node_addrs();
            assert_eq!(
                node.len(),
                2,
                "the node's bridge and own address are on this machine: {node:?}"
            );
            node
        })
    }

    fn plant_foreign_object<'a>(&'a self, env: &'a EnvId) -> BoxFuture<'a, String> {
        Box::pin(async move {
            let name = self.namespace(env);
            Api::<Namespace>::all(self.client.clone())
                .create(
                    &PostParams::default(),
                    &Namespace {
                        metadata: ObjectMeta {
                            name: Some(name.clone()),
                            ..ObjectMeta::default()
                        },
                        ..Namespace::default()
                    },
                )
                .await
                .unwrap_or_else(|e| panic!("plant {name}: {e}"));
            format!("namespace {name}")
        })
    }

    fn foreign_object_exists<'a>(&'a self, env: &'a EnvId) -> BoxFuture<'a, bool> {
        Box::pin(async move {
            Api::<Namespace>::all(self.client.clone())
                .get_opt(&self.namespace(env))
                .await
                .ok()
                .flatten()
                .is_some_and(|ns| !ns.labels().contains_key(MANAGED))
        })
    }

    fn service_file<'a>(
        &'a self,
        env: &'a EnvId,
        service: &'a str,
        path: &'a str,
    ) -> BoxFuture<'a, Option<Vec<u8>>> {
        // The files the runtime gives a service are ConfigMap keys its pod mounts: the file at
        // `path` is the key its Deployment's pod mounts there (the CA files at /etc/af, each
        // system store over the image's own).
        Box::pin(async move {
            let namespace = self.namespace(env);
            let deployments: Api<Deployment> = Api::namespaced(self.client.clone(), &namespace);
            let pod = deployments
                .get_opt(service)
                .await
                .ok()??
                .spec
                .template
                .spec?;
            let main = pod.containers.iter().find(|c| c.name == service)?;
            let (mount, key) = main.volume_mounts.iter().flatten().find_map(|m| {
                if m.mount_path == path {
                    Some((m, m.sub_path.clone()?))
                } else {
                    let file = path.strip_prefix(&format!("{}/", m.mount_path))?;
                    Some((m, file.to_owned()))
                }
            })?;
            let volume = pod
                .volumes
                .iter()
                .flatten()
                .find(|v| v.name == mount.name)?;
            let map_name = volume.config_map.as_ref()?.name.clone();
            let maps: Api<ConfigMap> = Api::namespaced(self.client.clone(), &namespace);
            let map = maps.get_opt(&map_name).await.ok()??;
            map.data?.get(&key).map(|text| text.clone().into_bytes())
        })
    }

    fn service_env<'a>(&'a self, env: &'a EnvId, service: &'a str) -> BoxFuture<'a, Vec<String>> {
        Box::pin(async move {
            let ns = self.namespace(env);
            let deployments: Api<Deployment> = Api::namespaced(self.client.clone(), &ns);
            let secrets: Api<Secret> = Api::namespaced(self.client.clone(), &ns);
            let Ok(Some(d)) = deployments.get_opt(service).await else {
                return Vec::new();
            };
            let Some(pod) = d.spec.template.spec else {
                return Vec::new();
            };
            let Some(container) = pod.containers.into_iter().find(|c| c.name == service) else {
                return Vec::new();
            };
            let mut out = Vec::new();
            for var in container.env.unwrap_or_default() {
                let value = match (var.value, var.value_from.and_then(|f| f.secret_key_ref)) {
                    (Some(v), _) => v,
                    (None, Some(key)) => secrets
                        .get_opt(&key.name)
                        .await
                        .ok()
                        .flatten()
                        .and_then(|s| s.data)
                        .and_then(|d| d.get(&key.key).cloned())
                        .map(|b| String::from_utf8_lossy(&b.0).into_owned())
                        .unwrap_or_default(),
                    (None, None) => String::new(),
                };
                out.push(format!("{}={value}", var.name));
            }
            out
        })
    }
}

impl KubeHarness {
    /// Run a plain pod of the test's own in the environment's namespace, from the image the
    /// runtime built for its `probe` service, with `labels` and none of af's rules otherwise
    /// (the cluster's default capabilities, no gate); its log's last line.
    async fn plain_pod(
        &self,
        env: &EnvId,
        labels: BTreeMap<String, String>,
        args: &[&str],
    ) -> Value {
        let pods: Api<Pod> = Api::namespaced(self.client.clone(), &self.namespace(env));
        let name = format!(
            "plain-{}",
            &short_digest(format!("{args:?}{:?}", std::time::SystemTime::now()).as_bytes())[..8]
        );
        let mut command = vec!["/af-probe".to_owned()];
        command.extend(args.iter().map(|a| (*a).to_owned()));
        let pod = Pod {
            metadata: ObjectMeta {
                name: Some(name.clone()),
                labels: Some(labels),
                ..ObjectMeta::default()
            },
            spec: Some(PodSpec {
                containers: vec![Container {
                    name: "probe".to_owned(),
                    image: Some(format!("af/{env}/probe:latest")),
                    image_pull_policy: Some("Never".to_owned()),
                    command: Some(command),
                    ..Container::default()
                }],
                restart_policy: Some("Never".to_owned()),
                ..PodSpec::default()
            }),
            status: None,
        };
        pods.create(&PostParams::default(), &pod)
            .await
            .unwrap_or_else(|e| panic!("plain pod: {e}"));
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(90);
        loop {
            let phase = pods
                .get_opt(&name)
                .await
                .ok()
                .flatten()
                .and_then(|p| p.status?.phase);
            if matches!(phase.as_deref(), Some("Succeeded" | "Failed")) {
                break;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "the plain pod did not finish ({phase:?})"
            );
            tokio::time::sleep(std::time::Duration::from_millis(500)).await;
        }
        let log = pods
            .logs(&name, &LogParams::default())
            .await
            .unwrap_or_else(|e| panic!("plain pod's log: {e}"));
        let _ = pods.delete(&name, &DeleteParams::background()).await;
        let line = log.lines().last().unwrap_or_default();
        serde_json::from_str(line).unwrap_or_else(|e| panic!("{line:?}: {e}"))
    }
}

impl Unconfined for KubeHarness {
    fn unconfined_probe<'a>(&'a self, env: &'a EnvId, args: &'a [&'a str]) -> BoxFuture<'a, Value> {
        Box::pin(self.plain_pod(env, BTreeMap::new(), args))
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn allowed_host_is_reached_through_the_proxy() {
    let h = KubeHarness::start("allowed", 8).await;
    conformance::allowed_host_is_reached_through_the_proxy(&h).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn host_without_rule_is_refused_and_journaled() {
    let h = KubeHarness::start("norule", 10).await;
    conformance::host_without_rule_is_refused_and_journaled(&h).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn client_ignoring_proxy_variables_is_still_decided() {
    let h = KubeHarness::start("noproxy", 11).await;
    conformance::client_ignoring_proxy_variables_is_still_decided(&h).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn direct_connection_udp_dns_and_metadata_fail() {
    let h = KubeHarness::start("direct", 12).await;
    conformance::direct_connection_to_an_address_fails(&h).await;
    conformance::udp_dns_to_an_outside_resolver_fails(&h).await;
    conformance::metadata_address_is_unreachable(&h).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn environments_cannot_reach_each_other() {
    let h = KubeHarness::start("twoenvs", 13).await;
    conformance::environments_cannot_reach_each_other(&h).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_service_and_its_migration_cannot_open_a_raw_or_packet_socket() {
    let h = KubeHarness::start("raw", 14).await;
    conformance::escape::a_service_cannot_open_a_raw_or_packet_socket(&h).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn services_get_the_ca_bundle_and_variables_and_their_logs_are_read() {
    let h = KubeHarness::start("trust", 15).await;
    conformance::services_get_the_ca_bundle_and_variables(&h).await;
    conformance::a_client_reading_only_its_system_store_trusts_intercepted_answers(&h).await;
    conformance::logs_return_what_a_service_wrote(&h).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_failed_migration_stops_its_service_and_foreign_objects_are_refused() {
    let h = KubeHarness::start("migrate", 16).await;
    conformance::failed_migration_stops_its_service(&h).await;
    conformance::objects_of_somebody_else_are_refused(&h).await;
    conformance::status_of_an_unknown_environment_is_empty(&h).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn inbox_and_webhook_work_end_to_end_through_the_port_forward() {
    let h = KubeHarness::start("inbox", 17).await;
    conformance::inbox_and_webhook_work_end_to_end(&h).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn down_removes_everything_and_leaves_the_other_environment() {
    let h = KubeHarness::start("down", 18).await;
    conformance::down_removes_everything(&h).await;
}

/// The startup window is real (a plain pod under the services' rules, without the gate, gets
/// one UDP question to a resolver out before its policy is programmed), and the gate closes it
/// (a service made by `af up` asking the same at start is never heard): on namespaces the
/// enforcer governs 5 s late.
#[tokio::test(flavor = "multi_thread")]
async fn the_startup_window_is_real_and_a_services_gate_closes_it() {
    let h = KubeHarness::start_under("window", 19, enforcer::SLOW_PREFIX).await;
    let ip = IpAddr::V4(Ipv4Addr::new(198, 51, 100, 128 + 4 * 19 + 3));
    hosts::ip_addr("add", ip, 32);
    let listener = TestResolver::start_at(SocketAddr::new(ip, 53), [("window.test", vec![ip])])
        .await
        .unwrap_or_else(|e| panic!("resolver on {ip}: {e}"));
    let env = h.env("window");
    let mut plan = support::probe_plan(&h, &env, &["probe"]);
    plan.services[0].env.insert(
        "AF_PROBE_ASK_AT_START".to_owned(),
        format!("{ip}:53:service.window.test"),
    );
    let up = h
        .runtime()
        .up(&plan, &af_orchestrator::runtime::Quiet)
        .await;
    if let Err(e) = &up {
        hosts::ip_addr("del", ip, 32);
        panic!("up: {}", e.report());
    }
    conformance::allowed_is_reached(&h, &env, "probe").await;
    // The negative control: the same rules, no gate, asking at once.
    let labels = BTreeMap::from([("dev.antifailure.network".to_owned(), "service".to_owned())]);
    let plain = h
        .plain_pod(
            &env,
            labels,
            &["dns", &format!("{ip}:53"), "plain.window.test"],
        )
        .await;
    let asked: Vec<String> = listener.queries().into_iter().map(|(n, _)| n).collect();
    hosts::ip_addr("del", ip, 32);
    assert!(
        asked.iter().any(|n| n == "plain.window.test"),
        "the window is real: a new pod without the gate got a question out ({plain}; the resolver heard {asked:?})"
    );
    assert!(
        !asked.iter().any(|n| n == "service.window.test"),
        "the service's own question got out before its pod was governed: {asked:?}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn the_node_is_unreachable_from_a_service() {
    let h = KubeHarness::start("node", 20).await;
    // A listener on every address of this machine (the node), reachable from the node itself.
    let listener = TcpListener::bind("0.0.0.0:0")
        .await
        .unwrap_or_else(|e| panic!("listen on the node: {e}"));
    let port = listener
        .local_addr()
        .unwrap_or_else(|e| panic!("{e}"))
        .port();
    tokio::spawn(async move {
        while let Ok((s, _)) = listener.accept().await {
            drop(s);
        }
    });
    tokio::net::TcpStream::connect(("10.250.0.1", port))
        .await
        .unwrap_or_else(|e| panic!("control: the node's listener accepts on its own address: {e}"));
    conformance::host_is_unreachable_through_the_gateway(&h, port).await;
}

/// A host process on one of the node's own ports of the NodePort range. The enforcer fixture
/// lets every pod reach those before any policy, as kube-router's INPUT rule does, so no
/// NetworkPolicy closes the route: the control is a plain pod under exactly the services'
/// policies, without the pod layer, reaching the test's own listener there. Each service's own
/// fence closes it, on both of the node's addresses.
#[tokio::test(flavor = "multi_thread")]
async fn a_host_process_on_a_node_port_is_closed_by_the_pod_layer_where_networkpolicy_cannot() {
    let h = KubeHarness::start("nodeport", 27).await;
    let mut listener = None;
    for port in 31_000..31_100u16 {
        if let Ok(l) = TcpListener::bind(("0.0.0.0", port)).await {
            listener = Some((l, port));
            break;
        }
    }
    let (listener, port) =
        listener.unwrap_or_else(|| panic!("no free port of 31000-31099 on the node"));
    tokio::spawn(async move {
        while let Ok((s, _)) = listener.accept().await {
            drop(s);
        }
    });
    let env = h.env("nodeport");
    conformance::up(&h, &env, &["probe"]).await;
    conformance::allowed_is_reached(&h, &env, "probe").await;
    let labels = BTreeMap::from([("dev.antifailure.network".to_owned(), "service".to_owned())]);
    for addr in node_addrs() {
        let target = SocketAddr::new(addr, port).to_string();
        let plain = h.plain_pod(&env, labels.clone(), &["tcp", &target]).await;
        assert_eq!(
            support::field(&plain, "connected"),
            "true",
            "control: without the pod layer the node port {target} is open past NetworkPolicy: {plain}"
        );
        let v = support::probe(&h, &env, "probe", &["tcp", &target]).await;
        assert_eq!(
            support::field(&v, "connected"),
            "false",
            "a service reached the node's port {target}: {v}"
        );
    }
}

/// A prefix the enforcer does not govern ([`enforcer::PREFIX`] and its kin are the ones it
/// does): the cluster is decorative for these namespaces, as one with its enforcer stopped.
const DECORATIVE_PREFIX: &str = "afn-";

/// Each layer alone, the other taken away. With the pod layer off (the enforcer on), the
/// services' policy still refuses every route and `af up` refuses naming the pod layer; with
/// the enforcer off (a namespace it does not govern; the pod layer on), each pod's own fence
/// refuses every route and `af up` refuses naming the NetworkPolicy layer. A proof needs both.
/// Either way the test's own hosts hear nothing (the positive control that they listen is the
/// decorative cluster's own test, `kubernetes_runtime`, and the gate's).
#[tokio::test(flavor = "multi_thread")]
async fn each_layer_alone_refuses_every_route_and_up_names_the_one_missing() {
    for (test, slot, prefix, pod_layer, missing, present) in [
        (
            "nofence",
            28,
            enforcer::PREFIX,
            "off",
            "the pod layer",
            "the NetworkPolicy layer",
        ),
        (
            "nopolicy",
            30,
            DECORATIVE_PREFIX,
            "on",
            "the NetworkPolicy layer",
            "the pod layer",
        ),
    ] {
        let h =
            KubeHarness::start_with(test, slot, prefix, &[("AF_KUBE_POD_LAYER", pod_layer)]).await;
        let env = h.env(test);
        let plan = support::probe_plan(&h, &env, &["probe"]);
        let refused = h
            .runtime()
            .up(&plan, &af_orchestrator::runtime::Quiet)
            .await
            .expect_err("a proof needs both layers");
        let report = refused.report();
        assert_eq!(report.code.code, "AF-RUN-043", "{}", report.statement);
        assert!(
            report
                .statement
                .contains(&format!("{missing} is not in force")),
            "{test}: {}",
            report.statement
        );
        assert!(
            !report.statement.contains(present),
            "{test}: the layer in place is not named: {}",
            report.statement
        );
        assert!(
            !report.statement.contains("got out: "),
            "{test}: the other layer alone let a route out: {}",
            report.statement
        );
        let arrivals = h._probe_hosts.arrivals();
        assert!(
            arrivals.iter().all(|(_, arrived)| !*arrived),
            "{test}: {arrivals:?}"
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn the_journal_survives_a_sidecar_restart_on_its_claim() {
    let h = KubeHarness::start("journal", 21).await;
    conformance::journal_survives_a_sidecar_restart(&h).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_service_restarts_in_place() {
    let h = KubeHarness::start("restart", 22).await;
    conformance::a_service_restarts_in_place(&h).await;
}

/// The same cases where the cluster drops (rather than refuses) what no policy allows: the
/// probe and the gate wait out their timeouts and still decide, and nothing gets out.
#[tokio::test(flavor = "multi_thread")]
async fn a_cluster_that_drops_is_judged_as_one_that_refuses() {
    let h = KubeHarness::start_under("drop", 23, enforcer::DROP_PREFIX).await;
    conformance::direct_connection_to_an_address_fails(&h).await;
    conformance::udp_dns_to_an_outside_resolver_fails(&h).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn up_reports_services_and_is_idempotent() {
    let h = KubeHarness::start("idem", 24).await;
    conformance::up_reports_services_and_is_idempotent(&h).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn an_image_that_does_not_build_is_refused() {
    let h = KubeHarness::start("badimage", 26).await;
    let dir = std::env::temp_dir().join(format!("af-kube-broken-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("{e}"));
    std::fs::write(
        dir.join("Dockerfile"),
        "FROM scratch\nCOPY no-such-file /x\n",
    )
    .unwrap_or_else(|e| panic!("{e}"));
    conformance::an_image_that_does_not_build_is_refused(&h, dir.clone()).await;
    let _ = std::fs::remove_dir_all(dir);
}

/// The prefix governed only by the continuous proof's own enforcer, which the test stops.
const WATCHED_PREFIX: &str = "afw-";

/// `af status`'s containment verdict for `env`.
async fn containment(h: &KubeHarness, env: &EnvId) -> Containment {
    let status = status::run(h.runtime(), env, Format::Json, &mut Vec::new())
        .await
        .unwrap_or_else(|e| panic!("af status {env}: {e}"));
    status
        .containment
        .unwrap_or_else(|| panic!("af status {env} says nothing of containment"))
}

/// Wait until `af status` gives a verdict `wanted` accepts; the last verdict either way, and
/// how long it took.
async fn verdict_within(
    h: &KubeHarness,
    env: &EnvId,
    secs: u64,
    wanted: impl Fn(&Containment) -> bool,
) -> (Containment, Duration) {
    let start = Instant::now();
    loop {
        let c = containment(h, env).await;
        if wanted(&c) || start.elapsed() > Duration::from_secs(secs) {
            return (c, start.elapsed());
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

fn lost_by(c: &Containment, route: &str) -> bool {
    matches!(c, Containment::Lost { pods, .. }
        if pods.iter().any(|p| p.breaches.iter().any(|b| b.route == route)))
}

/// The pid of a pod's sandbox on this machine's Docker daemon (the local cluster's runtime):
/// its network namespace is the pod's.
fn sandbox_pid(pod: &str) -> String {
    let out = std::process::Command::new("docker")
        .args(["ps", "-q", "--filter"])
        .arg(format!("label=io.kubernetes.pod.name={pod}"))
        .args(["--filter", "label=io.kubernetes.docker.type=podsandbox"])
        .output()
        .unwrap_or_else(|e| panic!("docker ps: {e}"));
    let id = String::from_utf8_lossy(&out.stdout).trim().to_owned();
    assert!(
        !id.is_empty(),
        "no sandbox of pod {pod} on this Docker daemon"
    );
    let out = std::process::Command::new("docker")
        .args(["inspect", "-f", "{{.State.Pid}}", &id])
        .output()
        .unwrap_or_else(|e| panic!("docker inspect: {e}"));
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

/// The `probe` service's Deployment in `env`: its replicas and the keeper's annotation.
async fn probe_deployment(h: &KubeHarness, env: &EnvId) -> (Option<i32>, Option<String>) {
    let api: Api<Deployment> = Api::namespaced(h.client.clone(), &h.namespace(env));
    let d = api
        .get("probe")
        .await
        .unwrap_or_else(|e| panic!("read the probe Deployment of {env}: {e}"));
    (
        d.spec.replicas,
        d.annotations().get("dev.antifailure.stopped").cloned(),
    )
}

/// Containment proven while the environment runs, with two environments: one whose manifest
/// stops the services on a loss (the default), one that keeps them. Once every watcher of
/// both said held (the positive control: both layers in force, the watchers heard), their
/// enforcer is stopped: `af status` says LOST for each, naming the NetworkPolicy layer, within
/// three periods; the loss is journaled and counted; the first environment's keeper scales
/// its service to zero and says why, the second's keeps running. With the enforcer back, the
/// kept one holds again and `af up` restarts the stopped one, which holds again. Then one
/// pod's own rules are flushed from the node as root, and `af status` says LOST naming that
/// pod's fence.
#[tokio::test(flavor = "multi_thread")]
async fn a_running_environment_is_watched_and_a_lost_layer_is_reported_within_the_period() {
    let mut own = enforcer::OwnEnforcer::start(WATCHED_PREFIX, "watch");
    let h = KubeHarness::start_with(
        "watch",
        25,
        WATCHED_PREFIX,
        &[("AF_KUBE_WATCH_PERIOD", "2")],
    )
    .await;
    let (stops, keeps) = (h.env("stop"), h.env("keep"));
    conformance::up(&h, &stops, &["probe"]).await;
    let mut kept = support::probe_plan(&h, &keeps, &["probe"]);
    kept.on_loss = OnLoss::Keep;
    h.runtime()
        .up(&kept, &Quiet)
        .await
        .unwrap_or_else(|e| panic!("up {keeps}: {}", e.report()));
    for env in [&stops, &keeps] {
        conformance::allowed_is_reached(&h, env, "probe").await;
        let (held, _) = verdict_within(&h, env, 60, Containment::held).await;
        assert!(
            held.held(),
            "control: {env}'s watchers never said held: {held:?}"
        );
    }
    // Three periods and the slack of one status read.
    let within = 3 * 2 + 4;

    own.stop();
    for env in [&stops, &keeps] {
        let (lost, took) = verdict_within(&h, env, 30, |c| lost_by(c, "policy-layer")).await;
        assert!(
            lost_by(&lost, "policy-layer"),
            "the enforcer stopped and af status {env} said: {lost:?}"
        );
        assert!(took.as_secs() <= within, "{env}: LOST only after {took:?}");
        assert!(
            lost.line().contains("NetworkPolicy layer"),
            "{}",
            lost.line()
        );
        let admin = h
            .runtime()
            .admin(env)
            .await
            .unwrap_or_else(|e| panic!("{}", e.report()));
        let metrics = af_orchestrator::admin::metrics(admin.addr, &admin.token)
            .await
            .unwrap_or_else(|e| panic!("{}", e.report()));
        assert!(
            metrics.contains("af_containment_losses_total 1"),
            "{metrics}"
        );
        let journal = af_orchestrator::admin::newest_decisions(
            admin.addr,
            &admin.token,
            &Default::default(),
            1000,
        )
        .await
        .unwrap_or_else(|e| panic!("{}", e.report()));
        assert!(
            journal
                .iter()
                .filter_map(|r| r.entry.as_containment())
                .any(|c| !c.held && c.breaches.iter().any(|b| b.route == "policy-layer")),
            "{env}: the loss is journaled"
        );
    }
    // The keeper stopped the first environment's service, and said why; the second runs on.
    let until = Instant::now() + Duration::from_secs(30);
    let stopped = loop {
        let found = probe_deployment(&h, &stops).await;
        if found.0 == Some(0) || Instant::now() > until {
            break found;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    };
    assert_eq!(
        stopped.0,
        Some(0),
        "the keeper did not scale the service to zero"
    );
    let why = stopped
        .1
        .unwrap_or_else(|| panic!("the stopped Deployment says nothing of why"));
    assert!(why.contains("NetworkPolicy layer"), "{why}");
    let status = status::run(h.runtime(), &stops, Format::Json, &mut Vec::new())
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let probe = status.services.iter().find(|s| s.name == "probe");
    assert!(
        probe.is_some_and(|s| s.state.starts_with("stopped by the keeper")),
        "{probe:?}"
    );
    let (replicas, annotation) = probe_deployment(&h, &keeps).await;
    assert_eq!((replicas, annotation), (Some(1), None), "on_loss: keep");
    assert!(
        h.pod(&keeps, "probe").await.is_some(),
        "the kept service still runs"
    );

    own.resume();
    let (again, _) = verdict_within(&h, &keeps, 60, Containment::held).await;
    assert!(
        again.held(),
        "the enforcer is back and af status says: {again:?}"
    );
    conformance::up(&h, &stops, &["probe"]).await;
    assert_eq!(
        probe_deployment(&h, &stops).await,
        (Some(1), None),
        "af up restarts it"
    );
    let (again, _) = verdict_within(&h, &stops, 60, Containment::held).await;
    assert!(again.held(), "restarted, and af status says: {again:?}");

    let pod = h
        .pod(&keeps, "probe")
        .await
        .unwrap_or_else(|| panic!("no running probe pod"))
        .name_any();
    let pid = sandbox_pid(&pod);
    let flushed = std::process::Command::new("nsenter")
        .args([
            "-t", &pid, "-n", "nft", "delete", "table", "inet", "af_fence",
        ])
        .status()
        .unwrap_or_else(|e| panic!("nsenter nft: {e}"));
    assert!(
        flushed.success(),
        "the pod's own rules could not be flushed"
    );
    let (lost, took) = verdict_within(&h, &keeps, 30, |c| lost_by(c, "pod-layer")).await;
    let Containment::Lost { pods, .. } = &lost else {
        panic!("{pod}'s fence flushed and af status said: {lost:?}");
    };
    assert!(took.as_secs() <= within, "LOST only after {took:?}");
    assert_eq!(pods.len(), 1, "{pods:?}");
    assert_eq!(pods[0].pod, pod);
    assert!(lost.line().contains("fence"), "{}", lost.line());
}
