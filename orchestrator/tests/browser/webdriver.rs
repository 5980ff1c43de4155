//! A WebDriver session on headless Chromium or Firefox, driven through the browser's driver
//! (chromedriver, geckodriver) this test starts: the few W3C WebDriver commands the page's
//! tests use, as JSON over hyper.
//!
//! fantoccini and thirtyfour were the crates to use, but both bring Mozilla's `webdriver`
//! crate (MPL-2.0, not in deny.toml's licences) and second versions of http, cookie and icu.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use base64::Engine as _;
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::{Method, Request};
use hyper_util::rt::TokioIo;
use serde_json::{Value, json};
use tokio::net::TcpStream;

use super::WAIT;

/// The W3C name of an element reference in JSON.
const ELEMENT: &str = "element-6066-11e4-a52e-4f735466cecf";
/// The proxy both browsers are given: the discard port on loopback, where nothing listens,
/// so a request of the browser's own for an outside name fails here.
const NOWHERE_HOST: &str = "127.0.0.1";
const NOWHERE_PORT: u16 = 9;
const NOWHERE: &str = "127.0.0.1:9";

/// The browsers the page is tested in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Browser {
    /// Debian's `chromium`, driven by its `chromium-driver`.
    Chromium,
    /// Debian's `firefox-esr`, driven by Mozilla's geckodriver (`cargo install geckodriver`).
    Firefox,
}

impl Browser {
    /// Its name in file names.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Browser::Chromium => "chromium",
            Browser::Firefox => "firefox",
        }
    }

    /// The browser's program, where Debian's package puts it.
    fn binary(self) -> PathBuf {
        PathBuf::from(match self {
            Browser::Chromium => "/usr/bin/chromium",
            Browser::Firefox => "/usr/bin/firefox-esr",
        })
    }

    /// The driver's program: Debian's chromedriver; geckodriver from `PATH` or cargo's bin
    /// directory, where `cargo install` puts it.
    fn driver(self) -> PathBuf {
        match self {
            Browser::Chromium => PathBuf::from("/usr/bin/chromedriver"),
            Browser::Firefox => {
                let cargo_bin = std::env::var_os("CARGO_HOME")
                    .map(PathBuf::from)
                    .or_else(|| std::env::var_os("HOME").map(|h| Path::new(&h).join(".cargo")))
                    .map(|home| home.join("bin"));
                std::env::var_os("PATH")
                    .map(|path| std::env::split_paths(&path).collect::<Vec<_>>())
                    .unwrap_or_default()
                    .into_iter()
                    .chain(cargo_bin)
                    .map(|dir| dir.join("geckodriver"))
                    .find(|p| p.exists())
                    .unwrap_or_else(|| PathBuf::from("geckodriver"))
            }
        }
    }

    /// How to install both programs, for the message of a test that finds one missing.
    fn install(self) -> &'static str {
        match self {
            Browser::Chromium => "apt-get install -y chromium chromium-driver",
            Browser::Firefox => {
                "apt-get install -y firefox-esr; cargo install geckodriver --locked"
            }
        }
    }

    /// The driver's command line, listening on `port`.
    fn driver_args(self, port: u16) -> Vec<String> {
        match self {
            Browser::Chromium => vec![format!("--port={port}")],
            // Marionette on a free port of its own, so tests can run side by side.
            Browser::Firefox => vec![format!("--port={port}"), "--marionette-port=0".to_owned()],
        }
    }

    /// A new headless window of `width` × `height`, its profile in `profile`.
    fn capabilities(self, profile: &Path, width: u32, height: u32) -> Value {
        let binary = self.binary();
        match self {
            Browser::Chromium => json!({"capabilities": {"alwaysMatch": {
                "browserName": "chrome",
                "goog:chromeOptions": {
                    "binary": binary,
                    "args": [
                        "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                        "--no-first-run", "--disable-background-networking",
                        // Anything but loopback (never proxied) goes to a closed port here.
                        format!("--proxy-server=http://{NOWHERE}"),
                        format!("--window-size={width},{height}"),
                        format!("--user-data-dir={}", profile.display()),
                    ],
                },
            }}}),
            Browser::Firefox => json!({"capabilities": {"alwaysMatch": {
                "browserName": "firefox",
                "moz:firefoxOptions": {
                    "binary": binary,
                    "args": [
                        "-headless", "-no-remote",
                        format!("--width={width}"), format!("--height={height}"),
                        "-profile", profile.display().to_string(),
                    ],
                    // The browser's own background requests are off, and anything but
                    // loopback (never proxied) goes to a closed port here.
                    "prefs": {
                        "app.update.enabled": false,
                        "browser.shell.checkDefaultBrowser": false,
                        "browser.safebrowsing.downloads.remote.enabled": false,
                        "datareporting.policy.dataSubmissionEnabled": false,
                        "extensions.update.enabled": false,
                        "network.captive-portal-service.enabled": false,
                        "network.connectivity-service.enabled": false,
                        "network.dns.disablePrefetch": true,
                        "network.proxy.type": 1,
                        "network.proxy.http": NOWHERE_HOST,
                        "network.proxy.http_port": NOWHERE_PORT,
                        "network.proxy.ssl": NOWHERE_HOST,
                        "network.proxy.ssl_port": NOWHERE_PORT,
                        "network.proxy.share_proxy_settings": true,
                    },
                },
            }}}),
        }
    }
}

