//! Every image an environment's pods run, made and delivered before anything is created on the
//! cluster, so a build that fails, a registry that refuses or a k3d that is missing leaves
//! nothing behind: the probe's (also the gates' and the keeper's), the sidecar's and each
//! service's, through the runtime-neutral image supply ([`images`]). A service image's system
//! trust stores are read here too, while it is on this machine.
//!
//! An image the user named (`AF_PROBE_IMAGE`, `AF_PROXY_IMAGE`) is handed to a registry cluster
//! as it is: it is theirs to make pullable.

use std::collections::BTreeMap;
use std::path::PathBuf;

use futures_util::FutureExt;
use futures_util::future::BoxFuture;

use super::names::Names;
use super::probe::image::{ProbeSource, local_probe_image};
use crate::plan::EnvPlan;
use crate::runtime::images::{
    self, Credentials, Delivery, Image, PULL_CREDENTIALS_VAR, Registry, Repository, SidecarSource,
};
use crate::runtime::{Progress, RuntimeError, docker_client};
use crate::trust::store::ImageFile;

/// What the environment's pods run.
#[derive(Debug, Clone, Default)]
pub struct Supplied {
    /// The `imagePullPolicy` of every image here.
    pub pull_policy: &'static str,
    /// The probe's image (the gates' and the keeper's too).
    pub probe: String,
    /// The sidecar's image.
    pub sidecar: String,
    /// Each service's image, by service name.
    pub services: BTreeMap<String, ServiceImage>,
    /// The Docker configuration the nodes pull with (a pull secret's `.dockerconfigjson`),
    /// when the images come from a registry that needs one.
    pub pull_secret: Option<PullSecret>,
}

/// One service's image.
#[derive(Debug, Clone)]
pub struct ServiceImage {
    /// The reference the nodes run.
    pub reference: String,
    /// The system trust stores it has, read on this machine.
    pub stores: Vec<(&'static str, ImageFile)>,
}

/// A pull secret's Docker configuration; printed as redacted.
#[derive(Clone)]
pub struct PullSecret(pub Vec<u8>);

impl std::fmt::Debug for PullSecret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("PullSecret(redacted)")
    }
}

/// The credentials the nodes pull with (`AF_IMAGE_PULL_CREDENTIALS`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum PullCredentials {
    /// The ones Docker pushes with (`docker`, the default).
    #[default]
    Docker,
    /// None: the nodes pull on their own (an EKS node role, a GKE node service account).
    None,
    /// The ones a Docker configuration file holds (a read-only robot account).
    File(PathBuf),
}

impl PullCredentials {
    /// Read `AF_IMAGE_PULL_CREDENTIALS`.
    pub fn from_var(value: Option<&str>) -> Self {
        match value.map(str::trim) {
            None | Some("" | "docker") => PullCredentials::Docker,
            Some("none") => PullCredentials::None,
            Some(path) => PullCredentials::File(PathBuf::from(path)),
        }
    }
}

/// Where the images come from and how they reach the nodes.
#[derive(Debug, Clone)]
pub struct Sources {
    /// How images reach the nodes.
    pub delivery: Delivery,
    /// The repository a registry cluster's images go to (`AF_IMAGE_REPOSITORY`), as written:
    /// read when `af up` needs it, so a typo never stops `af down` or `af status`.
    pub repository: Option<String>,
    /// The nodes' pull credentials.
    pub pull_credentials: PullCredentials,
    /// The sidecar's image source.
    pub sidecar: SidecarSource,
    /// The probe's image source.
    pub probe: ProbeSource,
}

/// What makes an environment's images (a trait, so the call-sequence tests supply fixed ones).
pub trait Supply: Send + Sync {
    /// The images of `plan`'s pods, delivered.
    fn supply<'a>(
        &'a self,
        plan: &'a EnvPlan,
        names: &'a Names,
        progress: &'a dyn Progress,
    ) -> BoxFuture<'a, Result<Supplied, RuntimeError>>;
}

impl Supply for Sources {
    fn supply<'a>(
        &'a self,
        plan: &'a EnvPlan,
        names: &'a Names,
        progress: &'a dyn Progress,
    ) -> BoxFuture<'a, Result<Supplied, RuntimeError>> {
        self.made(plan, names, progress).boxed()
    }
}

