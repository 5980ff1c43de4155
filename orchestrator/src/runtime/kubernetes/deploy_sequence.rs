//! One service's start, in order, against the fake API server: its migration Job before its
//! Deployment, a failed or ungoverned migration stopping there, a completed unchanged one
//! reused and a changed one made again; a cron service's CronJob under the version the
//! cluster serves; a web service's Ingress and its policy only with a domain.

use std::time::Duration;

use super::Timeouts;
use super::deploy::Deployer;
use super::deploy::cron::{self, CronApi};
use super::deploy::ingress::IngressOptions;
use super::golden::Fixture;
use super::mock::{Fake, JobEnd};
use super::sequence::changes;
use super::supply::Supplied;
use crate::plan::{Kind, ServicePlan};
use crate::runtime::{Action, Quiet, Runtime, RuntimeError, ServiceUp};

const JOBS: &str = "/apis/batch/v1/namespaces/af-pr-42/jobs";
const DEPLOYMENTS: &str = "/apis/apps/v1/namespaces/af-pr-42/deployments";
const INGRESSES: &str = "/apis/networking.k8s.io/v1/namespaces/af-pr-42/ingresses";
const POLICIES: &str = "/apis/networking.k8s.io/v1/namespaces/af-pr-42/networkpolicies";

fn timeouts() -> Timeouts {
    Timeouts {
        service: Duration::from_secs(2),
        migration: Duration::from_secs(2),
        poll: Duration::from_millis(1),
        ..Timeouts::default()
    }
}

fn web(migrate: &[&str]) -> ServicePlan {
    let mut web = ServicePlan::new("web", Kind::Web, "/src/web");
    web.port = Some(8080);
    web.migrate = migrate.iter().map(|a| (*a).to_owned()).collect();
    web
}

/// Start `service` of `fixture` on `fake` as `up` does once the sidecar is there.
async fn start(
    fake: &Fake,
    fixture: &Fixture,
    service: &str,
    cron: Option<CronApi>,
    ingress: &IngressOptions,
) -> Result<ServiceUp, RuntimeError> {
    let client = fake.client();
    let timeouts = timeouts();
    let deployer = Deployer {
        client: &client,
        names: &fixture.names,
        images: &Supplied::default(),
        upstream_resolver: "10.96.0.10:53".parse().expect("addr"),
        trusted_networks: &[],
        pod_layer: true,
        keeper: None,
        gate: fixture.gate.clone(),
        timeouts: &timeouts,
        cron,
        ingress,
    };
    deployer.start(&fixture.spec(service), &Quiet).await
}

fn position(calls: &[String], call: &str) -> Option<usize> {
    calls.iter().position(|c| c == call)
}

#[tokio::test]
async fn the_migration_job_completes_before_the_deployment_is_made() {
    let fake = Fake::new();
    let fixture = Fixture::new(vec![web(&["./manage", "migrate"])]);
    let up = start(&fake, &fixture, "web", None, &IngressOptions::default())
        .await
        .expect("started");
    assert_eq!(up.action, Action::Created);
    assert_eq!(up.url, None, "no domain, no URL");
    let calls = fake.calls();
    let job = position(&calls, &format!("POST {JOBS}")).expect("a Job");
    let read_done = calls
        .iter()
        .rposition(|c| *c == format!("GET {JOBS}/web"))
        .expect("the Job read until it completed");
    let deployment = position(&calls, &format!("POST {DEPLOYMENTS}")).expect("a Deployment");
    assert!(job < read_done && read_done < deployment, "{calls:?}");
    assert!(
        !calls.iter().any(|c| c.contains("/ingresses")),
        "no Ingress without a domain: {calls:?}"
    );
}

