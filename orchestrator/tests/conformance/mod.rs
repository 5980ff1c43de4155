//! The conformance suite: what every runtime promises, one function per behaviour, each taking
//! a [`Harness`]. A runtime's test file calls every function here with its own harness.
//!
//! Egress behaviours never consult [`af_orchestrator::runtime::Capabilities`] and have no skip:
//! a runtime that cannot contain does not pass. Each of them checks a positive control in the
//! same run (the allowed host is reached, through the same sidecar), because "blocked" and
//! "never governed" look the same from inside a service.

#![allow(
    clippy::expect_used,
    reason = "test helpers fail the test by panicking, like #[test] functions"
)]

pub(crate) mod escape;

use std::net::{IpAddr, SocketAddr};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};

use std::time::{Duration, Instant, SystemTime};

use af_orchestrator::admin;
use af_orchestrator::env_id::EnvId;
use af_orchestrator::lifecycle::inbox::{self, Wait};
use af_orchestrator::lifecycle::output::Format;
use af_orchestrator::lifecycle::webhook::{self, Prepared, Trigger};
use af_orchestrator::plan::{EnvPlan, Kind, ServicePlan};
use af_orchestrator::runtime::{Action, Progress, Quiet, ServiceUp};
use af_orchestrator::trust;
use af_orchestrator::webhook::{Provider, WebhookSecrets};
use af_policy::egress::{Mode, RuleSpec};
use af_sidecar_api::admin::{DecisionsQuery, InboxQuery};
use af_sidecar_api::journal::{DecisionRecord, Record};
use futures_util::StreamExt;

use crate::support::docker::{PROBE_STORE, PROBE_STORE_ROOT};
use crate::support::{Harness, field, probe, probe_plan};

/// Start an environment of probe services, panicking with the coded report if it fails.
pub(crate) async fn up(
    h: &dyn Harness,
    env: &EnvId,
    services: &[&str],
) -> af_orchestrator::runtime::UpReport {
    let plan = probe_plan(h, env, services);
    match h.runtime().up(&plan, &Quiet).await {
        Ok(r) => r,
        Err(e) => panic!("up {env}: {}", e.report()),
    }
}

/// The positive control: the allowed host is reached through the sidecar, from `service`.
pub(crate) async fn allowed_is_reached(h: &dyn Harness, env: &EnvId, service: &str) {
    let url = format!("http://{}/control", h.internet().allowed.0);
    let v = probe(h, env, service, &["proxy-get", &url]).await;
    assert_eq!(
        field(&v, "status"),
        "200",
        "positive control: {url} through the proxy: {v}"
    );
    assert!(
        field(&v, "body").contains("upstream api.allowed.test"),
        "positive control reached the simulated host: {v}"
    );
}

