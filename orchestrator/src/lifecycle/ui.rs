//! `af ui [--port PORT] [--no-open]`: the environment's page (see [`crate::ui`]) served on
//! 127.0.0.1 until Ctrl-C, its address printed and opened in a browser when one can be.

use std::io::Write;
use std::process::{Command, Stdio};
use std::sync::Arc;

use af_policy::egress::Catalogue;
use af_policy::error::Report;

use super::output::{Format, print_json};
use crate::env_id::EnvId;
use crate::runtime::Runtime;
use crate::ui::{Environment, Source, Ui};

/// How the page is served.
pub struct Page {
    /// The manifest's catalogue, when one was found.
    pub catalogue: Option<Catalogue>,
    /// The port asked for; a free one when `None`.
    pub port: Option<u16>,
    /// Whether to open a browser on it.
    pub open: bool,
}

/// Run `af ui`: reach the sidecar's admin API the way the runtime does (a published port, or a
/// port-forward held while the page is served), serve the page and wait for Ctrl-C.
pub async fn run(
    runtime: Arc<dyn Runtime>,
    env: &EnvId,
    page: Page,
    format: Format,
    out: &mut dyn Write,
) -> Result<(), Report> {
    let admin = runtime.admin(env).await.map_err(|e| e.report())?;
    let source = Source {
        admin,
        catalogue: page.catalogue,
        environment: Some(Environment {
            runtime,
            env: env.clone(),
        }),
    };
    let ui = Ui::bind(page.port, source).await?;
    let url = ui.url();
    let opened = page.open && open_browser(&url);
    match format {
        Format::Json => print_json(
            out,
            &serde_json::json!({ "env": env.as_str(), "url": url, "opened": opened }),
        ),
        Format::Human => {
            let _ = writeln!(out, "af ui for env {env}: {url}");
            let hint = if opened {
                "Opened in the browser; Ctrl-C stops serving it."
            } else {
                "Open it in a browser; Ctrl-C stops serving it."
            };
            let _ = writeln!(out, "{hint}");
        }
    }
    let _ = out.flush();
    ui.serve(async {
        let _ = tokio::signal::ctrl_c().await;
    })
    .await;
    Ok(())
}

/// Ask the desktop to open `url` (`xdg-open`, which honours `$BROWSER`); whether it started.
fn open_browser(url: &str) -> bool {
    let child = Command::new("xdg-open")
        .arg(url)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn();
    match child {
        Ok(mut child) => {
            // Reaped off the runtime's threads; xdg-open returns once it handed the URL over.
            tokio::task::spawn_blocking(move || child.wait());
            true
        }
        Err(_) => false,
    }
}
