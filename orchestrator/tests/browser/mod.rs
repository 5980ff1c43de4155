//! What the page's browser tests run against: a real af-proxy on loopback with decisions and
//! captured mail in its journal, the ui server pointed at its admin API (no Docker: at most a
//! runtime that answers from a script), and headless Chromium or Firefox driven through their
//! WebDriver programs.

pub(crate) mod sidecar;
pub(crate) mod webdriver;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use af_orchestrator::env_id::EnvId;
use af_orchestrator::runtime::{AdminEndpoint, EnvStatus, ServiceStatus};
use af_orchestrator::ui::{Environment, Source, Ui};
use af_policy::egress::{Catalogue, EgressSpec};
use serde_json::json;
use tokio::sync::oneshot;

use crate::scripted::Scripted;
use sidecar::{Sidecar, TOKEN};
use webdriver::{Browser, Driver, Session};

/// How long a wait in these tests lasts before it fails them.
pub(crate) const WAIT: Duration = Duration::from_secs(20);

/// The test's catalogue: capture and mock answer in the sidecar, a wildcard block rule and the
/// default refuse.
pub(crate) fn egress() -> EgressSpec {
    serde_json::from_value(json!({
        "default": "block",
        "rules": [
            {"host": "api.sendgrid.com", "mode": "capture"},
            {"host": "api.github.com", "mode": "mock"},
            {"host": "*.tracker.test", "mode": "block", "note": "no tracking from tests"},
        ],
    }))
    .expect("an egress section")
}

/// A SendGrid send as a service makes it, with a sign-in code, two links and `html`.
pub(crate) fn mail(subject: &str, html: &str) -> String {
    json!({
        "personalizations": [{"to": [{"email": "ada@example.test"}]}],
        "from": {"email": "noreply@shop.example.test"},
        "subject": subject,
        "content": [
            {"type": "text/plain", "value": "Your code is 482913. Confirm: https://shop.example.test/confirm?token=abc Unsubscribe: https://shop.example.test/unsubscribe"},
            {"type": "text/html", "value": html},
        ],
    })
    .to_string()
}

/// A directory of this test's, removed when dropped.
pub(crate) struct Scratch(PathBuf);

impl Scratch {
    fn new(tag: &str) -> Scratch {
        static N: AtomicU64 = AtomicU64::new(0);
        let dir = std::env::temp_dir().join(format!(
            "af-ui-{tag}-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::create_dir_all(&dir).expect("a scratch directory");
        Scratch(dir)
    }

    fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A sidecar and the page served for it.
pub(crate) struct Page {
    /// The sidecar.
    pub sidecar: Sidecar,
    /// The page's address, secret included.
    pub url: String,
    /// Where the ui server listens.
    pub addr: SocketAddr,
    stop: Option<oneshot::Sender<()>>,
    scratch: Scratch,
}

impl Page {
    /// Start a sidecar and serve the page for it, with no runtime behind it.
    pub(crate) async fn start(tag: &str) -> Page {
        Page::start_with(tag, None).await
    }

    /// Start a sidecar and serve the page for it, in an environment of `services` (each
    /// `(name, address)`) whose runtime answers `status`.
    pub(crate) async fn start_among(tag: &str, services: &[(&str, &str)]) -> Page {
        let env = EnvId::parse("shop-0a1b2c").expect("an environment id");
        let services = services
            .iter()
            .map(|(name, address)| ServiceStatus {
                name: (*name).to_owned(),
                state: "running".to_owned(),
                running: true,
                url: None,
                addresses: vec![address.parse().expect("an IP address")],
            })
            .collect();
        let status = EnvStatus {
            env: env.clone(),
            exists: true,
            sidecar: None,
            services,
            journal: None,
            watched: None,
            on_loss: None,
            containment: None,
        };
        let runtime = Scripted {
            status: Some(status),
            ..Scripted::new()
        };
        let environment = Environment {
            runtime: Arc::new(runtime),
            env,
        };
        Page::start_with(tag, Some(environment)).await
    }

    async fn start_with(tag: &str, environment: Option<Environment>) -> Page {
        let scratch = Scratch::new(tag);
        let egress = egress();
        let sidecar = Sidecar::start(&egress, scratch.path()).await;
        let source = Source {
            admin: AdminEndpoint::direct(sidecar.admin, TOKEN.to_owned()),
            catalogue: Some(Catalogue::compile(&egress).expect("the catalogue compiles")),
            environment,
        };
        let ui = Ui::bind(None, source).await.expect("the ui binds");
        let (url, addr) = (ui.url(), ui.addr());
        let (stop, stopped) = oneshot::channel();
        tokio::spawn(ui.serve(async {
            let _ = stopped.await;
        }));
        Page {
            sidecar,
            url,
            addr,
            stop: Some(stop),
            scratch,
        }
    }

    /// `browser` on the page: its driver and one session, `width` wide.
    pub(crate) async fn browser(&self, browser: Browser, width: u32) -> (Driver, Session) {
        let driver = Driver::start(browser).await;
        let profile = self
            .scratch
            .path()
            .join(format!("{}-{width}", browser.name()));
        let session = driver.session(&profile, width, 900).await;
        (driver, session)
    }
}

impl Drop for Page {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }
}

/// The workspace's target directory (CI artefacts go under it).
pub(crate) fn target_dir() -> PathBuf {
    af_fixtures::cargo::target_dir(&af_fixtures::cargo::workspace_root())
}

/// `target/ui-screenshots/NAME-BROWSER.png`, the CI artefact of each view in each browser.
pub(crate) fn screenshot_path(name: &str, browser: Browser) -> PathBuf {
    target_dir()
        .join("ui-screenshots")
        .join(format!("{name}-{}.png", browser.name()))
}
