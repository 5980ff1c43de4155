//! `af ui` in real browsers: headless Chromium (Debian's `chromium` and `chromium-driver`) and
//! Firefox (Debian's `firefox-esr` and Mozilla's geckodriver from crates.io), which
//! `fixtures/test/run` installs, on the page served for a real af-proxy on loopback. In each
//! browser the list shows the sidecar's decisions and takes new ones without a reload, names the
//! service each came from and filters by it, a refusal's detail names its code and rule, a message
//! shows its code and first link and its HTML runs no script, and the overview lists the counters
//! and the catalogue. Each view's screenshot is written to `target/ui-screenshots/`. The server
//! refuses a request for another `Host` or without the run's secret.

#![allow(
    clippy::expect_used,
    clippy::unwrap_used,
    reason = "test helpers fail the test by panicking, like #[test] functions"
)]

mod browser;
mod scripted;

use af_orchestrator::admin;
use af_sidecar_api::admin::DecisionsQuery;
use std::net::Ipv4Addr;

use browser::webdriver::Browser;
use browser::{Page, mail, screenshot_path};
use bytes::Bytes;
use http_body_util::{BodyExt, Empty};
use hyper::Request;
use hyper_util::rt::TokioIo;
use serde_json::json;
use tokio::net::TcpStream;

/// A message whose HTML would change `#m` if any of its scripts ran.
const SCRIPTED: &str = "<p id=\"m\">no script ran</p>\
    <script>document.getElementById('m').textContent = 'SCRIPT RAN';</script>\
    <img src=\"x\" onerror=\"document.getElementById('m').textContent = 'SCRIPT RAN'\">\
    <a href=\"https://shop.example.test/confirm?token=abc\">Confirm</a>";

/// Decisions of every kind: mocked, refused by a rule, refused by the default, captured.
async fn traffic(page: &Page) {
    let sidecar = &page.sidecar;
    assert_eq!(
        sidecar
            .send("GET", "http://ads.tracker.test/pixel", None)
            .await,
        403
    );
    assert_eq!(
        sidecar
            .send("GET", "http://unlisted.example.test/", None)
            .await,
        403
    );
    sidecar
        .send("GET", "http://api.github.com/user", None)
        .await;
    let sent = sidecar
        .send(
            "POST",
            "http://api.sendgrid.com/v3/mail/send",
            Some(&mail("Confirm your account", SCRIPTED)),
        )
        .await;
    assert_eq!(sent, 202, "the capture answers as SendGrid");
}

/// Each view's test, run once in each browser (`chromium::…`, `firefox::…`).
macro_rules! in_each_browser {
    ($($test:ident),* $(,)?) => {
        mod chromium {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $test() {
                    super::$test(super::Browser::Chromium).await;
                }
            )*
        }
        mod firefox {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $test() {
                    super::$test(super::Browser::Firefox).await;
                }
            )*
        }
    };
}

in_each_browser!(
    decisions_are_listed_newest_first_and_a_new_one_appears_without_a_reload,
    each_request_names_the_service_it_came_from_and_the_list_filters_by_it,
    a_message_shows_its_code_and_first_link_and_its_html_runs_no_script,
    the_overview_shows_the_sidecars_counters_and_the_catalogue_in_deciding_order,
);

