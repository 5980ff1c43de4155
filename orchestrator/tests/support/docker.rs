//! The local runtime's harness: a simulated internet made of Docker networks and containers on
//! documentation-range addresses, the static binaries the images are built from, and a guard
//! that removes, by label, everything a test made even when it fails.

use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use af_orchestrator::env_id::EnvId;
use af_orchestrator::plan::short_digest;
use af_orchestrator::runtime::Runtime;
use af_orchestrator::runtime::images::{SidecarSource, tar_of};
use af_orchestrator::runtime::labels::{ENV, MANAGED};
use af_orchestrator::runtime::local::labels::Names;
use af_orchestrator::runtime::local::{LocalOptions, LocalRuntime};
use bollard::Docker;
use bollard::models::{
    ContainerCreateBody, EndpointIpamConfig, EndpointSettings, HostConfig, Ipam, IpamConfig,
    NetworkCreateRequest, NetworkingConfig,
};
use bollard::query_parameters::{
    BuildImageOptionsBuilder, CreateContainerOptionsBuilder, DownloadFromContainerOptionsBuilder,
    ListContainersOptionsBuilder, ListNetworksOptionsBuilder, RemoveContainerOptionsBuilder,
};
use futures_util::StreamExt;
use futures_util::future::BoxFuture;
use ipnet::{IpNet, Ipv4Net};
use serde_json::Value;

use super::{Harness, HostAddr, HostEscapes, Internet, Island, Unconfined};

/// The label every object of a test run carries (besides the product's own on environments).
pub(crate) const TEST_LABEL: &str = "dev.antifailure.test";

