//! The real `af-proxy` binary: a `kill -9` and restart loses no record the admin API returned,
//! and an invalid configuration is refused with AF-NET-001 before anything is bound.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::collections::HashSet;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use common::*;
use serde_json::Value;

async fn all_records(admin: &Admin) -> Vec<Value> {
    let mut out = Vec::new();
    let mut since = 0;
    loop {
        let page = admin
            .json(&format!("/v1/decisions?since={since}&limit=1000"))
            .await;
        let recs = page["records"].as_array().unwrap().clone();
        if recs.is_empty() {
            return out;
        }
        since = recs.last().unwrap()["seq"].as_u64().unwrap();
        out.extend(recs);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_9_and_restart_loses_no_record_the_admin_api_returned() {
    let dns = resolver(vec![("api.blocked.test", vec![upstream_ip()])]).await;
    let dir = TempDir::new("kill9");
    let listen = Listen::free();
    let setup = Setup::new(&egress(&[("api.blocked.test", "block")]), dns.addr);
    let journal = dir.path().join("journal");
    let config = dir.path().join("sidecar.yaml");
    std::fs::write(&config, setup.yaml(&journal, &listen)).unwrap();
    let admin = Admin(listen.admin);

    let mut child = spawn_binary(&config);
    wait_healthy(&admin).await;

    // Traffic keeps flowing while the admin API is read and while the process is killed.
    let stop = Arc::new(AtomicBool::new(false));
    let traffic = {
        let stop = stop.clone();
        let proxy = listen.proxy;
        tokio::spawn(async move {
            let mut n = 0u32;
            while !stop.load(Ordering::Relaxed) {
                let url = format!("http://api.blocked.test/r{n}");
                let _ = tokio::time::timeout(Duration::from_secs(2), async {
                    let stream = tokio::net::TcpStream::connect(proxy).await.ok()?;
                    let (mut send, conn) =
                        hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(stream))
                            .await
                            .ok()?;
                    tokio::spawn(conn);
                    let req = hyper::Request::get(&url)
                        .header("host", "api.blocked.test")
                        .body(http_body_util::Empty::<bytes::Bytes>::new())
                        .ok()?;
                    send.send_request(req).await.ok()
                })
                .await;
                n += 1;
            }
        })
    };
    let mut returned: Vec<Value> = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(20);
    while returned.len() < 200 && Instant::now() < deadline {
        returned = all_records(&admin).await;
    }
    assert!(
        returned.len() >= 50,
        "too little traffic was journaled: {}",
        returned.len()
    );
    // Kill right after a read, with requests still in flight.
    returned = all_records(&admin).await;
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    stop.store(true, Ordering::Relaxed);
    let _ = traffic.await;

    // A write the kill interrupted leaves a torn last line; recovery must cut it.
    let last_segment = std::fs::read_dir(&journal)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "ndjson"))
        .max()
        .unwrap();
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .open(&last_segment)
        .unwrap();
    std::io::Write::write_all(&mut f, b"{\"seq\":999999,\"at\":\"20").unwrap();
    drop(f);

    let mut child = spawn_binary(&config);
    wait_healthy(&admin).await;
    let after = all_records(&admin).await;
    let after_set: HashSet<String> = after.iter().map(|r| r.to_string()).collect();
    let lost: Vec<&Value> = returned
        .iter()
        .filter(|r| !after_set.contains(&r.to_string()))
        .collect();
    assert!(
        lost.is_empty(),
        "{} of {} returned records were lost: {lost:?}",
        lost.len(),
        returned.len()
    );

    // New records continue the sequence, past the torn line's pretend number.
    let max_before = after
        .iter()
        .map(|r| r["seq"].as_u64().unwrap())
        .max()
        .unwrap();
    let got = proxy_get(listen.proxy, "http://api.blocked.test/after-restart").await;
    assert_eq!(got.status, 403);
    let deadline = Instant::now() + Duration::from_secs(10);
    let newest = loop {
        let page = admin
            .json(&format!("/v1/decisions?since={max_before}"))
            .await;
        if let Some(r) = page["records"].as_array().unwrap().first() {
            break r.clone();
        }
        assert!(Instant::now() < deadline, "no record after restart");
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert_eq!(newest["seq"].as_u64().unwrap(), max_before + 1);
    assert_eq!(newest["path"], "/after-restart");
    child.kill().unwrap();
    child.wait().unwrap();
}

async fn assert_refused_before_binding(yaml: &str, code: &str) {
    let dir = TempDir::new("badconfig");
    let config = dir.path().join("sidecar.yaml");
    std::fs::write(&config, yaml).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_af-proxy"))
        .arg("--config")
        .arg(&config)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(6), "{stderr}");
    assert!(stderr.contains(code), "{stderr}");
    assert!(stderr.contains("Next:"), "{stderr}");
}