/// A browser driver process of this test, killed when dropped.
pub(crate) struct Driver {
    child: Child,
    addr: SocketAddr,
    browser: Browser,
}

impl Driver {
    /// Start `browser`'s driver on a free loopback port and wait until it serves.
    pub(crate) async fn start(browser: Browser) -> Driver {
        for program in [browser.driver(), browser.binary()] {
            assert!(
                program.exists(),
                "{} is missing: the browser tests need it ({}; fixtures/test/run does this)",
                program.display(),
                browser.install()
            );
        }
        let addr = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free port");
        let child = Command::new(browser.driver())
            .args(browser.driver_args(addr.port()))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("the browser's driver starts");
        let driver = Driver {
            child,
            addr,
            browser,
        };
        let deadline = Instant::now() + WAIT;
        loop {
            if let Ok(status) = call(addr, Method::GET, "/status", None).await
                && status["value"]["ready"] == true
            {
                return driver;
            }
            assert!(
                Instant::now() < deadline,
                "{:?}'s driver did not become ready",
                browser
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// A new headless browser window of `width` × `height`, its profile in `profile`.
    pub(crate) async fn session(&self, profile: &Path, width: u32, height: u32) -> Session {
        std::fs::create_dir_all(profile).expect("the browser's profile directory");
        let capabilities = self.browser.capabilities(profile, width, height);
        let answer = call(self.addr, Method::POST, "/session", Some(capabilities))
            .await
            .expect("a session");
        let id = answer["value"]["sessionId"]
            .as_str()
            .unwrap_or_else(|| panic!("no session: {answer}"))
            .to_owned();
        Session {
            addr: self.addr,
            id,
        }
    }
}

impl Drop for Driver {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// One browser session.
pub(crate) struct Session {
    addr: SocketAddr,
    id: String,
}

/// An element found on the page.
#[derive(Debug, Clone)]
pub(crate) struct Element(String);

impl Session {
    async fn command(&self, method: Method, path: &str, body: Option<Value>) -> Value {
        let path = format!("/session/{}{path}", self.id);
        let answer = call(self.addr, method, &path, body)
            .await
            .unwrap_or_else(|e| panic!("{path}: {e}"));
        if answer["value"]["error"].is_string() {
            panic!("{path}: {}", answer["value"]);
        }
        answer["value"].clone()
    }

    /// Open `url`.
    pub(crate) async fn goto(&self, url: &str) {
        self.command(Method::POST, "/url", Some(json!({ "url": url })))
            .await;
    }

    /// Run `script` (a function body; `arguments` holds `args`) and return what it returns.
    pub(crate) async fn run(&self, script: &str, args: Value) -> Value {
        self.command(
            Method::POST,
            "/execute/sync",
            Some(json!({ "script": script, "args": args })),
        )
        .await
    }

    /// The first element `css` selects, if any.
    pub(crate) async fn find(&self, css: &str) -> Option<Element> {
        let path = format!("/session/{}/element", self.id);
        let answer = call(
            self.addr,
            Method::POST,
            &path,
            Some(json!({ "using": "css selector", "value": css })),
        )
        .await
        .expect("the driver answers");
        answer["value"][ELEMENT]
            .as_str()
            .map(|id| Element(id.to_owned()))
    }

    /// Wait until `css` selects an element whose text contains `text`; that element.
    pub(crate) async fn wait_for_text(&self, css: &str, text: &str) -> Element {
        let deadline = Instant::now() + WAIT;
        let mut last = String::new();
        loop {
            // The page may replace the element between the two commands (a live update): then
            // it is found again.
            if let Some(element) = self.find(css).await {
                let path = format!("/session/{}/element/{}/text", self.id, element.0);
                if let Ok(answer) = call(self.addr, Method::GET, &path, None).await
                    && let Some(seen) = answer["value"].as_str()
                {
                    if seen.contains(text) {
                        return element;
                    }
                    last = seen.to_owned();
                }
            }
            if Instant::now() >= deadline {
                let page = self
                    .run("return document.body.innerText.slice(0, 2000);", json!([]))
                    .await;
                panic!(
                    "no {css} with text {text:?} appeared (last seen: {last:?}); the page: {page}"
                );
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// The element's rendered text.
    pub(crate) async fn text(&self, element: &Element) -> String {
        self.command(Method::GET, &format!("/element/{}/text", element.0), None)
            .await
            .as_str()
            .unwrap_or_default()
            .to_owned()
    }

    /// An attribute of the element.
    pub(crate) async fn attribute(&self, element: &Element, name: &str) -> Option<String> {
        self.command(
            Method::GET,
            &format!("/element/{}/attribute/{name}", element.0),
            None,
        )
        .await
        .as_str()
        .map(str::to_owned)
    }

    /// Click the element.
    pub(crate) async fn click(&self, element: &Element) {
        self.command(
            Method::POST,
            &format!("/element/{}/click", element.0),
            Some(json!({})),
        )
        .await;
    }

    /// Make the frame `element` the context of the next commands; `None` for the page itself.
    pub(crate) async fn frame(&self, element: Option<&Element>) {
        let id = match element {
            Some(e) => json!({ ELEMENT: e.0 }),
            None => Value::Null,
        };
        self.command(Method::POST, "/frame", Some(json!({ "id": id })))
            .await;
    }

    /// A PNG of the window, written to `path`.
    pub(crate) async fn screenshot(&self, path: &Path) {
        let encoded = self.command(Method::GET, "/screenshot", None).await;
        let png = base64::engine::general_purpose::STANDARD
            .decode(encoded.as_str().unwrap_or_default())
            .expect("a base64 PNG");
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).expect("the screenshot directory");
        }
        std::fs::write(path, png).expect("the screenshot is written");
    }

    /// Resize the window.
    pub(crate) async fn resize(&self, width: u32, height: u32) {
        self.command(
            Method::POST,
            "/window/rect",
            Some(json!({ "width": width, "height": height })),
        )
        .await;
    }

    /// End the session (closes the browser).
    pub(crate) async fn end(self) {
        let path = format!("/session/{}", self.id);
        let _ = call(self.addr, Method::DELETE, &path, None).await;
    }
}

/// One WebDriver command: JSON in, JSON out.
async fn call(
    addr: SocketAddr,
    method: Method,
    path: &str,
    body: Option<Value>,
) -> Result<Value, String> {
    let stream = TcpStream::connect(addr).await.map_err(|e| e.to_string())?;
    let (mut send, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .map_err(|e| e.to_string())?;
    tokio::spawn(conn);
    let bytes = body.map(|b| b.to_string()).unwrap_or_default();
    let req = Request::builder()
        .method(method)
        .uri(path)
        .header("host", addr.to_string())
        .header("content-type", "application/json")
        .body(Full::new(Bytes::from(bytes)))
        .map_err(|e| e.to_string())?;
    let resp = send.send_request(req).await.map_err(|e| e.to_string())?;
    let body = resp
        .into_body()
        .collect()
        .await
        .map_err(|e| e.to_string())?
        .to_bytes();
    serde_json::from_slice(&body).map_err(|e| format!("{e}: {}", String::from_utf8_lossy(&body)))
}
