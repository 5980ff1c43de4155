//! The conformance suite against the local runtime, on the real Docker daemon, with a
//! simulated internet the harness builds itself. These tests do not skip: without Docker they
//! fail. Run them with `cargo nextest run -p af-orchestrator` (one at a time; see
//! `.config/nextest.toml`).

mod adoption;
mod conformance;
mod process;
mod real_clients;
mod support;

use support::docker::DockerHarness;

async fn harness(test: &str) -> DockerHarness {
    DockerHarness::start(test, false).await
}

#[tokio::test(flavor = "multi_thread")]
async fn allowed_host_is_reached_through_the_proxy() {
    let h = harness("allowed").await;
    conformance::allowed_host_is_reached_through_the_proxy(&h).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn host_without_rule_is_refused_and_journaled() {
    let h = harness("norule").await;
    conformance::host_without_rule_is_refused_and_journaled(&h).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn client_ignoring_proxy_variables_is_still_decided() {
    let h = harness("noproxy").await;
    conformance::client_ignoring_proxy_variables_is_still_decided(&h).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn direct_connection_to_an_address_fails() {
    let h = harness("direct").await;
    conformance::direct_connection_to_an_address_fails(&h).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn udp_dns_to_an_outside_resolver_fails() {
    let h = harness("udp").await;
    conformance::udp_dns_to_an_outside_resolver_fails(&h).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn metadata_address_is_unreachable() {
    let h = DockerHarness::start("metadata", true).await;
    conformance::metadata_address_is_unreachable(&h).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn host_is_unreachable_through_the_gateway() {
    let h = harness("gateway").await;
    // A service listening on every host address; reachable from the host itself (control).
    let listener = tokio::net::TcpListener::bind("0.0.0.0:0")
        .await
        .expect("listen on the host");
    let port = listener.local_addr().expect("address").port();
    tokio::spawn(async move {
        while let Ok((s, _)) = listener.accept().await {
            drop(s);
        }
    });
    tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .expect("control: the host listener accepts");
    conformance::host_is_unreachable_through_the_gateway(&h, port).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn environments_cannot_reach_each_other() {
    let h = harness("twoenvs").await;
    conformance::environments_cannot_reach_each_other(&h).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn up_reports_services_and_is_idempotent() {
    let h = harness("idempotent").await;
    conformance::up_reports_services_and_is_idempotent(&h).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn down_removes_everything() {
    let h = harness("down").await;
    conformance::down_removes_everything(&h).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn an_interrupted_up_stops_between_steps_and_down_removes_what_it_made() {
    let h = harness("ctrlc").await;
    conformance::an_interrupted_up_stops_between_steps_and_down_removes_what_it_made(&h).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn journal_survives_a_sidecar_restart() {
    let h = harness("journal").await;
    conformance::journal_survives_a_sidecar_restart(&h).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn objects_of_somebody_else_are_refused() {
    let h = harness("owner").await;
    conformance::objects_of_somebody_else_are_refused(&h).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn failed_migration_stops_its_service() {
    let h = harness("migrate").await;
    conformance::failed_migration_stops_its_service(&h).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn status_of_an_unknown_environment_is_empty() {
    let h = harness("status").await;
    conformance::status_of_an_unknown_environment_is_empty(&h).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn logs_return_what_a_service_wrote() {
    let h = harness("logs").await;
    conformance::logs_return_what_a_service_wrote(&h).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_service_that_never_listens_is_not_ready() {
    let h = harness("notready").await;
    conformance::a_service_that_never_listens_is_not_ready(&h).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn services_get_the_ca_bundle_and_variables() {
    let h = harness("trust").await;
    conformance::services_get_the_ca_bundle_and_variables(&h).await;
    conformance::a_client_reading_only_its_system_store_trusts_intercepted_answers(&h).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn inbox_and_webhook_work_end_to_end() {
    let h = harness("inbox").await;
    conformance::inbox_and_webhook_work_end_to_end(&h).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn an_image_that_does_not_build_is_refused() {
    let h = harness("badimage").await;
    let dir = std::env::temp_dir().join(format!("af-broken-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    std::fs::write(
        dir.join("Dockerfile"),
        "FROM scratch\nCOPY no-such-file /x\n",
    )
    .expect("Dockerfile");
    conformance::an_image_that_does_not_build_is_refused(&h, dir.clone()).await;
    let _ = std::fs::remove_dir_all(dir);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_service_cannot_open_a_raw_or_packet_socket() {
    let h = harness("raw").await;
    conformance::escape::a_service_cannot_open_a_raw_or_packet_socket(&h).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_service_cannot_reach_a_host_listener_by_any_bridge_address() {
    let h = harness("hostaddr").await;
    // A listener on every IPv6 address (IPv4 too, through mapped addresses), one on every
    // IPv4 address.
    let dual = tokio::net::TcpListener::bind("[::]:0")
        .await
        .expect("listen on [::]");
    let v4 = tokio::net::TcpListener::bind("0.0.0.0:0")
        .await
        .expect("listen on 0.0.0.0");
    let ports = (
        dual.local_addr().expect("address").port(),
        v4.local_addr().expect("address").port(),
    );
    for listener in [dual, v4] {
        tokio::spawn(async move {
            while let Ok((s, _)) = listener.accept().await {
                drop(s);
            }
        });
    }
    conformance::escape::a_service_cannot_reach_a_host_listener_by_any_bridge_address(
        &h, ports.0, ports.1,
    )
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_service_cannot_have_an_ipv6_packet_forwarded_by_the_host() {
    let h = harness("fwd6").await;
    conformance::escape::a_service_cannot_have_an_ipv6_packet_forwarded_by_the_host(&h).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_service_restarts_in_place() {
    let h = harness("restart").await;
    conformance::a_service_restarts_in_place(&h).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn real_debian_clients_are_answered_by_proxy_and_by_dns_and_journaled_record_by_record() {
    let h = harness("clients").await;
    real_clients::real_debian_clients_are_answered_by_proxy_and_by_dns_and_journaled_record_by_record(&h).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_compose_project_with_a_prebuilt_database_runs_contained() {
    let h = harness("adopt").await;
    adoption::a_compose_project_with_a_prebuilt_database_runs_contained(&h).await;
}

/// The steps of one `up`, in order.
#[derive(Default)]
struct Steps(std::sync::Mutex<Vec<String>>);

impl af_orchestrator::runtime::Progress for Steps {
    fn step(&self, line: &str) {
        self.0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(line.to_owned());
    }
    fn service(&self, _: &af_orchestrator::runtime::ServiceUp) {}
}

impl Steps {
    /// The services whose image was built, in order.
    fn built(&self) -> Vec<String> {
        let steps = self.0.lock().unwrap_or_else(|e| e.into_inner());
        steps
            .iter()
            .filter_map(|s| s.strip_prefix("building "))
            .filter_map(|s| s.split_once(" image ").map(|(what, _)| what))
            .filter(|what| *what != "sidecar")
            .map(str::to_owned)
            .collect()
    }
}

/// A service image is built once per context: a second service with the same context, a second
/// `up`, and an `up` after `down` all use the one image (`down` keeps it); a changed file in the
/// context is built again.
#[tokio::test(flavor = "multi_thread")]
async fn an_image_is_built_once_per_context_and_down_keeps_it_for_the_next_up() {
    use af_orchestrator::runtime::local::labels::Names;

    let h = harness("nobuild").await;
    let env = support::Harness::env(&h, "nobuild");
    // A context of this test's own (the probe's, and a file no other test has), so the first
    // up has to build it: the control that building is seen at all.
    let context = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    for file in ["af-probe", "Dockerfile", support::docker::PROBE_STORE_FILE] {
        std::fs::copy(
            support::Harness::probe_context(&h).join(file),
            context.path().join(file),
        )
        .unwrap_or_else(|e| panic!("{file}: {e}"));
    }
    let nonce = context.path().join("nonce");
    std::fs::write(&nonce, env.as_str()).unwrap_or_else(|e| panic!("{e}"));
    let mut plan = support::probe_plan(&h, &env, &["probe", "second"]);
    for service in &mut plan.services {
        service.context = context.path().to_owned();
    }
    let runtime = support::Harness::runtime(&h);
    let docker = bollard::Docker::connect_with_local_defaults().unwrap_or_else(|e| panic!("{e}"));
    let images = || async {
        let mut ids = Vec::new();
        for service in ["probe", "second"] {
            let found = docker
                .inspect_container(&Names::new(&env).service(service), None)
                .await
                .unwrap_or_else(|e| panic!("container of {service}: {e}"));
            ids.push(found.image.unwrap_or_default());
        }
        ids
    };
    let plan = &plan;
    let up = |steps: Steps| async move {
        runtime
            .up(plan, &steps)
            .await
            .unwrap_or_else(|e| panic!("{}", e.report()));
        steps.built()
    };

    assert_eq!(
        up(Steps::default()).await,
        ["probe"],
        "the control: built once"
    );
    let built = images().await;
    assert_eq!(built[0], built[1], "both services run the one image");
    assert_eq!(
        up(Steps::default()).await,
        Vec::<String>::new(),
        "nothing changed"
    );
    assert_eq!(images().await, built, "the same image serves");

    let down = runtime
        .down(&env, &af_orchestrator::runtime::Quiet)
        .await
        .unwrap_or_else(|e| panic!("{}", e.report()));
    assert!(down.failed.is_empty(), "{down:?}");
    docker
        .inspect_image(&built[0])
        .await
        .unwrap_or_else(|e| panic!("down kept the image: {e}"));
    assert_eq!(
        up(Steps::default()).await,
        Vec::<String>::new(),
        "built before the down"
    );
    assert_eq!(images().await, built, "the kept image serves");

    std::fs::write(&nonce, "changed").unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(up(Steps::default()).await, ["probe"], "a file changed");
    let rebuilt = images().await;
    assert_ne!(rebuilt, built);
    assert_eq!(rebuilt[0], rebuilt[1]);

    let _ = runtime.down(&env, &af_orchestrator::runtime::Quiet).await;
    for id in [&built[0], &rebuilt[0]] {
        let options = bollard::query_parameters::RemoveImageOptionsBuilder::default()
            .force(true)
            .build();
        let _ = docker.remove_image(id, Some(options), None).await;
    }
}
