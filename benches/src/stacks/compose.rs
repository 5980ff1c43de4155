//! The demo's services under Docker Compose, as a stand-in for `docker compose up --wait`:
//! this machine has Compose 1.29 (no `--wait`), so `up -d` is followed by the harness polling
//! each container's state and health through the daemon, as `--wait` does.
//!
//! The compose file is written from the same images and commands af uses: the demo's
//! Dockerfile and `af-demo` for `web` and `worker`, and, standing in for the sidecar, an image
//! made as af makes its own (`FROM scratch`, `af-proxy` and `af-forward`) running af-proxy with
//! the demo's default (block), its DNS listener off. Readiness is what the demo declares and af checks: the sidecar
//! when its admin API answers `/healthz`, `web` when `/healthz` on its port answers (checked
//! by `af-forward check`, mounted into it: the image itself has no probe), `worker` when it
//! runs; `web` starts after the sidecar is ready and `worker` after `web`, as under af. Every
//! service is on one `internal: true` network: nothing can dial off the machine.

use std::collections::HashMap;
use std::net::{Ipv4Addr, SocketAddr};
use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use af_sidecar_api::config::{Admin, DnsListener, SidecarConfig};
use af_sidecar_api::{EgressSpec, Mode};
use bollard::Docker;
use bollard::models::{ContainerStateStatusEnum, HealthStatusEnum};
use bollard::query_parameters::{ListContainersOptionsBuilder, ListImagesOptionsBuilder};
use tempfile::TempDir;
use tokio::process::Command;

use crate::error::{BenchError, Result};
use crate::soak::docker_proxy::connect_daemon;
use crate::soak::lifecycle::{Setup, carrying};

/// The stack's name in the table.
pub(super) const NAME: &str = "docker-compose";
/// The Compose command.
pub(super) const PROGRAM: &str = "docker-compose";

/// The services and how many containers they run.
const SERVICES: usize = 3;
/// Time between two readings of the containers' state: tighter than any healthcheck.
const POLL: Duration = Duration::from_millis(20);
/// Longest wait for every service to be ready.
const READY_TIMEOUT: Duration = Duration::from_secs(120);
/// The system roots the demo's services trust (their `SSL_CERT_FILE`).
const SYSTEM_ROOTS: &str = "/etc/ssl/certs/ca-certificates.crt";
/// The label Compose puts on what it makes for a project.
const PROJECT_LABEL: &str = "com.docker.compose.project";

/// The demo under Compose: its files, its project name.
pub(crate) struct Compose {
    dir: TempDir,
    project: String,
    docker: Docker,
}

impl Compose {
    /// Writes the build contexts, the sidecar's configuration and the compose file.
    pub(super) fn new(setup: &Setup) -> Result<Self> {
        let dir = tempfile::Builder::new()
            .prefix("af-bench-compose-")
            .tempdir()
            .map_err(|e| BenchError::io("create the compose directory", e))?;
        let root = dir.path();
        for (context, files) in [
            ("sidecar", &["af-proxy", "af-forward"][..]),
            ("demo", &["af-demo"][..]),
        ] {
            std::fs::create_dir_all(root.join(context))
                .map_err(|e| BenchError::io(format!("create {context}"), e))?;
            for file in files {
                copy(&setup.binaries.join(file), &root.join(context).join(file))?;
            }
        }
        copy(
            &setup.demo.join("Dockerfile"),
            &root.join("demo").join("Dockerfile"),
        )?;
        write(&root.join("sidecar").join("Dockerfile"), SIDECAR_DOCKERFILE)?;
        write(&root.join("sidecar.json"), &sidecar_config()?)?;
        copy(Path::new(SYSTEM_ROOTS), &root.join("ca-bundle.pem"))?;
        write(&root.join("docker-compose.yml"), COMPOSE_FILE)?;
        Ok(Self {
            dir,
            project: format!("afbench{:06x}", fastrand::u32(..0xff_ffff)),
            docker: connect_daemon()?,
        })
    }

    /// `docker-compose ARGS` in the project, to its end.
    async fn compose(&self, args: &[&str]) -> Result<()> {
        let out = Command::new(PROGRAM)
            .current_dir(self.dir.path())
            .args(["--project-name", &self.project, "--ansi", "never"])
            .args(args)
            .stdin(Stdio::null())
            .kill_on_drop(true)
            .output()
            .await
            .map_err(|source| BenchError::Spawn {
                program: PROGRAM.into(),
                source,
            })?;
        if out.status.success() {
            return Ok(());
        }
        Err(BenchError::Load {
            tool: "docker-compose",
            status: out.status.to_string(),
            stderr: crate::load::tail(&out.stderr),
        })
    }

    pub(super) async fn up(&self) -> Result<()> {
        self.compose(&["up", "--detach"]).await?;
        self.wait_ready().await
    }

    pub(super) async fn down(&self) -> Result<()> {
        self.compose(&["down", "--volumes", "--remove-orphans", "--timeout", "1"])
            .await
    }

    pub(super) async fn clear(&self) -> Result<()> {
        let down = self
            .compose(&[
                "down",
                "--volumes",
                "--remove-orphans",
                "--rmi",
                "local",
                "--timeout",
                "1",
            ])
            .await;
        let mut left = carrying(&self.docker, &format!("{PROJECT_LABEL}={}", self.project)).await?;
        left.extend(self.images().await?);
        down?;
        super::nothing_left("docker-compose down", &left)
    }