#[tokio::test]
async fn an_invalid_configuration_is_refused_with_net_001_and_nothing_is_bound() {
    let dns = resolver(vec![]).await;
    let dir = TempDir::new("invalid");
    let listen = Listen::free();
    let journal = dir.path().join("journal");
    let good =
        Setup::new(&egress(&[("api.allowed.test", "allow")]), dns.addr).yaml(&journal, &listen);
    let bad_rule = Setup::new(
        "  rules:\n    - host: \"api..bad.test\"\n      mode: allow\n      rate_limit: lots\n",
        dns.addr,
    )
    .yaml(&journal, &listen);
    let cases = [
        ("an egress catalogue that does not compile", bad_rule),
        (
            "a wrong type",
            good.replace("journal:\n", "limits:\n  max_connections: many\njournal:\n"),
        ),
        ("an unknown key", format!("{good}surprise: true\n")),
        (
            "a guard override wider than allowed",
            good.replace(TRUSTED, "0.0.0.0/0"),
        ),
        (
            "a missing token",
            good.replace(&format!("  token: {TOKEN}\n"), ""),
        ),
        ("a short token", good.replace(TOKEN, "short")),
    ];
    for (what, yaml) in &cases {
        let config = dir.path().join("sidecar.yaml");
        std::fs::write(&config, yaml).unwrap();
        let mut child = Command::new(env!("CARGO_BIN_EXE_af-proxy"))
            .arg("--config")
            .arg(&config)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let status = child.wait().unwrap();
        let mut stderr = String::new();
        std::io::Read::read_to_string(child.stderr.as_mut().unwrap(), &mut stderr).unwrap();
        assert_eq!(status.code(), Some(6), "{what}: {stderr}");
        assert!(stderr.starts_with("AF-NET-001 "), "{what}: {stderr}");
        assert!(stderr.contains("Next:"), "{what}: {stderr}");
        assert!(!journal.exists(), "{what}: the journal was created");
    }
    // Nothing was bound: every configured port is still free.
    for addr in [listen.admin, listen.proxy, listen.http, listen.tls] {
        std::net::TcpListener::bind(addr).unwrap();
    }
    // And the good one starts (a positive control for the harness itself).
    let config = dir.path().join("good.yaml");
    std::fs::write(&config, &good).unwrap();
    let mut child = spawn_binary(&config);
    wait_healthy(&Admin(listen.admin)).await;
    child.kill().unwrap();
    child.wait().unwrap();
}

#[tokio::test]
async fn a_taken_port_is_refused_with_net_002() {
    let dns = resolver(vec![]).await;
    let dir = TempDir::new("bind");
    let listen = Listen::free();
    let taken = std::net::TcpListener::bind(listen.proxy).unwrap();
    let yaml = Setup::new(&egress(&[]), dns.addr).yaml(&dir.path().join("journal"), &listen);
    assert_refused_before_binding(&yaml, "AF-NET-002").await;
    drop(taken);
}

#[tokio::test]
async fn the_open_files_limit_is_raised_to_the_hard_limit_and_a_short_one_is_warned_of() {
    let dns = resolver(vec![]).await;
    let dir = TempDir::new("nofile");
    let listen = Listen::free();
    let yaml = Setup::new(&egress(&[]), dns.addr).yaml(&dir.path().join("journal"), &listen);
    let config = dir.path().join("sidecar.yaml");
    std::fs::write(&config, yaml).unwrap();
    let log = dir.path().join("stderr.log");
    // Started with a soft limit of 256 under a hard limit of 4096 (util-linux's prlimit).
    let mut child = Command::new("prlimit")
        .args(["--nofile=256:4096", "--"])
        .arg(env!("CARGO_BIN_EXE_af-proxy"))
        .arg("--config")
        .arg(&config)
        .env("AF_PROXY_LOG", "warn")
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    let admin = Admin(listen.admin);
    wait_healthy(&admin).await;
    assert_eq!(admin.metric("af_proxy_open_files_limit").await, 4096);
    child.kill().unwrap();
    child.wait().unwrap();
    // The default caps (4096 client and 4096 upstream connections) need more than 4096
    // descriptors.
    let stderr = std::fs::read_to_string(&log).unwrap();
    assert!(
        stderr.contains("open-files limit is below what limits.max_connections and limits.max_upstream_connections need"),
        "{stderr}"
    );
    assert!(stderr.contains("\"needed\":25600"), "{stderr}");
}