/// One test's world: the runtime, its simulated internet, and the guard that removes both.
pub(crate) struct DockerHarness {
    runtime: LocalRuntime,
    docker: Docker,
    internet: Internet,
    run: String,
    probe_dir: PathBuf,
    envs: Arc<Mutex<Vec<EnvId>>>,
    foreign: Arc<Mutex<Vec<String>>>,
    af_variables: Vec<(&'static str, String)>,
    sim_image: String,
    inet: String,
    /// The address [`PROTOCOL_NAMES`] resolve to, where [`DockerHarness::start_protocol_host`]
    /// puts the host that speaks them.
    protocols: IpAddr,
}

/// The simulated internet's names of its protocol host (TLS, HTTP/2, WebSocket, gRPC): one
/// server, a name per rule a test gives it.
pub(crate) const PROTOCOL_NAMES: [&str; 3] = [
    "proto.allowed.test",
    "proto.sandbox.test",
    "proto.blocked.test",
];

impl DockerHarness {
    /// Build the images, start the simulated internet (and, with `metadata`, the metadata
    /// host) and connect the runtime to it.
    pub(crate) async fn start(test: &str, metadata: bool) -> DockerHarness {
        let bins = tokio::task::spawn_blocking(af_fixtures::cargo::static_binaries)
            .await
            .unwrap_or_else(|e| panic!("{e}"))
            .unwrap_or_else(|e| panic!("the static binaries: {e}"));
        let docker = Docker::connect_with_local_defaults()
            .unwrap_or_else(|e| panic!("docker: {e}"))
            .negotiate_version()
            .await
            .unwrap_or_else(|e| panic!("docker: {e}"));
        let nonce = short_digest(
            format!(
                "{test}{}{:?}",
                std::process::id(),
                std::time::SystemTime::now()
            )
            .as_bytes(),
        );
        let run = format!("{}-{}", &test[..test.len().min(12)], &nonce[..6]).replace('_', "-");
        let sim_image = build_sim_image(&docker, &bins).await;
        let probe_dir = probe_context(&bins, &run);

        // The simulated internet on a /27 of 203.0.113.128/25 that no other run is using.
        let labels = HashMap::from([(TEST_LABEL.to_owned(), run.clone())]);
        let mut base = None;
        for slot in SIM_SLOTS {
            if create_network(
                &docker,
                &format!("aft-{run}-inet"),
                &slot.to_string(),
                &labels,
            )
            .await
            .is_ok()
            {
                base = Some(slot.network());
                break;
            }
        }
        let base = base.unwrap_or_else(|| {
            panic!("no free /27 in 203.0.113.128/25 for the simulated internet")
        });
        let ip = |n: u8| -> IpAddr {
            let [a, b, c, d] = base.octets();
            IpAddr::from([a, b, c, d + n])
        };
        let internet = Internet {
            allowed: ("api.allowed.test".to_owned(), ip(10)),
            unlisted: ("other.test".to_owned(), ip(20)),
            resolver: ip(29),
            // Link-local, like the cloud metadata endpoint, but never that address itself.
            metadata: IpAddr::from([169, 254, 42, 254]),
        };
        let inet = format!("aft-{run}-inet");
        let mut sidecar_networks = vec![inet.clone()];
        run_host(
            &docker,
            &sim_image,
            &run,
            "allowed",
            &inet,
            internet.allowed.1,
            &["/af-sim-upstream", "api.allowed.test"],
            &[],
        )
        .await;
        run_host(
            &docker,
            &sim_image,
            &run,
            "unlisted",
            &inet,
            internet.unlisted.1,
            &["/af-sim-upstream", "other.test"],
            &[],
        )
        .await;
        let a = format!("api.allowed.test={}", internet.allowed.1);
        let o = format!("other.test={}", internet.unlisted.1);
        let protocols = ip(12);
        let p: Vec<String> = PROTOCOL_NAMES
            .iter()
            .map(|n| format!("{n}={protocols}"))
            .collect();
        let mut resolved = vec!["/af-sim-resolver", &a, &o];
        resolved.extend(p.iter().map(String::as_str));
        run_host(
            &docker,
            &sim_image,
            &run,
            "resolver",
            &inet,
            internet.resolver,
            &resolved,
            &[],
        )
        .await;
        if metadata {
            let meta = format!("aft-{run}-meta");
            create_network(&docker, &meta, "169.254.42.248/29", &labels)
                .await
                .unwrap_or_else(|e| panic!("metadata network: {e}"));
            run_host(
                &docker,
                &sim_image,
                &run,
                "metadata",
                &meta,
                internet.metadata,
                &["/af-sim-upstream", "metadata"],
                &[],
            )
            .await;
            sidecar_networks.push(meta);
        }

        let mut options = LocalOptions {
            sidecar_source: SidecarSource::Binary(bins.join("af-proxy")),
            ..LocalOptions::default()
        };
        options.sidecar.upstream_resolver = format!("{}:53", internet.resolver);
        options.sidecar.extra_networks = sidecar_networks;
        // The same options as `af` reads them (`LocalOptions::from_env`).
        let af_variables = vec![
            (
                "AF_PROXY_BINARY",
                bins.join("af-proxy").display().to_string(),
            ),
            (
                "AF_UPSTREAM_RESOLVER",
                options.sidecar.upstream_resolver.clone(),
            ),
            (
                "AF_SIDECAR_NETWORKS",
                options.sidecar.extra_networks.join(","),
            ),
        ];
        let runtime = LocalRuntime::connect(options)
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        DockerHarness {
            runtime,
            docker,
            internet,
            run,
            probe_dir,
            envs: Arc::default(),
            foreign: Arc::default(),
            af_variables,
            sim_image,
            inet,
            protocols,
        }
    }

    /// Start the simulated internet's protocol host (`af-sim-upstream --tls`) at the address
    /// [`PROTOCOL_NAMES`] resolve to, its leaf for those names signed by the CA
    /// `ca_cert_pem`/`ca_key_pem` (the sidecar trusts it through `egress.upstream_roots`).
    pub(crate) async fn start_protocol_host(&self, ca_cert_pem: &str, ca_key_pem: &str) {
        let env = [
            format!("AF_SIM_CA_CERT_PEM={ca_cert_pem}"),
            format!("AF_SIM_CA_KEY_PEM={ca_key_pem}"),
            format!("AF_SIM_NAMES={}", PROTOCOL_NAMES.join(",")),
        ];
        run_host(
            &self.docker,
            &self.sim_image,
            &self.run,
            "protocols",
            &self.inet,
            self.protocols,
            &["/af-sim-upstream", PROTOCOL_NAMES[0], "--tls"],
            &env,
        )
        .await;
    }