#[tokio::test]
async fn a_scaled_service_is_one_deployment_of_its_replicas_each_limited() {
    let fake = Fake::new();
    let mut scaled = web(&[]);
    scaled.replicas = 3;
    scaled.resources.memory_bytes = Some(64 << 20);
    let fixture = Fixture::new(vec![scaled]);
    let up = start(&fake, &fixture, "web", None, &IngressOptions::default())
        .await
        .expect("started once all three are available");
    assert_eq!(up.action, Action::Created);
    let made = fake
        .with(|s| s.objects.get(&format!("{DEPLOYMENTS}/web")).cloned())
        .expect("the Deployment");
    assert_eq!(made["spec"]["replicas"], 3);
    assert_eq!(made["status"]["availableReplicas"], 3);
    let container = &made["spec"]["template"]["spec"]["containers"][0];
    assert_eq!(container["resources"]["limits"]["memory"], "67108864");
}

#[tokio::test]
async fn a_failed_migration_stops_with_its_status_and_last_lines_and_no_deployment() {
    let fake = Fake::new();
    fake.with(|s| {
        s.jobs = JobEnd::Failed(3);
        s.logs.insert(
            "web".to_owned(),
            "applying 0002_users\nrelation \"users\" already exists".to_owned(),
        );
    });
    let fixture = Fixture::new(vec![web(&["./manage", "migrate"])]);
    let refused = start(&fake, &fixture, "web", None, &IngressOptions::default())
        .await
        .expect_err("the migration failed");
    assert!(
        matches!(&refused, RuntimeError::Migration { service, status: 3, tail }
            if service == "web" && tail.iter().any(|l| l.contains("already exists"))),
        "{refused:?}"
    );
    let report = refused.report();
    assert_eq!(report.code.code, "AF-RUN-022");
    assert!(
        report.statement.contains("exited with status 3"),
        "{}",
        report.statement
    );
    assert!(
        report
            .statement
            .contains("relation \"users\" already exists"),
        "{}",
        report.statement
    );
    let calls = fake.calls();
    assert!(
        !calls.iter().any(|c| c.contains("/deployments")),
        "nothing follows a failed migration: {calls:?}"
    );
}

#[tokio::test]
async fn a_migration_whose_gate_gave_up_is_ungoverned() {
    let fake = Fake::new();
    fake.with(|s| s.jobs = JobEnd::GateFailed);
    let fixture = Fixture::new(vec![web(&["./manage", "migrate"])]);
    let refused = start(&fake, &fixture, "web", None, &IngressOptions::default())
        .await
        .expect_err("not governed");
    let report = refused.report();
    assert_eq!(report.code.code, "AF-RUN-043", "{refused}");
    assert!(
        report.statement.contains("198.51.100.10:8443"),
        "{}",
        report.statement
    );
    assert!(!fake.calls().iter().any(|c| c.contains("/deployments")));
}

#[tokio::test]
async fn an_unchanged_completed_migration_is_reused_and_a_changed_one_made_again() {
    let fake = Fake::new();
    let fixture = Fixture::new(vec![web(&["./manage", "migrate"])]);
    let options = IngressOptions::default();
    start(&fake, &fixture, "web", None, &options)
        .await
        .expect("first");
    fake.with(|s| s.calls.clear());
    let again = start(&fake, &fixture, "web", None, &options)
        .await
        .expect("again");
    assert_eq!(again.action, Action::Reused);
    assert_eq!(
        changes(&fake.calls()),
        Vec::<String>::new(),
        "the completed migration is not run again, nor the Deployment replaced"
    );

    // Another migration: the Job cannot change, so it is deleted and made again.
    let changed = Fixture::new(vec![web(&["./manage", "migrate", "--plan=2"])]);
    fake.with(|s| s.calls.clear());
    start(&fake, &changed, "web", None, &options)
        .await
        .expect("changed");
    let calls = changes(&fake.calls());
    assert_eq!(
        calls.iter().take(2).cloned().collect::<Vec<_>>(),
        [format!("DELETE {JOBS}/web"), format!("POST {JOBS}")],
        "{calls:?}"
    );
    let job = fake.with(|s| s.objects.get(&format!("{JOBS}/web")).cloned());
    let job = job.expect("the new Job");
    assert_eq!(
        job["spec"]["template"]["spec"]["containers"][0]["args"][2],
        "--plan=2"
    );
}

