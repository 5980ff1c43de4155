//! `af-proxy --check-config FILE`: the configuration is read and checked, nothing is bound or
//! written, and the answer is exit 0 or the coded report.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::Path;
use std::process::{Command, Output};

use common::*;

fn check_config(config: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_af-proxy"))
        .arg("--check-config")
        .arg(config)
        .output()
        .unwrap()
}

#[test]
fn a_good_configuration_passes_and_nothing_is_bound_or_written() {
    let dir = TempDir::new("check-good");
    let listen = Listen::free();
    let journal = dir.path().join("journal");
    let resolver = "127.0.0.1:53".parse().unwrap();
    let yaml =
        Setup::new(&egress(&[("api.allowed.test", "allow")]), resolver).yaml(&journal, &listen);
    let config = dir.path().join("sidecar.yaml");
    std::fs::write(&config, &yaml).unwrap();
    // A port the file names is taken: starting would fail with AF-NET-002, checking does not
    // bind, so it passes.
    let taken = std::net::TcpListener::bind(listen.proxy).unwrap();
    let out = check_config(&config);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert!(
        stdout.contains("a valid sidecar configuration (version 1, env test-env)"),
        "{stdout}"
    );
    assert!(out.stderr.is_empty(), "{out:?}");
    assert!(!journal.exists(), "the journal was created");
    drop(taken);
    for addr in [listen.admin, listen.proxy, listen.http, listen.tls] {
        std::net::TcpListener::bind(addr).unwrap();
    }
    // The control: the same file with the port taken does not start.
    let taken = std::net::TcpListener::bind(listen.proxy).unwrap();
    let started = Command::new(env!("CARGO_BIN_EXE_af-proxy"))
        .arg("--config")
        .arg(&config)
        .output()
        .unwrap();
    assert!(
        String::from_utf8_lossy(&started.stderr).contains("AF-NET-002"),
        "{started:?}"
    );
    drop(taken);
}

#[test]
fn a_bad_configuration_gets_its_coded_report_and_nothing_is_bound_or_written() {
    let dir = TempDir::new("check-bad");
    let listen = Listen::free();
    let journal = dir.path().join("journal");
    let resolver = "127.0.0.1:53".parse().unwrap();
    let good = Setup::new(&egress(&[]), resolver).yaml(&journal, &listen);
    let cases = [
        (
            "a wrong type",
            good.replace("journal:\n", "limits:\n  max_connections: many\njournal:\n"),
            "AF-NET-001",
        ),
        (
            "another version",
            good.replace("version: 1\n", "version: 2\n"),
            "AF-NET-007",
        ),
        (
            "an environment CA that does not read (compiled at start)",
            format!("{good}tls:\n  ca_cert_pem: not-a-certificate\n  ca_key_pem: not-a-key\n"),
            "AF-NET-001",
        ),
    ];
    for (what, yaml, code) in cases {
        let config = dir.path().join("sidecar.yaml");
        std::fs::write(&config, yaml).unwrap();
        let out = check_config(&config);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(6), "{what}: {stderr}");
        assert!(stderr.starts_with(&format!("{code} ")), "{what}: {stderr}");
        assert_eq!(stderr.lines().count(), 2, "{what}: one sentence: {stderr}");
        assert!(stderr.contains("\n  Next: "), "{what}: {stderr}");
        assert!(out.stdout.is_empty(), "{what}: {out:?}");
        assert!(!journal.exists(), "{what}: the journal was created");
    }
    let missing = check_config(&dir.path().join("absent.yaml"));
    let stderr = String::from_utf8_lossy(&missing.stderr);
    assert!(stderr.starts_with("AF-NET-001 "), "{stderr}");
    for addr in [listen.admin, listen.proxy, listen.http, listen.tls] {
        std::net::TcpListener::bind(addr).unwrap();
    }
}