    /// The variables that give the `af` command line this harness's runtime: the same sidecar
    /// binary, resolver and simulated internet.
    pub(crate) fn af_variables(&self) -> &[(&'static str, String)] {
        &self.af_variables
    }
}

impl Drop for DockerHarness {
    fn drop(&mut self) {
        // Remove by label whatever the test left, on a thread of its own (we may be inside a
        // runtime that is shutting down).
        let envs = self.envs.lock().map(|e| e.clone()).unwrap_or_default();
        let foreign = self.foreign.lock().map(|f| f.clone()).unwrap_or_default();
        let run = self.run.clone();
        let probe_dir = self.probe_dir.clone();
        let cleanup = std::thread::spawn(move || {
            let Ok(rt) = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            else {
                return;
            };
            rt.block_on(async move {
                let Ok(docker) = Docker::connect_with_local_defaults() else {
                    return;
                };
                let Ok(docker) = docker.negotiate_version().await else {
                    return;
                };
                let mut filters: Vec<HashMap<String, Vec<String>>> = vec![HashMap::from([(
                    "label".to_owned(),
                    vec![format!("{TEST_LABEL}={run}")],
                )])];
                for env in &envs {
                    filters.push(HashMap::from([(
                        "label".to_owned(),
                        vec![format!("{MANAGED}=true"), format!("{ENV}={env}")],
                    )]));
                }
                for f in &filters {
                    let options = ListContainersOptionsBuilder::default()
                        .all(true)
                        .filters(f)
                        .build();
                    for c in docker
                        .list_containers(Some(options))
                        .await
                        .unwrap_or_default()
                    {
                        if let Some(id) = c.id {
                            let _ = docker
                                .remove_container(
                                    &id,
                                    Some(
                                        RemoveContainerOptionsBuilder::default()
                                            .force(true)
                                            .v(true)
                                            .build(),
                                    ),
                                )
                                .await;
                        }
                    }
                }
                for f in &filters {
                    let options = ListNetworksOptionsBuilder::default().filters(f).build();
                    for n in docker
                        .list_networks(Some(options))
                        .await
                        .unwrap_or_default()
                    {
                        if let Some(id) = n.id {
                            let _ = docker.remove_network(&id).await;
                        }
                    }
                }
                for env in &envs {
                    let f = HashMap::from([("label".to_owned(), vec![format!("{ENV}={env}")])]);
                    let options = bollard::query_parameters::ListVolumesOptionsBuilder::default()
                        .filters(&f)
                        .build();
                    let volumes = docker.list_volumes(Some(options)).await.ok();
                    for v in volumes.and_then(|l| l.volumes).unwrap_or_default() {
                        let _ = docker
                            .remove_volume(
                                &v.name,
                                None::<bollard::query_parameters::RemoveVolumeOptions>,
                            )
                            .await;
                    }
                }
                for name in foreign {
                    let _ = docker.remove_network(&name).await;
                }
                for env in &envs {
                    let options = bollard::query_parameters::ListImagesOptionsBuilder::default()
                        .filters(&HashMap::from([(
                            "label".to_owned(),
                            vec![format!("{ENV}={env}")],
                        )]))
                        .build();
                    for i in docker.list_images(Some(options)).await.unwrap_or_default() {
                        let _ = docker
                            .remove_image(
                                &i.id,
                                Some(
                                    bollard::query_parameters::RemoveImageOptionsBuilder::default()
                                        .force(true)
                                        .build(),
                                ),
                                None,
                            )
                            .await;
                    }
                }
            });
            let _ = std::fs::remove_dir_all(probe_dir);
        });
        let _ = cleanup.join();
    }
}

impl Harness for DockerHarness {
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
        super::fresh_env('t', &self.run, tag, &self.envs)
    }

