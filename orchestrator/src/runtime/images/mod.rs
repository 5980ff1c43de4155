//! The image supply: every image a runtime runs, made on this machine's Docker daemon and, for
//! a cluster, delivered to its nodes. Both runtimes call it; it knows neither. Only a service's
//! prebuilt image (`image:`) is ever pulled; a registry the user names is only pushed to.
//!
//! - `static_binaries`: the project's static binaries found, and a file judged static;
//! - `scratch`: images `FROM scratch` of those binaries, the sidecar's among them
//!   ([`ensure_sidecar_image`], [`ensure_scratch_image`]);
//! - `service`: service images built from their contexts, cached by build input, named for an
//!   environment, pruned ([`build_service_image`]);
//! - `prebuilt`: a service's own image, held or pulled ([`service_image`] chooses);
//! - `build`: one build on the daemon, its output streamed; `archive`: contexts as tar;
//! - `delivery`: how a cluster's nodes get them ([`Delivery`], [`Image`]);
//! - `registry`: a registry the user names, pushed to by content, pulled by digest ([`Registry`]);
//! - `stores`: the system CA stores an image has ([`system_stores`]), for the environment CA.

mod archive;
mod build;
mod delivery;
mod prebuilt;
mod registry;
mod scratch;
mod service;
mod static_binaries;
mod stores;

pub use self::archive::tar_of;
pub use self::delivery::{Delivery, Image};
pub use self::prebuilt::{prebuilt_image, service_image};
pub use self::registry::{Credentials, PULL_CREDENTIALS_VAR, REPOSITORY_VAR, Registry, Repository};
pub use self::scratch::{SidecarSource, ensure_scratch_image, ensure_sidecar_image};
pub use self::service::{
    SERVICE_IMAGES_KEPT, SERVICE_REPO, build_service_image, service_reference, tag,
};
pub use self::static_binaries::{
    FORWARD_BINARY, PROXY_BINARY, STATIC_TARGET, find_proxy_binary, find_static_binary,
    is_static_elf,
};
pub use self::stores::{stores_in, system_stores};

/// The `dev.antifailure.kind` of the images made here.
pub mod kind {
    /// The sidecar image (shared by environments, so it carries no env label).
    pub const SIDECAR_IMAGE: &str = "sidecar-image";
    /// A service image, the build of one context (shared by environments, no env label).
    pub const SERVICE_IMAGE: &str = "service-image";
}
