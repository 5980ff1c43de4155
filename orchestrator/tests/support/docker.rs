//! The local runtime's harness: a simulated internet made of Docker networks and containers on
//! documentation-range addresses, the static binaries the images are built from, and a guard
//! that removes, by label, everything a test made even when it fails.

use std::collections::HashMap;
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, Mutex};

use af_orchestrator::env_id::EnvId;
use af_orchestrator::plan::short_digest;
use af_orchestrator::runtime::Runtime;
use af_orchestrator::runtime::labels::{ENV, MANAGED};
use af_orchestrator::runtime::local::images::{SidecarSource, tar_of};
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

use super::{Harness, Internet};

/// The label every object of a test run carries (besides the product's own on environments).
pub const TEST_LABEL: &str = "dev.antifailure.test";

const TARGET: &str = "x86_64-unknown-linux-gnu";

/// The directory holding the static binaries, built with the project's one static command.
/// `AF_TEST_BINARIES` names a directory of already built ones instead (a shared target
/// directory that other worktrees also build into would otherwise be rebuilt on every run).
pub fn static_binaries() -> PathBuf {
    if let Some(dir) = std::env::var_os("AF_TEST_BINARIES") {
        return PathBuf::from(dir);
    }
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| root.join("target"));
    let dir = target.join(TARGET).join("release");
    // Concurrent test processes may both build: cargo's own lock serialises them.
    for package in [
        &["-p", "af-proxy"][..],
        &["-p", "af-fixtures", "--bins"][..],
    ] {
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
        let status = Command::new(cargo)
            .current_dir(&root)
            .env("CARGO_TARGET_DIR", &target)
            .env("RUSTFLAGS", "-C target-feature=+crt-static")
            .env_remove("CARGO_ENCODED_RUSTFLAGS")
            .args(["build", "--release", "--target", TARGET])
            .args(package)
            .status()
            .unwrap_or_else(|e| panic!("cargo build {package:?}: {e}"));
        assert!(status.success(), "static build of {package:?} failed");
    }
    dir
}

/// One test's world: the runtime, its simulated internet, and the guard that removes both.
pub struct DockerHarness {
    runtime: LocalRuntime,
    docker: Docker,
    internet: Internet,
    run: String,
    probe_dir: PathBuf,
    envs: Arc<Mutex<Vec<EnvId>>>,
    foreign: Arc<Mutex<Vec<String>>>,
}

impl DockerHarness {
    /// Build the images, start the simulated internet (and, with `metadata`, the metadata
    /// host) and connect the runtime to it.
    pub async fn start(test: &str, metadata: bool) -> DockerHarness {
        let bins = tokio::task::spawn_blocking(static_binaries)
            .await
            .unwrap_or_else(|e| panic!("{e}"));
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

        // The simulated internet on a /27 of 203.0.113.0/24 that no other run is using.
        let labels = HashMap::from([(TEST_LABEL.to_owned(), run.clone())]);
        let mut base = None;
        for slot in 0..8u8 {
            let subnet = format!("203.0.113.{}/27", slot * 32);
            if create_network(&docker, &format!("aft-{run}-inet"), &subnet, &labels)
                .await
                .is_ok()
            {
                base = Some(slot * 32);
                break;
            }
        }
        let base = base
            .unwrap_or_else(|| panic!("no free /27 in 203.0.113.0/24 for the simulated internet"));
        let ip = |n: u8| -> IpAddr { IpAddr::from([203, 0, 113, base + n]) };
        let internet = Internet {
            allowed: ("api.allowed.test".to_owned(), ip(10)),
            unlisted: ("other.test".to_owned(), ip(20)),
            resolver: ip(29),
            metadata: IpAddr::from([169, 254, 169, 254]),
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
        )
        .await;
        let a = format!("api.allowed.test={}", internet.allowed.1);
        let o = format!("other.test={}", internet.unlisted.1);
        run_host(
            &docker,
            &sim_image,
            &run,
            "resolver",
            &inet,
            internet.resolver,
            &["/af-sim-resolver", &a, &o],
        )
        .await;
        if metadata {
            let meta = format!("aft-{run}-meta");
            create_network(&docker, &meta, "169.254.169.248/29", &labels)
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
        }
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
        let id = EnvId::parse(&format!(
            "t{}-{tag}",
            &short_digest(self.run.as_bytes())[..6]
        ))
        .unwrap_or_else(|e| panic!("{e}"));
        if let Ok(mut envs) = self.envs.lock() {
            envs.push(id.clone());
        }
        id
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

async fn create_network(
    docker: &Docker,
    name: &str,
    subnet: &str,
    labels: &HashMap<String, String>,
) -> Result<(), String> {
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

#[allow(clippy::too_many_arguments)]
async fn run_host(
    docker: &Docker,
    image: &str,
    run: &str,
    role: &str,
    network: &str,
    addr: IpAddr,
    cmd: &[&str],
) {
    let name = format!("aft-{run}-{role}");
    let body = ContainerCreateBody {
        image: Some(image.to_owned()),
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
                        ipv4_address: Some(addr.to_string()),
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
fn probe_context(bins: &Path, run: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("af-probe-{run}"));
    std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("{e}"));
    std::fs::copy(bins.join("af-probe"), dir.join("af-probe"))
        .unwrap_or_else(|e| panic!("af-probe: {e}"));
    std::fs::write(
        dir.join("Dockerfile"),
        "FROM scratch\nCOPY af-probe /af-probe\nCMD [\"/af-probe\", \"serve\"]\n",
    )
    .unwrap_or_else(|e| panic!("{e}"));
    dir
}