    fn service_addr<'a>(
        &'a self,
        env: &'a EnvId,
        service: &'a str,
    ) -> BoxFuture<'a, Option<IpAddr>> {
        Box::pin(async move {
            let names = Names::new(env);
            let c = self
                .docker
                .inspect_container(&names.service(service), None)
                .await
                .ok()?;
            let nets = c.network_settings?.networks?;
            nets.get(&names.internal())?
                .ip_address
                .as_deref()?
                .parse()
                .ok()
        })
    }

    fn host_side_addrs<'a>(&'a self, env: &'a EnvId) -> BoxFuture<'a, Vec<IpAddr>> {
        Box::pin(async move {
            let names = Names::new(env);
            let mut out = Vec::new();
            for net in [names.internal(), "bridge".to_owned()] {
                if let Ok(n) = self.docker.inspect_network(&net, None).await {
                    for c in n.ipam.and_then(|i| i.config).unwrap_or_default() {
                        if let Some(gw) = c.gateway.and_then(|g| g.parse().ok()) {
                            out.push(gw);
                        }
                    }
                }
            }
            out
        })
    }

    fn plant_foreign_object<'a>(&'a self, env: &'a EnvId) -> BoxFuture<'a, String> {
        Box::pin(async move {
            let name = Names::new(env).internal();
            let request = NetworkCreateRequest {
                name: name.clone(),
                internal: Some(true),
                ..Default::default()
            };
            self.docker
                .create_network(request)
                .await
                .unwrap_or_else(|e| panic!("plant {name}: {e}"));
            if let Ok(mut f) = self.foreign.lock() {
                f.push(name.clone());
            }
            format!("network {name}")
        })
    }

    fn service_file<'a>(
        &'a self,
        env: &'a EnvId,
        service: &'a str,
        path: &'a str,
    ) -> BoxFuture<'a, Option<Vec<u8>>> {
        Box::pin(async move {
            let options = DownloadFromContainerOptionsBuilder::default()
                .path(path)
                .build();
            let mut stream = self
                .docker
                .download_from_container(&Names::new(env).service(service), Some(options));
            let mut archive = Vec::new();
            while let Some(chunk) = stream.next().await {
                archive.extend_from_slice(&chunk.ok()?);
            }
            let mut tar = tar::Archive::new(archive.as_slice());
            let mut entry = tar.entries().ok()?.next()?.ok()?;
            let mut bytes = Vec::new();
            std::io::Read::read_to_end(&mut entry, &mut bytes).ok()?;
            Some(bytes)
        })
    }

    fn service_env<'a>(&'a self, env: &'a EnvId, service: &'a str) -> BoxFuture<'a, Vec<String>> {
        Box::pin(async move {
            self.docker
                .inspect_container(&Names::new(env).service(service), None)
                .await
                .ok()
                .and_then(|c| c.config?.env)
                .unwrap_or_default()
        })
    }

    fn foreign_object_exists<'a>(&'a self, env: &'a EnvId) -> BoxFuture<'a, bool> {
        Box::pin(async move {
            match self
                .docker
                .inspect_network(&Names::new(env).internal(), None)
                .await
            {
                Ok(n) => !n.labels.unwrap_or_default().contains_key(MANAGED),
                Err(_) => false,
            }
        })
    }
}

impl Unconfined for DockerHarness {
    fn unconfined_probe<'a>(&'a self, env: &'a EnvId, args: &'a [&'a str]) -> BoxFuture<'a, Value> {
        Box::pin(async move {
            let network = Names::new(env).internal();
            self.inner_unconfined_probe(env, &network, args).await
        })
    }
}

impl HostEscapes for DockerHarness {
    fn host_addrs<'a>(&'a self, env: &'a EnvId) -> BoxFuture<'a, Vec<HostAddr>> {
        Box::pin(self.inner_host_addrs(env))
    }

    fn next_hop_mac<'a>(&'a self, env: &'a EnvId) -> BoxFuture<'a, String> {
        Box::pin(self.inner_internal_bridge_mac(env))
    }

    fn island<'a>(&'a self, env: &'a EnvId) -> BoxFuture<'a, Island> {
        Box::pin(self.inner_island(env))
    }

