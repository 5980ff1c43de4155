//! A WebDriver session on headless Chromium, driven through a chromedriver this test starts:
//! the few W3C WebDriver commands the page's tests use, as JSON over hyper.
//!
//! fantoccini and thirtyfour were the crates to use, but both bring Mozilla's `webdriver`
//! crate (MPL-2.0, not in deny.toml's licences) and second versions of http, cookie and icu.

use std::net::SocketAddr;
use std::path::Path;
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
/// Where Debian's packages put the two programs.
const CHROMEDRIVER: &str = "/usr/bin/chromedriver";
const CHROMIUM: &str = "/usr/bin/chromium";

/// A chromedriver process of this test, killed when dropped.
pub(crate) struct Driver {
    child: Child,
    addr: SocketAddr,
}

impl Driver {
    /// Start chromedriver on a free loopback port and wait until it serves.
    pub(crate) async fn start() -> Driver {
        for program in [CHROMEDRIVER, CHROMIUM] {
            assert!(
                Path::new(program).exists(),
                "{program} is missing: the browser tests need Debian's chromium and \
                 chromium-driver packages, which .ci/run installs \
                 (apt-get install -y chromium chromium-driver)"
            );
        }
        let addr = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free port");
        let child = Command::new(CHROMEDRIVER)
            .arg(format!("--port={}", addr.port()))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("chromedriver starts");
        let driver = Driver { child, addr };
        let deadline = Instant::now() + WAIT;
        loop {
            if let Ok(status) = call(addr, Method::GET, "/status", None).await
                && status["value"]["ready"] == true
            {
                return driver;
            }
            assert!(
                Instant::now() < deadline,
                "chromedriver did not become ready"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// A new headless Chromium window of `width` × `height`, its profile in `profile`.
    pub(crate) async fn session(&self, profile: &Path, width: u32, height: u32) -> Session {
        let capabilities = json!({"capabilities": {"alwaysMatch": {
            "browserName": "chrome",
            "goog:chromeOptions": {
                "binary": CHROMIUM,
                "args": [
                    "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                    "--no-first-run", "--disable-background-networking",
                    format!("--window-size={width},{height}"),
                    format!("--user-data-dir={}", profile.display()),
                ],
            },
        }}});
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
        .expect("chromedriver answers");
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