#[tokio::test]
async fn a_cron_service_is_a_cronjob_under_the_version_the_cluster_serves_and_no_deployment() {
    let mut report = ServicePlan::new("report", Kind::Cron, "/src/report");
    report.schedule = Some("*/15 * * * *".to_owned());
    let fixture = Fixture::new(vec![report]);
    for (served, expected) in [
        (vec!["batch/v1beta1"], "batch/v1beta1"),
        (vec!["batch/v1", "batch/v1beta1"], "batch/v1"),
    ] {
        let fake = Fake::new();
        fake.with(|s| s.cron_versions = served.clone());
        let api = cron::served(&fake.client()).await.expect("asked");
        assert_eq!(api.map(CronApi::api_version), Some(expected));
        let up = start(&fake, &fixture, "report", api, &IngressOptions::default())
            .await
            .expect("scheduled");
        assert_eq!(up.action, Action::Created);
        let posted = format!("POST /apis/{expected}/namespaces/af-pr-42/cronjobs");
        assert_eq!(changes(&fake.calls()), [posted]);
        let sent = fake.with(|s| {
            s.objects
                .get(&format!(
                    "/apis/{expected}/namespaces/af-pr-42/cronjobs/report"
                ))
                .cloned()
        });
        let sent = sent.expect("the CronJob");
        assert_eq!(sent["apiVersion"], expected);
        assert_eq!(sent["spec"]["concurrencyPolicy"], "Forbid");
    }
    let neither = Fake::new();
    neither.with(|s| s.cron_versions = Vec::new());
    assert_eq!(cron::served(&neither.client()).await.expect("asked"), None);
}

#[tokio::test]
async fn with_a_domain_a_web_service_gets_its_policy_then_its_ingress_and_its_url() {
    let fake = Fake::new();
    let fixture = Fixture::new(vec![web(&[])]);
    let options =
        IngressOptions::from_vars(Some("preview.test".to_owned()), &|_| None).expect("options");
    let up = start(&fake, &fixture, "web", None, &options)
        .await
        .expect("started");
    assert_eq!(up.url.as_deref(), Some("http://web-pr-42.preview.test/"));
    assert_eq!(
        changes(&fake.calls()),
        [
            format!("POST {DEPLOYMENTS}"),
            format!("POST {POLICIES}"),
            format!("POST {INGRESSES}"),
        ]
    );
    let ingress = fake.with(|s| s.objects.get(&format!("{INGRESSES}/web")).cloned());
    assert_eq!(
        ingress.expect("ingress")["spec"]["rules"][0]["host"],
        "web-pr-42.preview.test"
    );
}

#[tokio::test]
async fn what_cannot_be_made_is_refused_with_044_before_anything_is_made() {
    use crate::plan::EnvPlan;
    use af_policy::egress::EgressSpec;

    let plan = |service: ServicePlan| {
        EnvPlan::new(
            super::sequence::env(),
            "shop",
            vec![service],
            EgressSpec::default(),
        )
        .expect("plan")
    };
    // A cron service without a schedule: refused before the API server is asked anything.
    let fake = Fake::new();
    let unscheduled = ServicePlan::new("report", Kind::Cron, "/src/report");
    let refused = super::sequence::runtime(&fake)
        .up(&plan(unscheduled), &Quiet)
        .await
        .expect_err("refused");
    assert_eq!(refused.report().code.code, "AF-RUN-044", "{refused}");
    assert!(refused.to_string().contains("no schedule"), "{refused}");
    assert!(fake.calls().is_empty(), "{:?}", fake.calls());

    // A cluster serving no CronJob API: asked, and refused before anything is made.
    let fake = Fake::new();
    fake.with(|s| s.cron_versions = Vec::new());
    let mut report = ServicePlan::new("report", Kind::Cron, "/src/report");
    report.schedule = Some("0 * * * *".to_owned());
    let refused = super::sequence::runtime(&fake)
        .up(&plan(report), &Quiet)
        .await
        .expect_err("refused");
    assert_eq!(refused.report().code.code, "AF-RUN-044", "{refused}");
    assert!(refused.to_string().contains("no CronJob API"), "{refused}");
    assert!(fake.calls().contains(&"GET /apis/batch/v1beta1".to_owned()));
    assert_eq!(changes(&fake.calls()), Vec::<String>::new());
}