    fn island_received<'a>(&'a self, island: &'a Island) -> BoxFuture<'a, Vec<String>> {
        Box::pin(self.inner_island_received(island))
    }
}

/// The simulated internet's slots: the /27s of 203.0.113.128/25, a documentation range this
/// machine does not use.
const SIM_SLOTS: [Ipv4Net; 4] = [
    Ipv4Net::new_assert(Ipv4Addr::new(203, 0, 113, 128), 27),
    Ipv4Net::new_assert(Ipv4Addr::new(203, 0, 113, 160), 27),
    Ipv4Net::new_assert(Ipv4Addr::new(203, 0, 113, 192), 27),
    Ipv4Net::new_assert(Ipv4Addr::new(203, 0, 113, 224), 27),
];

/// The machine's own networks, which no test network may cover: its own 192.0.2.0/24 and the
/// 203.0.113.64/27 its route to the package registries (203.0.113.80) sits in. A bridge on
/// either would take the machine's own traffic while the test runs.
const MACHINE_NETWORKS: [Ipv4Net; 2] = [
    Ipv4Net::new_assert(Ipv4Addr::new(192, 0, 2, 0), 24),
    Ipv4Net::new_assert(Ipv4Addr::new(203, 0, 113, 64), 27),
];

/// Refuse a test network that overlaps one of the machine's own.
fn refuse_machine_networks(subnet: &str) -> Result<(), String> {
    let Ok(IpNet::V4(net)) = subnet.parse::<IpNet>() else {
        return Ok(());
    };
    match MACHINE_NETWORKS
        .iter()
        .find(|own| own.contains(&net) || net.contains(*own))
    {
        Some(own) => Err(format!(
            "the test network {net} would cover this machine's own {own}: choose another range"
        )),
        None => Ok(()),
    }
}

async fn create_network(
    docker: &Docker,
    name: &str,
    subnet: &str,
    labels: &HashMap<String, String>,
) -> Result<(), String> {
    refuse_machine_networks(subnet)?;
    let request = NetworkCreateRequest {
        name: name.to_owned(),
        driver: Some("bridge".to_owned()),
        // The simulated internet has no route anywhere real.
        internal: Some(true),
        ipam: Some(Ipam {
            config: Some(vec![IpamConfig {
                subnet: Some(subnet.to_owned()),
                ..Default::default()
            }]),
            ..Default::default()
        }),
        labels: Some(labels.clone()),
        ..Default::default()
    };
    docker
        .create_network(request)
        .await
        .map(|_| ())
        .map_err(|e| e.to_string())
}

/// Start a host of the simulated internet; `env` its environment variables (`NAME=value`).
#[allow(
    clippy::too_many_arguments,
    reason = "a container's few facts, each named"
)]
async fn run_host(
    docker: &Docker,
    image: &str,
    run: &str,
    role: &str,
    network: &str,
    addr: IpAddr,
    cmd: &[&str],
    env: &[String],
) {
    let name = format!("aft-{run}-{role}");
    let body = ContainerCreateBody {
        image: Some(image.to_owned()),
        env: (!env.is_empty()).then(|| env.to_vec()),
        entrypoint: Some(vec![cmd[0].to_owned()]),
        cmd: Some(cmd[1..].iter().map(|s| (*s).to_owned()).collect()),
        labels: Some(HashMap::from([(TEST_LABEL.to_owned(), run.to_owned())])),
        host_config: Some(HostConfig {
            network_mode: Some(network.to_owned()),
            ..Default::default()
        }),
        networking_config: Some(NetworkingConfig {
            endpoints_config: Some(HashMap::from([(
                network.to_owned(),
                EndpointSettings {
                    ipam_config: Some(EndpointIpamConfig {
                        ipv4_address: addr.is_ipv4().then(|| addr.to_string()),
                        ipv6_address: addr.is_ipv6().then(|| addr.to_string()),
                        ..Default::default()
                    }),
                    ..Default::default()
                },
            )])),
        }),
        ..Default::default()
    };
    let options = CreateContainerOptionsBuilder::default().name(&name).build();
    docker
        .create_container(Some(options), body)
        .await
        .unwrap_or_else(|e| panic!("create {name}: {e}"));
    docker
        .start_container(&name, None)
        .await
        .unwrap_or_else(|e| panic!("start {name}: {e}"));
}