/// Wait until a dial from `service` to the restarted sidecar is no longer refused, at most
/// 30 s. `restart_sidecar` returns once the API lists only the new pod, but the data path
/// (kube-proxy, the policy enforcer) programs that pod's new address a moment later, and a
/// dial in that moment is refused just as it was while the sidecar restarted.
async fn until_the_sidecar_is_routed(h: &dyn Harness, env: &EnvId, service: &str) {
    let url = format!("http://{}/control", h.internet().allowed.0);
    let started = Instant::now();
    loop {
        let v = probe(h, env, service, &["proxy-get", &url]).await;
        let refused = field(&v, "error").contains("Connection refused");
        if !refused || started.elapsed() > Duration::from_secs(30) {
            eprintln!(
                "the restarted sidecar answered after {:?}",
                started.elapsed()
            );
            return;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

async fn journal(h: &dyn Harness, env: &EnvId) -> Vec<Record> {
    let a = h
        .runtime()
        .admin(env)
        .await
        .unwrap_or_else(|e| panic!("admin: {}", e.report()));
    admin::all_decisions(a.addr, &a.token, &DecisionsQuery::default())
        .await
        .unwrap_or_else(|e| panic!("journal: {}", e.report()))
}

fn decisions_for<'a>(records: &'a [Record], host: &str) -> Vec<&'a DecisionRecord> {
    records
        .iter()
        .filter_map(|r| r.entry.as_decision())
        .filter(|d| d.host == host)
        .collect()
}

/// An allowed host is reached through the proxy, and the decision is journaled with the
/// client address the runtime's status gives the service (what `af ui` names it by).
pub(crate) async fn allowed_host_is_reached_through_the_proxy(h: &dyn Harness) {
    let env = h.env("allow");
    up(h, &env, &["probe"]).await;
    allowed_is_reached(h, &env, "probe").await;
    let records = journal(h, &env).await;
    let allowed = decisions_for(&records, &h.internet().allowed.0);
    assert!(
        allowed.iter().any(|d| d.allowed),
        "journal has the allowed decision: {records:?}"
    );
    let status = h
        .runtime()
        .status(&env)
        .await
        .unwrap_or_else(|e| panic!("{}", e.report()));
    let probe = status
        .services
        .iter()
        .find(|s| s.name == "probe")
        .unwrap_or_else(|| panic!("the probe service: {status:?}"));
    assert!(
        allowed
            .iter()
            .all(|d| probe.addresses.contains(&d.client.ip())),
        "each request came from an address of the probe service {:?}: {allowed:?}",
        probe.addresses
    );
}

/// A host with no rule is refused with 403 and the refusal is journaled.
pub(crate) async fn host_without_rule_is_refused_and_journaled(h: &dyn Harness) {
    let env = h.env("block");
    up(h, &env, &["probe"]).await;
    allowed_is_reached(h, &env, "probe").await;
    let url = format!("http://{}/secret", h.internet().unlisted.0);
    let v = probe(h, &env, "probe", &["proxy-get", &url]).await;
    assert_eq!(field(&v, "status"), "403", "{url}: {v}");
    assert!(
        !field(&v, "body").contains("upstream other.test"),
        "the unlisted host was not reached: {v}"
    );
    let records = journal(h, &env).await;
    let refused = decisions_for(&records, &h.internet().unlisted.0);
    assert!(
        refused.iter().any(|d| !d.allowed),
        "journal has the refusal: {records:?}"
    );
}

/// A client that ignores the proxy variables and resolves the name itself gets the sidecar's
/// address and is decided by the transparent listener: allowed reaches, unlisted is refused.
pub(crate) async fn client_ignoring_proxy_variables_is_still_decided(h: &dyn Harness) {
    let env = h.env("direct");
    up(h, &env, &["probe"]).await;
    allowed_is_reached(h, &env, "probe").await;
    let allowed = format!("http://{}/direct", h.internet().allowed.0);
    let v = probe(h, &env, "probe", &["direct-get", &allowed]).await;
    assert_eq!(
        field(&v, "status"),
        "200",
        "direct client to the allowed name: {v}"
    );
    assert!(
        field(&v, "body").contains("upstream api.allowed.test"),
        "{v}"
    );
    let resolved: IpAddr = field(&v, "resolved")
        .parse()
        .unwrap_or_else(|_| panic!("resolved: {v}"));
    assert_ne!(
        resolved,
        h.internet().allowed.1,
        "the name resolved to the sidecar, not the host: {v}"
    );
    let unlisted = format!("http://{}/direct", h.internet().unlisted.0);
    let v = probe(h, &env, "probe", &["direct-get", &unlisted]).await;
    assert_eq!(
        field(&v, "status"),
        "403",
        "direct client to the unlisted name is refused: {v}"
    );
    let records = journal(h, &env).await;
    assert!(
        decisions_for(&records, &h.internet().unlisted.0)
            .iter()
            .any(|d| !d.allowed),
        "the transparent refusal is journaled: {records:?}"
    );
}

/// A direct connection to an outside address, bypassing DNS, fails.
pub(crate) async fn direct_connection_to_an_address_fails(h: &dyn Harness) {
    let env = h.env("addr");
    up(h, &env, &["probe"]).await;
    allowed_is_reached(h, &env, "probe").await;
    for port in [80, 443] {
        let target = SocketAddr::new(h.internet().allowed.1, port).to_string();
        let v = probe(h, &env, "probe", &["tcp", &target]).await;
        assert_eq!(
            field(&v, "connected"),
            "false",
            "direct TCP to {target}: {v}"
        );
    }
}

/// UDP DNS straight to the outside resolver fails (no tunnel around the sidecar's DNS).
pub(crate) async fn udp_dns_to_an_outside_resolver_fails(h: &dyn Harness) {
    let env = h.env("udp");
    up(h, &env, &["probe"]).await;
    // Positive control: the sidecar resolved the allowed name through this same resolver.
    allowed_is_reached(h, &env, "probe").await;
    let server = SocketAddr::new(h.internet().resolver, 53).to_string();
    let v = probe(h, &env, "probe", &["dns", &server, &h.internet().allowed.0]).await;
    assert_eq!(field(&v, "answered"), "false", "UDP DNS to {server}: {v}");
}

/// The metadata address is unreachable, directly and through the proxy.
pub(crate) async fn metadata_address_is_unreachable(h: &dyn Harness) {
    let env = h.env("meta");
    up(h, &env, &["probe"]).await;
    allowed_is_reached(h, &env, "probe").await;
    let meta = h.internet().metadata;
    let v = probe(
        h,
        &env,
        "probe",
        &["tcp", &SocketAddr::new(meta, 80).to_string()],
    )
    .await;
    assert_eq!(
        field(&v, "connected"),
        "false",
        "direct TCP to the metadata address: {v}"
    );
    let url = format!("http://{meta}/latest/meta-data/");
    let v = probe(h, &env, "probe", &["proxy-get", &url]).await;
    assert_ne!(
        field(&v, "status"),
        "200",
        "the proxy refuses the metadata address: {v}"
    );
    assert!(!field(&v, "body").contains("upstream metadata"), "{v}");
    let v = probe(h, &env, "probe", &["direct-get", &url]).await;
    assert!(
        !field(&v, "body").contains("upstream metadata"),
        "direct HTTP to the metadata address: {v}"
    );
}

/// The host cannot be reached from a service: not through the internal network's gateway
/// address, nor the engine's default bridge. `host_port` is a port the test listens on, on
/// every host address.
pub(crate) async fn host_is_unreachable_through_the_gateway(h: &dyn Harness, host_port: u16) {
    let env = h.env("gw");
    up(h, &env, &["probe"]).await;
    allowed_is_reached(h, &env, "probe").await;
    let addrs = h.host_side_addrs(&env).await;
    for addr in addrs {
        let target = SocketAddr::new(addr, host_port).to_string();
        let v = probe(h, &env, "probe", &["tcp", &target]).await;
        assert_eq!(
            field(&v, "connected"),
            "false",
            "a service reached the host at {target}: {v}"
        );
    }
}

/// Two environments cannot reach each other, by address or by name.
pub(crate) async fn environments_cannot_reach_each_other(h: &dyn Harness) {
    let a = h.env("enva");
    let b = h.env("envb");
    up(h, &a, &["probe"]).await;
    up(h, &b, &["peer"]).await;
    allowed_is_reached(h, &a, "probe").await;
    let peer = h
        .service_addr(&b, "peer")
        .await
        .unwrap_or_else(|| panic!("peer has an address"));
    let target = SocketAddr::new(peer, 8080).to_string();
    // Positive control: the peer is up and reachable from its own environment.
    let v = probe(h, &b, "peer", &["tcp", &target]).await;
    assert_eq!(
        field(&v, "connected"),
        "true",
        "peer reachable inside its environment: {v}"
    );
    let v = probe(h, &a, "probe", &["tcp", &target]).await;
    assert_eq!(
        field(&v, "connected"),
        "false",
        "environment a reached b's service by address: {v}"
    );
    let v = probe(h, &a, "probe", &["proxy-get", "http://peer:8080/"]).await;
    assert!(
        !field(&v, "body").contains("probe peer ok"),
        "a reached b's service by name through the proxy: {v}"
    );
    let v = probe(h, &a, "probe", &["direct-get", "http://peer:8080/"]).await;
    assert!(
        !field(&v, "body").contains("probe peer ok"),
        "a reached b's service by name directly: {v}"
    );
}

/// `up` starts the services, reports each with a URL that answers, and a second `up` reuses
/// everything.
pub(crate) async fn up_reports_services_and_is_idempotent(h: &dyn Harness) {
    let env = h.env("idem");
    let first = up(h, &env, &["probe", "second"]).await;
    assert_eq!(first.services.len(), 2);
    assert!(
        first
            .services
            .iter()
            .all(|s| s.ready && s.action == Action::Created),
        "{first:?}"
    );
    if h.runtime().capabilities().published_urls {
        let url = first.services[0]
            .url
            .clone()
            .unwrap_or_else(|| panic!("a web service has a URL: {first:?}"));
        let (host, port, _) = af_fixtures::sim::split_url(&url).unwrap_or_else(|| panic!("{url}"));
        let addr: SocketAddr = format!("{host}:{port}")
            .parse()
            .unwrap_or_else(|e| panic!("{url}: {e}"));
        assert!(
            addr.ip().is_loopback(),
            "published on 127.0.0.1 only: {url}"
        );
        let answer = af_fixtures::sim::get_direct(addr, &host, "/")
            .await
            .unwrap_or_else(|e| panic!("{url}: {e}"));
        assert!(answer.body.contains("probe probe ok"), "{url}: {answer:?}");
    }
    let second = up(h, &env, &["probe", "second"]).await;
    assert!(
        second.services.iter().all(|s| s.action == Action::Reused),
        "second up reuses: {second:?}"
    );
    assert_eq!(first.services[0].url, second.services[0].url);
    let status = h
        .runtime()
        .status(&env)
        .await
        .unwrap_or_else(|e| panic!("{}", e.report()));
    assert!(
        status.exists && status.services.iter().all(|s| s.running),
        "{status:?}"
    );
    assert!(
        status.sidecar.as_ref().is_some_and(|s| s.running),
        "{status:?}"
    );
    // A changed service is replaced; the unchanged one is reused.
    let mut plan = probe_plan(h, &env, &["probe", "second"]);
    plan.services[1]
        .env
        .insert("CHANGED".to_owned(), "1".to_owned());
    let changed = h
        .runtime()
        .up(&plan, &Quiet)
        .await
        .unwrap_or_else(|e| panic!("{}", e.report()));
    let actions: Vec<&Action> = changed.services.iter().map(|s| &s.action).collect();
    assert_eq!(actions, [&Action::Reused, &Action::Replaced], "{changed:?}");
    // A service dropped from the plan is removed by the next up.
    let third = up(h, &env, &["probe"]).await;
    assert_eq!(third.services.len(), 1);
    let status = h
        .runtime()
        .status(&env)
        .await
        .unwrap_or_else(|e| panic!("{}", e.report()));
    assert_eq!(status.services.len(), 1, "{status:?}");
}

/// `down` removes everything the environment had, and a second `down` is fine.
pub(crate) async fn down_removes_everything(h: &dyn Harness) {
    let env = h.env("down");
    let other = h.env("keep");
    up(h, &env, &["probe"]).await;
    up(h, &other, &["probe"]).await;
    assert!(
        !h.runtime()
            .inventory(&env)
            .await
            .unwrap_or_default()
            .is_empty()
    );
    let report = h
        .runtime()
        .down(&env, &Quiet)
        .await
        .unwrap_or_else(|e| panic!("{}", e.report()));
    assert!(report.failed.is_empty(), "{report:?}");
    let left = h
        .runtime()
        .inventory(&env)
        .await
        .unwrap_or_else(|e| panic!("{}", e.report()));
    assert!(left.is_empty(), "down left {left:?}");
    let again = h
        .runtime()
        .down(&env, &Quiet)
        .await
        .unwrap_or_else(|e| panic!("second down: {}", e.report()));
    assert!(
        again.removed.is_empty() && again.failed.is_empty(),
        "{again:?}"
    );
    let status = h
        .runtime()
        .status(&env)
        .await
        .unwrap_or_else(|e| panic!("{}", e.report()));
    assert!(!status.exists, "{status:?}");
    // The other environment is untouched.
    allowed_is_reached(h, &other, "probe").await;
}

/// Progress that asks `up` to stop (as Ctrl-C does) once a step naming `service` begins, and
/// keeps every step it was told of.
struct CtrlCDuring {
    service: &'static str,
    steps: Mutex<Vec<String>>,
    stop: AtomicBool,
}

impl Progress for CtrlCDuring {
    fn step(&self, line: &str) {
        if line.contains(self.service) {
            self.stop.store(true, Ordering::SeqCst);
        }
        self.steps
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(line.to_owned());
    }
    fn service(&self, _: &ServiceUp) {}
    fn stop_requested(&self) -> bool {
        self.stop.load(Ordering::SeqCst)
    }
}

/// `up` asked to stop while a step runs finishes that step, begins no other and ends with
/// AF-RUN-032; everything it made is found by `down`, which removes all of it.
pub(crate) async fn an_interrupted_up_stops_between_steps_and_down_removes_what_it_made(
    h: &dyn Harness,
) {
    let env = h.env("ctrlc");
    let plan = probe_plan(h, &env, &["probe", "later"]);
    let progress = CtrlCDuring {
        service: "probe",
        steps: Mutex::new(Vec::new()),
        stop: AtomicBool::new(false),
    };
    let err = h
        .runtime()
        .up(&plan, &progress)
        .await
        .expect_err("up stopped");
    let report = err.report();
    assert_eq!(report.code.code, "AF-RUN-032", "{report}");
    let steps = progress
        .steps
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .clone();
    let at = steps
        .iter()
        .position(|s| s.contains("probe"))
        .unwrap_or_else(|| panic!("no step named the probe service: {steps:?}"));
    assert_eq!(
        at + 1,
        steps.len(),
        "no step began after the stop: {steps:?}"
    );
    let made = h
        .runtime()
        .inventory(&env)
        .await
        .unwrap_or_else(|e| panic!("{}", e.report()));
    assert!(
        made.iter().any(|o| o.service == "sidecar"),
        "control: up had made the sidecar before it stopped: {made:?}"
    );
    assert!(
        !made.iter().any(|o| o.service == "later"),
        "nothing of the service after the stop: {made:?}"
    );
    let down = h
        .runtime()
        .down(&env, &Quiet)
        .await
        .unwrap_or_else(|e| panic!("{}", e.report()));
    assert!(down.failed.is_empty(), "{down:?}");
    let left = h
        .runtime()
        .inventory(&env)
        .await
        .unwrap_or_else(|e| panic!("{}", e.report()));
    assert!(left.is_empty(), "down left {left:?}");
}

/// The journal survives a restart of the sidecar with nothing lost.
pub(crate) async fn journal_survives_a_sidecar_restart(h: &dyn Harness) {
    let env = h.env("journal");
    up(h, &env, &["probe"]).await;
    for _ in 0..3 {
        allowed_is_reached(h, &env, "probe").await;
    }
    let url = format!("http://{}/x", h.internet().unlisted.0);
    probe(h, &env, "probe", &["proxy-get", &url]).await;
    let before = journal(h, &env).await;
    assert!(before.len() >= 4, "{before:?}");
    h.runtime()
        .restart_sidecar(&env)
        .await
        .unwrap_or_else(|e| panic!("restart: {}", e.report()));
    let after = journal(h, &env).await;
    let seqs = |r: &[Record]| r.iter().map(|r| r.seq).collect::<Vec<_>>();
    assert_eq!(
        seqs(&after)[..before.len()],
        seqs(&before)[..],
        "every record survived the restart"
    );
    until_the_sidecar_is_routed(h, &env, "probe").await;
    allowed_is_reached(h, &env, "probe").await;
    let later = journal(h, &env).await;
    let max_before = seqs(&before).into_iter().max().unwrap_or(0);
    assert!(
        seqs(&later).into_iter().max().unwrap_or(0) > max_before,
        "new records continue the sequence"
    );
}

/// Something with the environment's names but without the ownership label is refused by `up`
/// and `down` (AF-RUN-045), and neither touches anything.
pub(crate) async fn objects_of_somebody_else_are_refused(h: &dyn Harness) {
    let env = h.env("owner");
    let planted = h.plant_foreign_object(&env).await;
    let plan = probe_plan(h, &env, &["probe"]);
    let err = h
        .runtime()
        .up(&plan, &Quiet)
        .await
        .err()
        .unwrap_or_else(|| panic!("up accepted {planted}"));
    assert_eq!(err.report().code.code, "AF-RUN-045", "{}", err.report());
    assert!(
        h.runtime()
            .inventory(&env)
            .await
            .unwrap_or_default()
            .is_empty(),
        "up created nothing"
    );
    let err = h
        .runtime()
        .down(&env, &Quiet)
        .await
        .err()
        .unwrap_or_else(|| panic!("down accepted {planted}"));
    assert_eq!(err.report().code.code, "AF-RUN-045", "{}", err.report());
    assert!(
        h.foreign_object_exists(&env).await,
        "{planted} was left alone"
    );
}

/// A failed migration stops its service (AF-RUN-022) and is not retried.
pub(crate) async fn failed_migration_stops_its_service(h: &dyn Harness) {
    let env = h.env("migrate");
    let mut plan = probe_plan(h, &env, &["probe"]);
    plan.services[0].migrate = vec!["/af-probe".to_owned(), "fail".to_owned(), "3".to_owned()];
    let err = h
        .runtime()
        .up(&plan, &Quiet)
        .await
        .err()
        .unwrap_or_else(|| panic!("up accepted a failed migration"));
    let report = err.report();
    assert_eq!(report.code.code, "AF-RUN-022", "{report}");
    assert!(
        report.statement.contains("failing on purpose"),
        "the migration's output is shown: {report}"
    );
    let status = h
        .runtime()
        .status(&env)
        .await
        .unwrap_or_else(|e| panic!("{}", e.report()));
    assert!(
        status.services.is_empty(),
        "the service did not start: {status:?}"
    );
}

/// The status of an environment that does not exist is empty, not an error.
pub(crate) async fn status_of_an_unknown_environment_is_empty(h: &dyn Harness) {
    let env = h.env("none");
    let status = h
        .runtime()
        .status(&env)
        .await
        .unwrap_or_else(|e| panic!("{}", e.report()));
    assert!(
        !status.exists && status.services.is_empty() && status.sidecar.is_none(),
        "{status:?}"
    );
}

/// `logs` returns what a service wrote.
pub(crate) async fn logs_return_what_a_service_wrote(h: &dyn Harness) {
    let env = h.env("logs");
    up(h, &env, &["probe"]).await;
    let mut lines = h
        .runtime()
        .logs(&env, Some("probe"), false, None)
        .await
        .unwrap_or_else(|e| panic!("{}", e.report()));
    let mut seen = Vec::new();
    while let Some(line) = lines.next().await {
        seen.push(line.unwrap_or_else(|e| panic!("{}", e.report())).line);
    }
    assert!(
        seen.iter().any(|l| l.contains("af-probe serving on 8080")),
        "{seen:?}"
    );
}

/// A service that never listens on its port is reported not ready (AF-RUN-020) with its last
/// log lines, after its own health timeout.
pub(crate) async fn a_service_that_never_listens_is_not_ready(h: &dyn Harness) {
    let env = h.env("notready");
    let mut plan = probe_plan(h, &env, &["probe"]);
    // It serves, but on another port than the one it declares.
    plan.services[0]
        .env
        .insert("PORT".to_owned(), "9000".to_owned());
    plan.services[0].health_timeout = std::time::Duration::from_secs(3);
    let err = h
        .runtime()
        .up(&plan, &Quiet)
        .await
        .err()
        .unwrap_or_else(|| panic!("up accepted a service that never listens"));
    let report = err.report();
    assert_eq!(report.code.code, "AF-RUN-020", "{report}");
    assert!(
        report.statement.contains("af-probe serving on 9000"),
        "its last log lines are shown: {report}"
    );
}

/// An image that does not build is refused (AF-RUN-010) with the last lines of the build.
pub(crate) async fn an_image_that_does_not_build_is_refused(
    h: &dyn Harness,
    broken_context: std::path::PathBuf,
) {
    let env = h.env("badimage");
    let mut plan = probe_plan(h, &env, &["probe"]);
    plan.services[0].context = broken_context;
    let err = h
        .runtime()
        .up(&plan, &Quiet)
        .await
        .err()
        .unwrap_or_else(|| panic!("up accepted a broken image"));
    let report = err.report();
    assert_eq!(report.code.code, "AF-RUN-010", "{report}");
    assert!(
        report.statement.contains("no-such-file"),
        "the build's own words are shown: {report}"
    );
    let status = h
        .runtime()
        .status(&env)
        .await
        .unwrap_or_else(|e| panic!("{}", e.report()));
    assert!(status.services.is_empty(), "{status:?}");
}

/// Every service has the CA files and the variables naming them, the bundle ends with the
/// environment's own CA after the system roots, and the webhook secrets are the ones derived
/// from its sidecar's token.
pub(crate) async fn services_get_the_ca_bundle_and_variables(h: &dyn Harness) {
    let env = h.env("trust");
    up(h, &env, &["probe"]).await;
    allowed_is_reached(h, &env, "probe").await;
    let read = |path: &'static str| {
        let env = env.clone();
        async move {
            let bytes = h
                .service_file(&env, "probe", path)
                .await
                .unwrap_or_else(|| panic!("{path} is in the service"));
            String::from_utf8(bytes).unwrap_or_else(|e| panic!("{path}: {e}"))
        }
    };
    let bundle = read(trust::BUNDLE_PATH).await;
    let ca = read(trust::CA_PATH).await;
    let certs = |pem: &str| pem.matches("-----BEGIN CERTIFICATE-----").count();
    assert_eq!(certs(&ca), 1, "the CA file holds the CA alone");
    assert!(certs(&bundle) > 10, "the bundle holds the system roots too");
    assert!(
        bundle.trim_end().ends_with(ca.trim_end()),
        "the environment CA comes last"
    );
    assert!(
        !bundle.contains("PRIVATE KEY") && !ca.contains("PRIVATE KEY"),
        "the service never gets the CA's key"
    );
    // The image's own system store keeps its roots and gains the CA, for a client that reads
    // only its system store.
    let store = read(PROBE_STORE).await;
    assert!(store.starts_with(PROBE_STORE_ROOT), "{store}");
    assert!(
        store.trim_end().ends_with(ca.trim_end()),
        "the environment CA comes last in the image's store: {store}"
    );

    let vars = h.service_env(&env, "probe").await;
    for name in trust::BUNDLE_VARIABLES {
        let want = format!("{name}={}", trust::BUNDLE_PATH);
        assert!(vars.contains(&want), "{want}: {vars:?}");
    }
    assert!(vars.contains(&format!("{}={}", trust::CA_VARIABLE, trust::CA_PATH)));
    let a = h
        .runtime()
        .admin(&env)
        .await
        .unwrap_or_else(|e| panic!("admin: {}", e.report()));
    let secrets = WebhookSecrets::derive(&a.token);
    for provider in Provider::ALL {
        let upper = provider.name().to_ascii_uppercase();
        let want = format!("{upper}_WEBHOOK_SECRET={}", secrets.get(provider));
        assert!(vars.contains(&want), "{upper}_WEBHOOK_SECRET: {vars:?}");
    }
}