async fn decisions_are_listed_newest_first_and_a_new_one_appears_without_a_reload(kind: Browser) {
    let page = Page::start("requests").await;
    traffic(&page).await;
    let (_driver, browser) = page.browser(kind, 1280).await;
    browser.goto(&page.url).await;
    for host in [
        "ads.tracker.test",
        "unlisted.example.test",
        "api.github.com",
        "api.sendgrid.com",
    ] {
        browser.wait_for_text("#requests tbody", host).await;
    }
    let first = browser.find("#requests tbody tr").await.expect("a row");
    assert!(
        browser.text(&first).await.contains("api.sendgrid.com"),
        "newest first"
    );

    // A marker on this document: a reload would lose it.
    browser
        .run("window.afMarker = 'kept'; return null;", json!([]))
        .await;
    assert_eq!(
        page.sidecar
            .send("GET", "http://late.tracker.test/new", None)
            .await,
        403
    );
    browser
        .wait_for_text("#requests tbody tr:first-child", "late.tracker.test")
        .await;
    assert_eq!(
        browser.run("return window.afMarker;", json!([])).await,
        "kept",
        "the page was not reloaded"
    );

    // The refused request's detail: its code, its rule, why it won, the rule that would allow it.
    let refused = admin::all_decisions(
        page.sidecar.admin,
        browser::sidecar::TOKEN,
        &DecisionsQuery::default(),
    )
    .await
    .expect("the journal")
    .into_iter()
    .find(|r| {
        r.entry
            .as_decision()
            .is_some_and(|d| d.host == "ads.tracker.test")
    })
    .expect("the refused request is journaled");
    let d = refused.entry.as_decision().expect("a decision");
    let code = d.code.as_deref().expect("a refusal has a code").to_owned();
    let row = browser
        .find(&format!("#requests tbody tr[data-seq=\"{}\"]", refused.seq))
        .await
        .expect("the refused row");
    assert_eq!(
        browser.attribute(&row, "data-outcome").await.as_deref(),
        Some("refused")
    );
    // A person clicks the request's text; Firefox's WebDriver cannot scroll to a <tr> itself.
    let request = browser
        .find(&format!(
            "#requests tbody tr[data-seq=\"{}\"] td.request",
            refused.seq
        ))
        .await
        .expect("the refused row's request");
    browser.click(&request).await;
    browser.wait_for_text("#detail-code", &code).await;
    browser.wait_for_text("#detail-rule", "rules[2]").await;
    browser.wait_for_text("#detail-refusal", "Next:").await;
    browser
        .wait_for_text("#detail-explain", "→ block (rules[2] *.tracker.test)")
        .await;
    let snippet = browser
        .wait_for_text("#detail-snippet", "host: ads.tracker.test")
        .await;
    let snippet = browser.text(&snippet).await;
    assert!(snippet.contains("mode: allow"), "{snippet}");
    assert!(snippet.contains("/pixel"), "{snippet}");
    browser.screenshot(&screenshot_path("requests", kind)).await;

    browser.resize(420, 900).await;
    browser
        .wait_for_text("#requests tbody", "late.tracker.test")
        .await;
    browser
        .screenshot(&screenshot_path("requests-narrow", kind))
        .await;
    browser.end().await;
}

async fn a_message_shows_its_code_and_first_link_and_its_html_runs_no_script(kind: Browser) {
    let page = Page::start("inbox").await;
    traffic(&page).await;
    let (_driver, browser) = page.browser(kind, 1280).await;
    browser.goto(&format!("{}#inbox", page.url)).await;
    let item = browser
        .wait_for_text("#messages li", "Confirm your account")
        .await;
    browser.click(&item).await;
    let code = browser.wait_for_text("#message-code", "482913").await;
    assert_eq!(browser.text(&code).await, "482913");
    let first = browser
        .wait_for_text(
            "#message-links li:first-child a",
            "https://shop.example.test/confirm",
        )
        .await;
    assert_eq!(
        browser.attribute(&first, "href").await.as_deref(),
        Some("https://shop.example.test/confirm?token=abc")
    );

    // The HTML is shown in a frame without scripts: its marker is as written.
    let frame = browser.find("#message-html").await.expect("the HTML frame");
    assert_eq!(
        browser.attribute(&frame, "sandbox").await.as_deref(),
        Some("")
    );
    browser.frame(Some(&frame)).await;
    let marker = browser.wait_for_text("#m", "script").await;
    assert_eq!(browser.text(&marker).await, "no script ran");
    browser.frame(None).await;
    browser.screenshot(&screenshot_path("inbox", kind)).await;

    // A new message lands in the list without a reload.
    let sent = page
        .sidecar
        .send(
            "POST",
            "http://api.sendgrid.com/v3/mail/send",
            Some(&mail("Your receipt", "<p>Thanks</p>")),
        )
        .await;
    assert_eq!(sent, 202);
    browser
        .wait_for_text("#messages li:first-child", "Your receipt")
        .await;

    // The control: the same HTML as a page of its own runs its script, so the marker would
    // have shown a script that ran in the frame.
    let data = format!(
        "data:text/html;base64,{}",
        base64::Engine::encode(&base64::engine::general_purpose::STANDARD, SCRIPTED)
    );
    browser.goto(&data).await;
    browser.wait_for_text("#m", "SCRIPT RAN").await;
    browser.end().await;
}

async fn the_overview_shows_the_sidecars_counters_and_the_catalogue_in_deciding_order(
    kind: Browser,
) {
    let page = Page::start("overview").await;
    traffic(&page).await;
    let (_driver, browser) = page.browser(kind, 1280).await;
    browser.goto(&format!("{}#overview", page.url)).await;
    browser
        .wait_for_text("#overview-counters", "af_proxy_requests_total")
        .await;
    let catalogue = browser
        .wait_for_text("#overview-catalogue", "*.tracker.test")
        .await;
    let text = browser.text(&catalogue).await;
    let at = |needle: &str| {
        text.find(needle)
            .unwrap_or_else(|| panic!("{needle} in {text}"))
    };
    // Exact hosts decide before a wildcard, whatever the order written; the default is last.
    assert!(at("api.github.com") < at("*.tracker.test"), "{text}");
    assert!(at("api.sendgrid.com") < at("*.tracker.test"), "{text}");
    assert!(at("*.tracker.test") < at("(no rule matches)"), "{text}");
    browser.screenshot(&screenshot_path("overview", kind)).await;
    browser.end().await;
}