    /// The images Compose built for the project (`PROJECT_SERVICE`).
    async fn images(&self) -> Result<Vec<String>> {
        let filter = HashMap::from([("reference".to_owned(), vec![format!("{}_*", self.project)])]);
        let images = self
            .docker
            .list_images(Some(
                ListImagesOptionsBuilder::default().filters(&filter).build(),
            ))
            .await
            .map_err(|e| BenchError::Protocol(format!("docker: {e}")))?;
        Ok(images
            .into_iter()
            .flat_map(|i| i.repo_tags)
            .map(|t| format!("image {t}"))
            .collect())
    }

    /// What `up --wait` waits for: every service's container running, and healthy when it has
    /// a healthcheck.
    async fn wait_ready(&self) -> Result<()> {
        let filter = HashMap::from([(
            "label".to_owned(),
            vec![format!("{PROJECT_LABEL}={}", self.project)],
        )]);
        let deadline = Instant::now() + READY_TIMEOUT;
        loop {
            let options = ListContainersOptionsBuilder::default()
                .all(true)
                .filters(&filter)
                .build();
            let listed = self
                .docker
                .list_containers(Some(options))
                .await
                .map_err(|e| BenchError::Protocol(format!("docker: {e}")))?;
            let mut ready = 0;
            for c in &listed {
                let id = c.id.as_deref().unwrap_or_default();
                let inspect = self
                    .docker
                    .inspect_container(id, None)
                    .await
                    .map_err(|e| BenchError::Protocol(format!("docker: {e}")))?;
                let state = inspect.state.unwrap_or_default();
                let running = state.running == Some(true);
                if !running && state.status == Some(ContainerStateStatusEnum::EXITED) {
                    return Err(BenchError::Protocol(format!(
                        "{} exited ({})",
                        c.names.clone().unwrap_or_default().join(","),
                        state.exit_code.unwrap_or_default()
                    )));
                }
                let healthy = state
                    .health
                    .and_then(|h| h.status)
                    .is_none_or(|s| s == HealthStatusEnum::HEALTHY);
                if running && healthy {
                    ready += 1;
                }
            }
            if ready == SERVICES {
                return Ok(());
            }
            if Instant::now() >= deadline {
                return Err(BenchError::NotReady {
                    system: NAME.into(),
                    port: 0,
                    secs: READY_TIMEOUT.as_secs(),
                    detail: format!(": {ready} of {SERVICES} services ready"),
                });
            }
            tokio::time::sleep(POLL).await;
        }
    }
}

/// The sidecar stand-in's image, made as af makes the sidecar's.
const SIDECAR_DOCKERFILE: &str = "FROM scratch
COPY af-proxy /af-proxy
COPY af-forward /af-forward
ENTRYPOINT [\"/af-proxy\"]
";

/// The demo's services (fixtures/demo/af.yaml) and the sidecar stand-in. Healthchecks every
/// 100 ms: tighter than af's own readiness checks, so Compose is not slowed by its checks.
const COMPOSE_FILE: &str = r#"version: "2.4"
services:
  sidecar:
    build: ./sidecar
    command: ["--config", "/etc/af/sidecar.json"]
    volumes:
      - ./sidecar.json:/etc/af/sidecar.json:ro
      - journal:/var/lib/af/journal
    networks: [internal]
    healthcheck:
      test: ["CMD", "/af-forward", "check", "127.0.0.1:9901", "/healthz"]
      interval: 100ms
      timeout: 5s
      retries: 600
  web:
    build: ./demo
    command: ["/af-demo", "web"]
    environment: &env
      PORT: "8080"
      SSL_CERT_FILE: /etc/af/ca-bundle.pem
      HTTP_PROXY: http://sidecar:3128
      HTTPS_PROXY: http://sidecar:3128
      NO_PROXY: localhost,sidecar,web,worker
    volumes:
      - ./ca-bundle.pem:/etc/af/ca-bundle.pem:ro
      - ./sidecar/af-forward:/af-forward:ro
    networks: [internal]
    depends_on:
      sidecar: {condition: service_healthy}
    healthcheck:
      test: ["CMD", "/af-forward", "check", "127.0.0.1:8080", "/healthz"]
      interval: 100ms
      timeout: 5s
      retries: 600
  worker:
    build: ./demo
    command: ["/af-demo", "worker"]
    environment: *env
    volumes:
      - ./ca-bundle.pem:/etc/af/ca-bundle.pem:ro
    networks: [internal]
    depends_on:
      web: {condition: service_healthy}
networks:
  internal:
    internal: true
volumes:
  journal: {}
"#;

/// The stand-in's configuration: the demo's default (block), every listener at its default
/// but DNS (which must answer the sidecar's own address, unknown before Compose picks it), the
/// admin API on loopback (only its healthcheck asks it).
fn sidecar_config() -> Result<String> {
    let mut config = SidecarConfig::new(
        "bench-compose".to_owned(),
        EgressSpec {
            default: Some(Mode::Block),
            ..EgressSpec::default()
        },
        "127.0.0.11:53".to_owned(),
        Admin {
            listen: SocketAddr::from((Ipv4Addr::LOCALHOST, Admin::DEFAULT_PORT)),
            token: crate::systems::ADMIN_TOKEN.to_owned(),
        },
    );
    config.listeners.dns = DnsListener {
        listen: None,
        ..DnsListener::default()
    };
    serde_json::to_string(&config)
        .map_err(|e| BenchError::io("serialize the sidecar configuration", e.into()))
}

fn copy(from: &Path, to: &Path) -> Result<()> {
    std::fs::copy(from, to)
        .map(drop)
        .map_err(|e| BenchError::io(format!("copy {}", from.display()), e))
}

fn write(path: &Path, text: &str) -> Result<()> {
    std::fs::write(path, text).map_err(|e| BenchError::io(format!("write {}", path.display()), e))
}