/// The simulated internet's hosts' image: the fixture binaries `FROM scratch`.
async fn build_sim_image(docker: &Docker, bins: &Path) -> String {
    let read = |n: &str| std::fs::read(bins.join(n)).unwrap_or_else(|e| panic!("{n}: {e}"));
    let upstream = read("af-sim-upstream");
    let resolver = read("af-sim-resolver");
    let mut all = upstream.clone();
    all.extend_from_slice(&resolver);
    let tag = format!("af-test-sim:{}", short_digest(&all));
    if docker.inspect_image(&tag).await.is_ok() {
        return tag;
    }
    let dockerfile = b"FROM scratch\nCOPY af-sim-upstream /af-sim-upstream\nCOPY af-sim-resolver /af-sim-resolver\n";
    let context = tar_of(&[
        ("Dockerfile", dockerfile, 0o644),
        ("af-sim-upstream", &upstream, 0o755),
        ("af-sim-resolver", &resolver, 0o755),
    ])
    .unwrap_or_else(|e| panic!("{e}"));
    let labels = HashMap::from([(TEST_LABEL.to_owned(), "sim".to_owned())]);
    let options = BuildImageOptionsBuilder::default()
        .t(&tag)
        .rm(true)
        .labels(&labels)
        .build();
    let mut stream = docker.build_image(options, None, Some(bollard::body_full(context.into())));
    while let Some(item) = stream.next().await {
        let info = item.unwrap_or_else(|e| panic!("build {tag}: {e}"));
        if let Some(err) = info.error_detail {
            panic!("build {tag}: {:?}", err.message);
        }
    }
    tag
}

/// A build context with the probe binary and a Dockerfile.
pub(crate) fn probe_context(bins: &Path, run: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("af-probe-{run}"));
    std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("{e}"));
    std::fs::copy(bins.join("af-probe"), dir.join("af-probe"))
        .unwrap_or_else(|e| panic!("af-probe: {e}"));
    std::fs::write(dir.join(PROBE_STORE_FILE), PROBE_STORE_ROOT).unwrap_or_else(|e| panic!("{e}"));
    std::fs::write(
        dir.join("Dockerfile"),
        format!(
            "FROM scratch\nCOPY af-probe /af-probe\nCOPY {PROBE_STORE_FILE} {PROBE_STORE}\nCMD [\"/af-probe\", \"serve\"]\n"
        ),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    dir
}

/// The probe image's system store (Debian's path), so the runtimes' writing the environment CA
/// into an image's own store is seen: it holds [`PROBE_STORE_ROOT`] alone in the image.
pub(crate) const PROBE_STORE: &str = "/etc/ssl/certs/ca-certificates.crt";
/// The probe context's file that becomes [`PROBE_STORE`].
pub(crate) const PROBE_STORE_FILE: &str = "ca-certificates.crt";
/// The one root the probe image's store holds (a stand-in: nothing verifies with it).
pub(crate) const PROBE_STORE_ROOT: &str =
    "-----BEGIN CERTIFICATE-----\nUFJPQkUgUk9PVA==\n-----END CERTIFICATE-----\n";

/// The linux bridge a Docker network of this id is.
fn bridge_of(id: &str) -> String {
    format!("br-{}", &id[..id.len().min(12)])
}

/// The host's IPv6 addresses by interface, from `/proc/net/if_inet6` (address, interface).
fn host_ipv6() -> Vec<(std::net::Ipv6Addr, String)> {
    std::fs::read_to_string("/proc/net/if_inet6")
        .unwrap_or_default()
        .lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            let hex = u128::from_str_radix(f.first()?, 16).ok()?;
            Some((std::net::Ipv6Addr::from(hex), (*f.get(5)?).to_owned()))
        })
        .collect()
}

