//! `af doctor`: can this machine run environments? Each check says what to do when it fails.

use std::io::Write;

use af_policy::error::{Report, codes};
use bollard::query_parameters::{BuildImageOptionsBuilder, RemoveImageOptionsBuilder};
use futures_util::StreamExt;
use serde::Serialize;

use super::output::{Format, print_json};
use crate::runtime::local::{LocalOptions, host, networks};
use crate::runtime::{docker_client, images};

/// One check.
#[derive(Debug, Serialize)]
pub struct Check {
    /// What was checked.
    pub name: &'static str,
    /// Whether it passed.
    pub ok: bool,
    /// What was found.
    pub detail: String,
    /// What to do if it failed.
    pub remedy: Option<String>,
}

/// Run every check; `Err` when any failed.
pub async fn run(
    options: &LocalOptions,
    format: Format,
    out: &mut dyn Write,
) -> Result<Vec<Check>, Report> {
    let mut checks = Vec::new();
    let docker = match docker_client::connect().await {
        Ok(d) => {
            let version = d.version().await.ok();
            checks.push(Check {
                name: "docker daemon",
                ok: true,
                detail: version
                    .map(|v| {
                        format!(
                            "Docker Engine {} (API {})",
                            v.version.unwrap_or_default(),
                            v.api_version.unwrap_or_default()
                        )
                    })
                    .unwrap_or_else(|| "reachable".to_owned()),
                remedy: None,
            });
            Some(d)
        }
        Err(e) => {
            checks.push(Check {
                name: "docker daemon",
                ok: false,
                detail: e.to_string(),
                remedy: Some("Start Docker (or set DOCKER_HOST to its socket) and check you may use it: `docker info`.".to_owned()),
            });
            None
        }
    };
    if let Some(docker) = &docker {
        // Address pool.
        match networks::used_subnets(docker).await {
            Ok(used) => {
                let free = networks::free_subnets(options.address_pool, &used, "doctor").len();
                checks.push(Check {
                    name: "address pool",
                    ok: free >= 2,
                    detail: format!("{free} free /24 in {} (each environment takes 2)", options.address_pool),
                    remedy: (free < 2).then(|| "Run `af down` on environments you no longer need, or set AF_ADDRESS_POOL to an unused private range such as 10.214.0.0/16.".to_owned()),
                });
            }
            Err(e) => checks.push(Check {
                name: "address pool",
                ok: false,
                detail: e.to_string(),
                remedy: Some("Check `docker network ls` works.".to_owned()),
            }),
        }
        // Building images.
        let tag = "af-doctor-probe:latest";
        let context = images::tar_of(&[(
            "Dockerfile",
            b"FROM scratch\nLABEL dev.antifailure.managed=true\n",
            0o644,
        )])
        .unwrap_or_default();
        let opts = BuildImageOptionsBuilder::default().t(tag).rm(true).build();
        let mut stream = docker.build_image(opts, None, Some(bollard::body_full(context.into())));
        let mut error = None;
        while let Some(item) = stream.next().await {
            match item {
                Ok(info) => {
                    if let Some(d) = info.error_detail {
                        error = d.message;
                    }
                }
                Err(e) => error = Some(e.to_string()),
            }
        }
        let _ = docker
            .remove_image(
                tag,
                Some(RemoveImageOptionsBuilder::default().force(true).build()),
                None,
            )
            .await;
        checks.push(Check {
            name: "image builds",
            ok: error.is_none(),
            detail: error.clone().unwrap_or_else(|| "a FROM scratch image builds".to_owned()),
            remedy: error.map(|_| "Check the daemon's storage driver and free disk space (`docker info`, `df -h`).".to_owned()),
        });
    }
    // Sidecar binary.
    let sidecar = match &options.sidecar_source {
        images::SidecarSource::Image(i) => Check {
            name: "sidecar image",
            ok: true,
            detail: format!("AF_PROXY_IMAGE={i}"),
            remedy: None,
        },
        images::SidecarSource::Binary(p) => match images::is_static_elf(p) {
            Ok(true) => Check {
                name: "sidecar binary",
                ok: true,
                detail: p.display().to_string(),
                remedy: None,
            },
            _ => Check {
                name: "sidecar binary",
                ok: false,
                detail: format!("{} is missing or not static", p.display()),
                remedy: Some(build_hint()),
            },
        },
        images::SidecarSource::Lookup => match images::find_proxy_binary(None) {
            Ok(p) => Check {
                name: "sidecar binary",
                ok: true,
                detail: p.display().to_string(),
                remedy: None,
            },
            Err(e) => Check {
                name: "sidecar binary",
                ok: false,
                detail: e.to_string(),
                remedy: Some(build_hint()),
            },
        },
    };
    checks.push(sidecar);
    // What this host would expose to a service with IPv6 on (never to one without).
    let exposure = host::Exposure::read();
    checks.push(Check {
        name: "host over IPv6",
        ok: true,
        detail: match exposure.with_ipv6() {
            None => format!("{exposure}: nothing a service could reach, even with egress.allow_ipv6"),
            Some(reach) => format!(
                "{exposure}: services run with IPv6 off and cannot reach it; a manifest with egress.allow_ipv6 would let them reach {reach}"
            ),
        },
        remedy: None,
    });
    // Loopback ports for publishing.
    let port = std::net::TcpListener::bind("127.0.0.1:0");
    checks.push(Check {
        name: "loopback ports",
        ok: port.is_ok(),
        detail: match &port {
            Ok(_) => "127.0.0.1 can take published ports".to_owned(),
            Err(e) => format!("127.0.0.1: {e}"),
        },
        remedy: port.is_err().then(|| {
            "Free some local ports; web services and the admin API are published on 127.0.0.1."
                .to_owned()
        }),
    });

    match format {
        Format::Json => print_json(out, &checks),
        Format::Human => {
            for c in &checks {
                let mark = if c.ok { "✓" } else { "✗" };
                let _ = writeln!(out, "{mark} {:<16} {}", c.name, c.detail);
                if let Some(r) = &c.remedy {
                    let _ = writeln!(out, "  → {r}");
                }
            }
        }
    }
    let failed: Vec<&str> = checks.iter().filter(|c| !c.ok).map(|c| c.name).collect();
    if failed.is_empty() {
        Ok(checks)
    } else {
        Err(Report::new(
            &codes::RUN_DOCKER_UNREACHABLE,
            format!("af doctor found problems: {}.", failed.join(", ")),
        )
        .with_next("Follow the → line under each failed check."))
    }
}

fn build_hint() -> String {
    format!(
        "Build it: RUSTFLAGS='-C target-feature=+crt-static' cargo build --release --target {} -p af-proxy (or set AF_PROXY_BINARY / AF_PROXY_IMAGE).",
        images::STATIC_TARGET
    )
}