/// A client that reads only its system store (Debian's curl with every trust variable unset)
/// gets an intercepted answer, verified: the runtime wrote the environment CA into the image's
/// own store. The control in the same run: told to trust one public root alone, the same curl
/// refuses the sidecar's certificate (60).
pub(crate) async fn a_client_reading_only_its_system_store_trusts_intercepted_answers(
    h: &dyn Harness,
) {
    let image = tokio::task::spawn_blocking(crate::support::debian_clients_image)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let context = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    std::fs::write(
        context.path().join("Dockerfile"),
        format!("FROM {image}\nCMD [\"sleep\", \"infinity\"]\n"),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let env = h.env("store");
    let service = ServicePlan::new("clients", Kind::Worker, context.path());
    let mut egress = crate::support::egress(h.internet());
    egress
        .rules
        .push(RuleSpec::new("api.github.com", Mode::Mock));
    let plan = EnvPlan::new(env.clone(), "conformance", vec![service], egress)
        .unwrap_or_else(|r| panic!("plan: {r}"));
    h.runtime()
        .up(&plan, &Quiet)
        .await
        .unwrap_or_else(|e| panic!("up {env}: {}", e.report()));
    let curl = |trusting: &[&str]| {
        let mut argv: Vec<String> = vec!["env".to_owned()];
        for name in trust::BUNDLE_VARIABLES.iter().chain([&trust::CA_VARIABLE]) {
            argv.extend(["-u".to_owned(), (*name).to_owned()]);
        }
        argv.extend(
            [
                "curl",
                "--silent",
                "--show-error",
                "--write-out",
                "\n%{http_code}",
            ]
            .into_iter()
            .chain(trusting.iter().copied())
            .chain(["https://api.github.com/users/store"])
            .map(str::to_owned),
        );
        argv
    };
    let run = |argv: Vec<String>| {
        let env = env.clone();
        async move {
            h.runtime()
                .exec(&env, "clients", &argv)
                .await
                .unwrap_or_else(|e| panic!("exec {argv:?}: {}", e.report()))
        }
    };
    let answered = run(curl(&[])).await;
    assert_eq!(answered.exit, Some(0), "{answered:?}");
    let (body, status) = answered
        .stdout
        .trim_end()
        .rsplit_once('\n')
        .unwrap_or_else(|| panic!("{answered:?}"));
    assert_eq!(status, "200", "{answered:?}");
    let user: serde_json::Value =
        serde_json::from_str(body).unwrap_or_else(|e| panic!("{e}: {body}"));
    assert_eq!(user["login"], "store", "the GitHub pack answered: {body}");
    let control = run(curl(&[
        "--cacert",
        "/usr/share/ca-certificates/mozilla/ISRG_Root_X1.crt",
    ]))
    .await;
    assert_eq!(control.exit, Some(60), "the control refuses: {control:?}");
}

/// A signed webhook reaches the service through the sidecar's delivery; `af inbox` reads the
/// sidecar's inbox (a refused lookup, a wait that times out), a request to a host under
/// capture lands in it, and a SendGrid mail a service sends is what `af inbox wait` returns,
/// with its one-time code and verification link.
pub(crate) async fn inbox_and_webhook_work_end_to_end(h: &dyn Harness) {
    let env = h.env("inbox");
    let mut plan = probe_plan(h, &env, &["probe"]);
    plan.egress
        .rules
        .push(RuleSpec::new("inbox.test", Mode::Capture));
    plan.egress
        .rules
        .push(RuleSpec::new("api.sendgrid.com", Mode::Capture));
    let runtime = h.runtime();
    runtime
        .up(&plan, &Quiet)
        .await
        .unwrap_or_else(|e| panic!("up {env}: {}", e.report()));
    allowed_is_reached(h, &env, "probe").await;

    let trigger = Trigger {
        provider: Provider::Stripe,
        event: "checkout.session.completed".to_owned(),
        sets: vec!["data.object.client_reference_id=order-7".to_owned()],
        service: None,
        path: None,
    };
    let prepared = Prepared::new(&plan, &trigger, SystemTime::now())
        .unwrap_or_else(|r| panic!("prepare: {r}"));
    assert_eq!(prepared.target().path, "/webhooks/stripe");
    let answer = webhook::run(runtime, &env, &prepared, Format::Human, &mut Vec::new())
        .await
        .unwrap_or_else(|r| panic!("webhook: {r}"));
    assert_eq!(answer.status, 200);
    assert!(
        answer.body.contains("probe probe ok"),
        "the service answered: {answer:?}"
    );

    let wait = Wait {
        to: "nobody@inbox.test".to_owned(),
        subject: None,
        timeout: Duration::from_secs(1),
        poll: inbox::POLL,
    };
    let timed_out = inbox::wait(runtime, &env, &wait, Format::Json, &mut Vec::new()).await;
    assert_eq!(timed_out.err().map(|r| r.code.code), Some("AF-RUN-050"));
    let missing = inbox::get(runtime, &env, 1_000_000, Format::Json, &mut Vec::new()).await;
    assert_eq!(missing.err().map(|r| r.code.code), Some("AF-RUN-054"));

    let v = probe(
        h,
        &env,
        "probe",
        &["proxy-get", "http://inbox.test/verify?t=1"],
    )
    .await;
    assert_eq!(field(&v, "status"), "202", "captured and answered: {v}");
    let records = inbox::list(
        runtime,
        &env,
        InboxQuery::default(),
        Format::Json,
        &mut Vec::new(),
    )
    .await
    .unwrap_or_else(|r| panic!("inbox list: {r}"));
    let captured = records
        .iter()
        .find(|r| r.entry.host() == "inbox.test")
        .unwrap_or_else(|| panic!("the capture is in the inbox: {records:?}"));
    assert!(captured.entry.as_message().is_some(), "{captured:?}");
    let seq = captured.seq;
    let got = inbox::get(runtime, &env, seq, Format::Json, &mut Vec::new())
        .await
        .unwrap_or_else(|r| panic!("inbox get {seq}: {r}"));
    assert_eq!(&got, captured);

    let mail = r#"{"personalizations":[{"to":[{"email":"ada@inbox.test"}]}],"from":{"email":"hello@shop.test"},"subject":"Verify your email","content":[{"type":"text/plain","value":"Code 731942. Verify: https://shop.test/verify?token=t1"}]}"#;
    let sent = probe(
        h,
        &env,
        "probe",
        &["proxy-post", "http://api.sendgrid.com/v3/mail/send", mail],
    )
    .await;
    assert_eq!(field(&sent, "status"), "202", "SendGrid's answer: {sent}");
    let wait = Wait {
        to: "ada@inbox.test".to_owned(),
        subject: Some("verify".to_owned()),
        timeout: Duration::from_secs(20),
        poll: inbox::POLL,
    };
    let message = inbox::wait(runtime, &env, &wait, Format::Json, &mut Vec::new())
        .await
        .unwrap_or_else(|r| panic!("inbox wait: {r}"));
    let message = &message.entry.as_message().expect("a message").message;
    assert_eq!(message.provider, "sendgrid");
    assert_eq!(message.code.as_deref(), Some("731942"));
    assert_eq!(
        message.links.first().map(String::as_str),
        Some("https://shop.test/verify?token=t1")
    );
}

/// A service restarts in place and is governed again afterwards; one the environment does not
/// run is refused (AF-RUN-031) and nothing else is touched.
pub(crate) async fn a_service_restarts_in_place(h: &dyn Harness) {
    let env = h.env("restart");
    up(h, &env, &["probe"]).await;
    allowed_is_reached(h, &env, "probe").await;
    h.runtime()
        .restart_service(&env, "probe")
        .await
        .unwrap_or_else(|e| panic!("restart probe: {}", e.report()));
    allowed_is_reached(h, &env, "probe").await;
    let refused = h
        .runtime()
        .restart_service(&env, "nope")
        .await
        .expect_err("no such service");
    assert_eq!(refused.report().code.code, "AF-RUN-031", "{refused}");
    allowed_is_reached(h, &env, "probe").await;
}