impl DockerHarness {
    /// The image the environment's probe service runs.
    async fn probe_image(&self, env: &EnvId) -> String {
        self.docker
            .inspect_container(&Names::new(env).service("probe"), None)
            .await
            .ok()
            .and_then(|c| c.image)
            .unwrap_or_else(|| panic!("{env}'s probe service has an image"))
    }

    /// Run the probe, as a container of the test's own with the engine's default capabilities
    /// (`NET_RAW` among them) and IPv6 on, on `network`; its last JSON line.
    /// This is the positive control of the escape cases: what a service could do without
    /// the environment's confinement.
    async fn inner_unconfined_probe(&self, env: &EnvId, network: &str, args: &[&str]) -> Value {
        let image = self.probe_image(env).await;
        let name = format!(
            "aft-{}-free-{}",
            self.run,
            short_digest(args.join(" ").as_bytes())
        );
        let mut cmd = vec!["/af-probe".to_owned()];
        cmd.extend(args.iter().map(|a| (*a).to_owned()));
        let body = ContainerCreateBody {
            image: Some(image),
            entrypoint: Some(cmd),
            env: Some(vec!["AF_PROBE_SETTLE=1".to_owned()]),
            labels: Some(HashMap::from([(TEST_LABEL.to_owned(), self.run.clone())])),
            host_config: Some(HostConfig {
                network_mode: Some(network.to_owned()),
                // Some engines turn IPv6 off in containers on IPv4-only networks, others do
                // not (and `egress.allow_ipv6` would not): the control has it on.
                sysctls: Some(HashMap::from([
                    ("net.ipv6.conf.all.disable_ipv6".to_owned(), "0".to_owned()),
                    (
                        "net.ipv6.conf.default.disable_ipv6".to_owned(),
                        "0".to_owned(),
                    ),
                ])),
                ..Default::default()
            }),
            ..Default::default()
        };
        let _ = self
            .docker
            .remove_container(
                &name,
                Some(RemoveContainerOptionsBuilder::default().force(true).build()),
            )
            .await;
        let options = CreateContainerOptionsBuilder::default().name(&name).build();
        self.docker
            .create_container(Some(options), body)
            .await
            .unwrap_or_else(|e| panic!("create {name}: {e}"));
        self.docker
            .start_container(&name, None)
            .await
            .unwrap_or_else(|e| panic!("start {name}: {e}"));
        let _ = self
            .docker
            .wait_container(&name, None)
            .collect::<Vec<_>>()
            .await;
        let out = self.stdout_of(&name).await;
        let _ = self
            .docker
            .remove_container(
                &name,
                Some(RemoveContainerOptionsBuilder::default().force(true).build()),
            )
            .await;
        let line = out.lines().last().unwrap_or("").to_owned();
        serde_json::from_str(&line)
            .unwrap_or_else(|e| panic!("unconfined probe {args:?} printed {out:?}: {e}"))
    }

    async fn stdout_of(&self, container: &str) -> String {
        let options = bollard::query_parameters::LogsOptionsBuilder::default()
            .stdout(true)
            .build();
        let mut logs = self.docker.logs(container, Some(options));
        let mut out = String::new();
        while let Some(Ok(chunk)) = logs.next().await {
            out.push_str(&chunk.to_string());
        }
        out
    }