impl Sources {
    /// Make and deliver every image of `plan`'s pods.
    async fn made(
        &self,
        plan: &EnvPlan,
        names: &Names,
        progress: &dyn Progress,
    ) -> Result<Supplied, RuntimeError> {
        let registry = self.registry(plan)?;
        self.delivery.preflight().await?;
        let pull_secret = match &registry {
            Some(registry) => self.pull_secret(registry)?,
            None => None,
        };
        let docker = docker_client::connect().await?;
        let registry = registry.as_ref();
        let named_here = self.delivery == Delivery::Registry;
        let probe = match &self.probe {
            ProbeSource::Image(named) if named_here => named.clone(),
            source => {
                let local = local_probe_image(&docker, source, progress).await?;
                self.delivery
                    .deliver(
                        registry,
                        &docker,
                        Image {
                            what: "probe",
                            kind: "probe",
                            local: &local,
                        },
                        progress,
                    )
                    .await?
            }
        };
        let sidecar = match &self.sidecar {
            SidecarSource::Image(named) if named_here => named.clone(),
            source => {
                let local = images::ensure_sidecar_image(&docker, source, progress).await?;
                self.delivery
                    .deliver(
                        registry,
                        &docker,
                        Image {
                            what: "sidecar",
                            kind: "sidecar",
                            local: &local,
                        },
                        progress,
                    )
                    .await?
            }
        };
        let mut services = BTreeMap::new();
        for service in &plan.services {
            let made = images::service_image(&docker, service, progress).await?;
            let local = images::service_reference(&plan.env, &service.name);
            images::tag(&docker, &made, &local).await?;
            let reader = format!("af-store-{}-{}", names.env(), service.name);
            let stores = images::system_stores(&docker, &local, &reader).await?;
            let reference = match (&service.image, &self.delivery) {
                // A prebuilt image is the cluster's to pull from where it is, as named.
                (Some(prebuilt), Delivery::Registry) => prebuilt.clone(),
                _ => {
                    self.delivery
                        .deliver(
                            registry,
                            &docker,
                            Image {
                                what: &service.name,
                                kind: "service",
                                local: &local,
                            },
                            progress,
                        )
                        .await?
                }
            };
            services.insert(service.name.clone(), ServiceImage { reference, stores });
        }
        Ok(Supplied {
            pull_policy: self.delivery.pull_policy(),
            probe,
            sidecar,
            services,
            pull_secret,
        })
    }

    /// The registry a registry cluster's images are pushed to, with the credentials Docker
    /// holds for it; refused (AF-RUN-013) when none is named and af has an image to push.
    fn registry(&self, plan: &EnvPlan) -> Result<Option<Registry>, RuntimeError> {
        if self.delivery != Delivery::Registry {
            return Ok(None);
        }
        let Some(written) = &self.repository else {
            let all_named = matches!(self.probe, ProbeSource::Image(_))
                && matches!(self.sidecar, SidecarSource::Image(_))
                && plan.services.is_empty();
            return if all_named {
                Ok(None)
            } else {
                Err(RuntimeError::NoRegistry)
            };
        };
        let repository = Repository::parse(written)?;
        Ok(Some(Registry {
            credentials: Credentials::of_docker(&repository)?,
            repository,
        }))
    }

    /// The Docker configuration of the pull secret the nodes use, from the credentials
    /// `AF_IMAGE_PULL_CREDENTIALS` names.
    fn pull_secret(&self, registry: &Registry) -> Result<Option<PullSecret>, RuntimeError> {
        let repository = &registry.repository;
        let credentials = match &self.pull_credentials {
            PullCredentials::None => return Ok(None),
            PullCredentials::Docker => registry.credentials.clone(),
            PullCredentials::File(path) => Credentials::of_file(repository, path)?,
        };
        if !credentials.is_some() {
            return Ok(None);
        }
        credentials
            .docker_config_json(repository)
            .map(PullSecret)
            .map(Some)
            .ok_or_else(|| RuntimeError::CannotRun {
                statement: format!(
                    "The credentials for {} are an identity token, which a node cannot pull with; nothing was created.",
                    repository.host()
                ),
                next: format!(
                    "Set {PULL_CREDENTIALS_VAR} to a Docker configuration file holding a user name and password for it, or to none if the nodes pull on their own."
                ),
            })
    }
}