/// The addresses the two services of [`each_request_names_the_service_it_came_from_and_the_list_filters_by_it`]
/// send from; the test itself sends from 127.0.0.1, which is no service.
const WEB: Ipv4Addr = Ipv4Addr::new(127, 0, 0, 2);
const WORKER: Ipv4Addr = Ipv4Addr::new(127, 0, 0, 3);

async fn each_request_names_the_service_it_came_from_and_the_list_filters_by_it(kind: Browser) {
    let page =
        Page::start_among("services", &[("web", "127.0.0.2"), ("worker", "127.0.0.3")]).await;
    let sidecar = &page.sidecar;
    for (from, url) in [
        (WEB, "http://web.tracker.test/a"),
        (WORKER, "http://worker.tracker.test/b"),
        (Ipv4Addr::LOCALHOST, "http://nobody.tracker.test/c"),
    ] {
        assert_eq!(sidecar.send_from(from, "GET", url, None).await, 403);
    }
    let (_driver, browser) = page.browser(kind, 1280).await;
    browser.goto(&page.url).await;
    // The control: every request is listed, each named by the service that sent it; a client
    // that is no service is shown by its address.
    for (host, from) in [
        ("web.tracker.test", "web"),
        ("worker.tracker.test", "worker"),
        ("nobody.tracker.test", "127.0.0.1"),
    ] {
        browser.wait_for_text("#requests tbody", host).await;
        let rows = browser
            .run(
                "return [...document.querySelectorAll('#requests tbody tr')]
                   .filter((r) => r.querySelector('td.request').textContent.includes(arguments[0]))
                   .map((r) => r.querySelector('td.from').textContent);",
                json!([host]),
            )
            .await;
        assert_eq!(rows, json!([from]), "{host} is shown from {from}");
    }

    // Filtered by a service's name, only its requests stay.
    browser
        .run(
            "const input = document.querySelector('#filters [name=service]');
             input.value = arguments[0];
             input.dispatchEvent(new Event('input', { bubbles: true }));
             return null;",
            json!(["worker"]),
        )
        .await;
    let shown = browser
        .run(
            "return [...document.querySelectorAll('#requests tbody tr td.request')].map((c) => c.textContent);",
            json!([]),
        )
        .await;
    assert_eq!(shown, json!(["GET worker.tracker.test:80/b"]));

    // The detail names the service too.
    let only = browser
        .find("#requests tbody tr td.request")
        .await
        .expect("the worker's row");
    browser.click(&only).await;
    browser.wait_for_text("#detail-service", "worker").await;
    browser
        .screenshot(&screenshot_path("requests-by-service", kind))
        .await;
    browser.end().await;
}

/// `GET path` to the ui server with `Host: host`: the status and whether any CORS header came.
async fn get(page: &Page, host: &str, path: &str) -> (u16, bool) {
    let stream = TcpStream::connect(page.addr).await.expect("the ui server");
    let (mut send, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .expect("HTTP/1.1");
    tokio::spawn(conn);
    let req = Request::get(path)
        .header("host", host)
        .header("origin", "http://evil.example.test")
        .body(Empty::<Bytes>::new())
        .expect("a request");
    let resp = send.send_request(req).await.expect("an answer");
    let cors = resp
        .headers()
        .keys()
        .any(|k| k.as_str().starts_with("access-control-"));
    let status = resp.status().as_u16();
    let _ = resp.into_body().collect().await;
    (status, cors)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_server_answers_only_its_own_host_with_the_secret_and_never_cors() {
    let page = Page::start("gate").await;
    let host = page.addr.to_string();
    let secret_path = page
        .url
        .strip_prefix(&format!("http://{host}"))
        .expect("the URL names the listener")
        .to_owned();
    // The control: the page and its API with the secret, sent to its own address.
    assert_eq!(get(&page, &host, &secret_path).await, (200, false));
    let records = format!("{secret_path}api/records");
    assert_eq!(get(&page, &host, &records).await, (200, false));
    let har = format!("{secret_path}api/har");
    assert_eq!(get(&page, &host, &har).await, (200, false));
    // Another name that resolves here (DNS rebinding), no secret, a wrong secret.
    let rebound = format!("rebind.example.test:{}", page.addr.port());
    assert_eq!(get(&page, &rebound, &records).await, (421, false));
    assert_eq!(get(&page, "localhost", &records).await, (421, false));
    assert_eq!(get(&page, &host, "/api/records").await, (404, false));
    let wrong = format!("/{}/api/records", "0".repeat(32));
    assert_eq!(get(&page, &host, &wrong).await, (404, false));
}