    /// Every address the host has on a bridge: the IPv4 gateway of every network this
    /// environment and the engine have, and every IPv6 address of their bridges.
    async fn inner_host_addrs(&self, env: &EnvId) -> Vec<HostAddr> {
        let names = Names::new(env);
        let mut out = Vec::new();
        let mut networks = vec![
            names.internal(),
            names.edge(),
            names.publish(),
            "bridge".to_owned(),
            format!("aft-{}-inet", self.run),
        ];
        networks.dedup();
        for net in networks {
            let Ok(n) = self.docker.inspect_network(&net, None).await else {
                continue;
            };
            let id = n.id.clone().unwrap_or_default();
            let bridge = if net == "bridge" {
                "docker0".to_owned()
            } else {
                bridge_of(&id)
            };
            let on_internal = net == names.internal();
            for c in n.ipam.and_then(|i| i.config).unwrap_or_default() {
                if let Some(gw) = c.gateway.filter(|g| !g.is_empty()) {
                    // The internal network's gateway is an address the host does not take.
                    let on_host = std::net::UdpSocket::bind((gw.as_str(), 0)).is_ok();
                    out.push(HostAddr {
                        bridge: bridge.clone(),
                        from_host: gw.clone(),
                        from_service: gw,
                        on_internal,
                        on_host,
                    });
                }
            }
            for (ip, iface) in host_ipv6() {
                if iface == bridge {
                    let scoped = (ip.segments()[0] & 0xffc0) == 0xfe80;
                    out.push(HostAddr {
                        bridge: bridge.clone(),
                        from_host: if scoped {
                            format!("{ip}%{iface}")
                        } else {
                            ip.to_string()
                        },
                        from_service: if scoped {
                            format!("{ip}%eth0")
                        } else {
                            ip.to_string()
                        },
                        on_internal,
                        on_host: true,
                    });
                }
            }
        }
        out
    }

    /// The MAC address of the host's side of the environment's internal network.
    async fn inner_internal_bridge_mac(&self, env: &EnvId) -> String {
        let n = self
            .docker
            .inspect_network(&Names::new(env).internal(), None)
            .await
            .unwrap_or_else(|e| panic!("internal network: {e}"));
        let bridge = bridge_of(&n.id.unwrap_or_default());
        std::fs::read_to_string(format!("/sys/class/net/{bridge}/address"))
            .unwrap_or_else(|e| panic!("{bridge}: {e}"))
            .trim()
            .to_owned()
    }

    /// Make the IPv6 island (its network and receiver) from the environment's probe image.
    async fn inner_island(&self, env: &EnvId) -> Island {
        let labels = HashMap::from([(TEST_LABEL.to_owned(), self.run.clone())]);
        let net = format!("aft-{}-v6", self.run);
        let prefix = format!("fdaf:{}:{}", &short_digest(self.run.as_bytes())[..4], 16);
        let request = NetworkCreateRequest {
            name: net.clone(),
            driver: Some("bridge".to_owned()),
            internal: Some(true),
            enable_ipv6: Some(true),
            ipam: Some(Ipam {
                config: Some(vec![IpamConfig {
                    subnet: Some(format!("{prefix}::/64")),
                    ..Default::default()
                }]),
                ..Default::default()
            }),
            labels: Some(labels.clone()),
            ..Default::default()
        };
        self.docker
            .create_network(request)
            .await
            .unwrap_or_else(|e| panic!("create {net}: {e}"));
        let addr: IpAddr = format!("{prefix}::10")
            .parse()
            .unwrap_or_else(|e| panic!("{prefix}::10: {e}"));
        let image = self.probe_image(env).await;
        run_host(
            &self.docker,
            &image,
            &self.run,
            "island",
            &net,
            addr,
            &["/af-probe", "udp-listen", "9999"],
            &[],
        )
        .await;
        let container = format!("aft-{}-island", self.run);
        Island {
            receiver: format!("[{addr}]:9999"),
            container,
        }
    }

    /// Every datagram text the island's receiver has printed so far.
    async fn inner_island_received(&self, island: &Island) -> Vec<String> {
        self.stdout_of(&island.container)
            .await
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .filter_map(|v| v["text"].as_str().map(str::to_owned))
            .collect()
    }
}

#[test]
fn the_simulated_internet_never_covers_the_machines_own_networks() {
    for slot in SIM_SLOTS {
        refuse_machine_networks(&slot.to_string()).unwrap_or_else(|e| panic!("{e}"));
    }
    // The positive control: the check refuses what the old slots included.
    for bad in [
        "203.0.113.64/27",
        "203.0.113.0/24",
        "192.0.2.0/25",
        "0.0.0.0/0",
    ] {
        let refusal = refuse_machine_networks(bad).expect_err(bad);
        assert!(refusal.contains("this machine's own"), "{refusal}");
    }
}
