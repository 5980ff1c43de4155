//! The rendered objects against their golden files in `orchestrator/tests/golden/kubernetes/`
//! (reviewed by hand once; a change to a rendering shows up as a diff there). Run with
//! `AF_BLESS=1` to rewrite them after an intended change, then review the diff.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use serde::Serialize;

use super::deploy;
use super::names::{DEFAULT_PREFIX, Names};
use super::namespace;
use super::policies::{self, ClusterResolver, Families};
use super::probe::pod::{self, ProbePod};
use super::probe::targets::ProbeTargets;
use crate::env_id::EnvId;
use crate::runtime::labels;

fn names() -> Names {
    Names::new(DEFAULT_PREFIX, &EnvId::parse("pr-42").expect("id"))
}

fn check(file: &str, object: &impl Serialize) {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/golden/kubernetes")
        .join(file);
    let rendered = serde_json::to_string_pretty(object).expect("json") + "\n";
    if std::env::var_os("AF_BLESS").is_some() {
        std::fs::write(&path, &rendered).expect("write golden file");
    }
    let golden = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{}: {e} (AF_BLESS=1 writes it)", path.display()));
    assert!(
        golden == rendered,
        "{} differs from the rendering; review and rerun with AF_BLESS=1 if intended:\n{rendered}",
        path.display()
    );
}

/// An IPv4 cluster, and a dual-stack one whose catalogue allows IPv6.
const IPV4: Families = Families {
    v4: true,
    v6: false,
};
const DUAL_STACK: Families = Families { v4: true, v6: true };

#[test]
fn the_namespace_carries_our_labels_and_where_it_comes_from_from_its_creation() {
    let origin = [
        (labels::PROJECT.to_owned(), "shop".to_owned()),
        (labels::REPOSITORY.to_owned(), "/src/shop".to_owned()),
    ];
    check("namespace.json", &namespace::render(&names(), &origin));
}

#[test]
fn the_policies_deny_by_default_and_open_only_the_sidecar_routes() {
    let kube_dns = ClusterResolver::Pods {
        namespace: BTreeMap::from([(
            "kubernetes.io/metadata.name".to_owned(),
            "kube-system".to_owned(),
        )]),
        pods: BTreeMap::from([("k8s-app".to_owned(), "kube-dns".to_owned())]),
    };
    check(
        "network-policies.json",
        &policies::render(
            &names(),
            &kube_dns,
            IPV4,
            &[
                "10.96.0.1:443".parse().expect("addr"),
                "10.250.0.1:6443".parse().expect("addr"),
            ],
        ),
    );
}

#[test]
fn the_sidecar_reaches_a_resolver_known_by_address_at_exactly_that_address() {
    let by_address = ClusterResolver::Addresses(vec![
        "10.244.0.5".parse().expect("ip"),
        "fd00:10:244::5".parse().expect("ip"),
    ]);
    let rendered = policies::render(&names(), &by_address, DUAL_STACK, &[]);
    check("sidecar-egress-by-address.json", &rendered[4]);
    let unknown = policies::render(&names(), &ClusterResolver::Unknown, DUAL_STACK, &[]);
    let rules = |p: &k8s_openapi::api::networking::v1::NetworkPolicy| {
        p.spec
            .as_ref()
            .and_then(|s| s.egress.as_ref())
            .map_or(0, Vec::len)
    };
    assert_eq!(rules(&rendered[4]), 3);
    assert_eq!(rules(&unknown[4]), 2, "no resolver rule when none is known");
}

#[test]
fn the_probe_pod_runs_each_route_under_the_services_rules_once_its_witness_says_it_is_governed() {
    let vars = BTreeMap::from([
        ("AF_PROBE_TCP", "198.51.100.10:8443"),
        ("AF_PROBE_DNS", "198.51.100.10:5353"),
        ("AF_PROBE_METADATA", "169.254.44.10:8080"),
        ("AF_PROBE_TCP6", "[2001:db8:4b::10]:8443"),
        ("AF_PROBE_DNS6", "[2001:db8:4b::10]:5353"),
        ("AF_PROBE_METADATA6", "[2001:db8:4b::11]:8080"),
        ("AF_PROBE_DNS_NAME", "probe.test"),
    ]);
    let targets =
        ProbeTargets::from_vars(&|k| vars.get(k).map(|v| (*v).to_owned())).expect("targets");
    let (routes, _) = targets.routes(&["10.96.0.1:443".parse().expect("addr")]);
    let rendered = pod::render(
        &names(),
        &ProbePod {
            name: "af-probe-0123456789ab",
            image: "af-probe:0123456789ab",
            pull_policy: "Never",
            routes: &routes,
            witness: "10.244.0.9".parse().expect("ip"),
            fence: None,
            deadline: Duration::from_secs(120),
        },
    );
    check("probe-pod.json", &rendered);
    let fence = pod::probe_fence("10.244.0.9".parse().expect("ip"));
    let fenced = pod::render(
        &names(),
        &ProbePod {
            name: "af-probe-fenced-0123456789ab",
            image: "af-probe:0123456789ab",
            pull_policy: "Never",
            routes: &routes,
            witness: "10.244.0.9".parse().expect("ip"),
            fence: Some(&fence),
            deadline: Duration::from_secs(120),
        },
    );
    check("probe-pod-fenced.json", &fenced);
    let witness = pod::witness(
        &names(),
        "af-probe-witness-0123456789ab",
        "af-probe:0123456789ab",
        "Never",
        Duration::from_secs(120),
    );
    check("probe-witness.json", &witness);
}

#[test]
fn the_sidecar_is_a_service_a_secret_and_one_pod_with_one_capability() {
    let names = names();
    check("sidecar-service.json", &deploy::sidecar::service(&names));
    let in_pod =
        deploy::journal::Journal::InPod("the cluster has no default StorageClass".to_owned());
    let web = crate::plan::ServicePlan::new("web", crate::plan::Kind::Web, "/src/web");
    let fixture = Fixture::new(vec![web]);
    let keeper = deploy::keeper::Keeper {
        image: "af-probe:0123456789ab".to_owned(),
        pull_policy: "Never".to_owned(),
        api_server: "10.96.0.1:443".parse().expect("addr"),
        period_secs: 10,
    };
    let admin = "127.0.0.1:9901".parse().expect("addr");
    let deployment = deploy::sidecar::deployment(
        &names,
        "af-proxy:0123456789ab",
        "Never",
        "d1g3st",
        &in_pod,
        Some(keeper.container(&names, &fixture.plan, admin, "config", "sidecar.json")),
        af_policy::manifest::OnLoss::Stop,
    );
    check("sidecar-deployment.json", &deployment);
    check(
        "keeper-role.json",
        &deploy::keeper::role(&names, &fixture.plan),
    );
    let pod = deployment.spec.template.spec.as_ref().expect("pod");
    // The keeper's token is mounted into its own container only.
    assert_eq!(pod.service_account_name.as_deref(), Some("af-keeper"));
    assert!(
        pod.containers[0]
            .volume_mounts
            .iter()
            .flatten()
            .all(|m| !m.mount_path.contains("af-keeper")),
        "the sidecar's container sees no API token"
    );
    let caps = pod.containers[0]
        .security_context
        .as_ref()
        .and_then(|s| s.capabilities.as_ref())
        .expect("capabilities");
    assert_eq!(caps.drop.as_deref(), Some(&["ALL".to_owned()][..]));
    assert_eq!(
        caps.add.as_deref(),
        Some(&["NET_BIND_SERVICE".to_owned()][..])
    );
    assert_eq!(pod.automount_service_account_token, Some(false));
}

/// A plan of `services` with what their objects are made from (the deploy sequence tests
/// use it too).
pub(super) struct Fixture {
    pub(super) names: Names,
    pub(super) plan: crate::plan::EnvPlan,
    trust: crate::trust::TrustFiles,
    webhooks: crate::webhook::WebhookSecrets,
    pub(super) gate: deploy::services::Gate,
    pub(super) fence: Vec<String>,
}

impl Fixture {
    pub(super) fn new(services: Vec<crate::plan::ServicePlan>) -> Self {
        let names = names();
        let plan = crate::plan::EnvPlan::new(
            names.env().clone(),
            "shop",
            services,
            af_policy::egress::EgressSpec::default(),
        )
        .expect("plan");
        let ca =
            crate::trust::EnvCa::generate(names.env(), std::time::SystemTime::now()).expect("a CA");
        Self {
            names,
            plan,
            trust: crate::trust::TrustFiles::new("", &ca),
            webhooks: crate::webhook::WebhookSecrets::derive("0123456789abcdef0123456789abcdef"),
            gate: deploy::services::Gate {
                image: "af-probe:0123456789ab".to_owned(),
                pull_policy: "Never".to_owned(),
                escapes: vec![
                    "tcp:198.51.100.10:8443".to_owned(),
                    "dns:198.51.100.10:5353:probe.test".to_owned(),
                ],
                rounds: 3,
                deadline_secs: 60,
            },
            fence: fence(),
        }
    }

    pub(super) fn spec(&self, service: &str) -> deploy::services::Spec<'_> {
        deploy::services::Spec {
            plan: &self.plan,
            service: self.plan.service(service).expect("a service"),
            image: "af/pr-42/web:latest",
            pull_policy: "Never",
            sidecar: "10.96.7.7".parse().expect("ip"),
            provisions: crate::runtime::service_env::Provisions {
                trust: &self.trust,
                webhooks: &self.webhooks,
            },
            gate: &self.gate,
            fence: &self.fence,
            watch_period_secs: 10,
            stores: &[],
        }
    }
}

/// The fence of a pod whose environment has the sidecar's Service and one other.
fn fence() -> Vec<String> {
    let services = ["10.96.7.7", "10.96.7.20"].map(|ip| ip.parse().expect("ip"));
    deploy::services::fence_allowances("10.96.7.7".parse().expect("ip"), &services)
}

/// The CA is made afresh each run: the digests that follow from it are checked here and
/// stand-ins kept in the files (the pod's annotation, the object's own digest label).
fn steady(
    template: &mut k8s_openapi::api::core::v1::PodTemplateSpec,
    labels: &mut BTreeMap<String, String>,
    spec: &deploy::services::Spec<'_>,
) {
    use crate::runtime::labels::CONFIG;
    let annotations = template
        .metadata
        .as_mut()
        .and_then(|m| m.annotations.as_mut())
        .expect("annotations");
    let digest = annotations.insert(CONFIG.to_owned(), "provisions".to_owned());
    assert_eq!(digest, Some(spec.provisions.digest()));
    labels.insert(CONFIG.to_owned(), "rendering".to_owned());
}

/// Every container of `pod` confined, its own fence first and the gate next; the fence the
/// only container with a capability (`NET_ADMIN`, to write the pod's rules).
fn confined_behind_the_gate(pod: &k8s_openapi::api::core::v1::PodSpec) {
    assert_eq!(pod.automount_service_account_token, Some(false));
    assert_eq!(pod.dns_policy.as_deref(), Some("None"));
    let init = pod
        .init_containers
        .as_ref()
        .expect("the fence and the gate");
    assert_eq!(init[0].name, deploy::services::FENCE);
    assert_eq!(init[1].name, deploy::services::GATE);
    for c in init.iter().chain(&pod.containers) {
        let sc = c.security_context.as_ref().expect("confined");
        assert_eq!(sc.allow_privilege_escalation, Some(false), "{}", c.name);
        let caps = sc.capabilities.as_ref().expect("capabilities");
        assert_eq!(caps.drop, Some(vec!["ALL".to_owned()]));
        let added = caps.add.clone().unwrap_or_default();
        if c.name == deploy::services::FENCE {
            assert_eq!(added, ["NET_ADMIN"]);
        } else {
            assert!(!added.iter().any(|a| a == "NET_ADMIN"), "{}", c.name);
        }
    }
}

#[test]
fn a_migration_is_the_services_own_pod_run_once_never_retried_and_bounded() {
    use crate::plan::{Kind, ServicePlan};

    let mut web = ServicePlan::new("web", Kind::Web, "/src/web");
    web.port = Some(8080);
    web.command = vec!["./serve".to_owned()];
    web.migrate = vec!["./manage".to_owned(), "migrate".to_owned()];
    let fixture = Fixture::new(vec![web]);
    let spec = fixture.spec("web");
    let mut job = deploy::jobs::job(&fixture.names, &spec, Duration::from_secs(600));
    let deployment = deploy::services::deployment(&fixture.names, &spec);
    let job_spec = job.spec.as_mut().expect("spec");
    assert_eq!(job_spec.backoff_limit, Some(0));
    assert_eq!(job_spec.active_deadline_seconds, Some(600));
    let pod = job_spec.template.spec.as_ref().expect("pod");
    assert_eq!(pod.restart_policy.as_deref(), Some("Never"));
    // The migration is the image's entrypoint's arguments, as the service's command is.
    assert_eq!(pod.containers[0].command, None);
    assert_eq!(
        pod.containers[0].args.as_deref(),
        Some(&spec.service.migrate[..])
    );
    confined_behind_the_gate(pod);
    // The same pod as the service's but for what a run-once pod does not have: the
    // Deployment's pods carry a containment watcher, which would keep a Job from finishing.
    let mut served = deployment.spec.template.spec.clone().expect("pod");
    let watcher = served.containers.pop().expect("the watcher");
    assert_eq!(watcher.name, deploy::services::WATCH);
    served.restart_policy = Some("Never".to_owned());
    served.containers[0].args = Some(spec.service.migrate.clone());
    served.containers[0].ports = None;
    served.containers[0].readiness_probe = None;
    assert_eq!(pod, &served);
    // Its pods are not the Deployment's, nor behind the Service.
    let labels = job_spec
        .template
        .metadata
        .as_ref()
        .and_then(|m| m.labels.as_ref());
    let selected = deployment
        .spec
        .selector
        .match_labels
        .as_ref()
        .expect("selector");
    assert!(
        !selected
            .iter()
            .all(|(k, v)| labels.and_then(|l| l.get(k)) == Some(v)),
        "the Deployment's selector must not match the migration's pods"
    );
    steady(
        &mut job_spec.template,
        job.metadata.labels.as_mut().expect("labels"),
        &spec,
    );
    check("migration-job.json", &job);
}

#[test]
fn a_cron_service_is_a_cronjob_of_its_pod_never_two_at_once() {
    use crate::plan::{Kind, ServicePlan};

    let mut report = ServicePlan::new("report", Kind::Cron, "/src/report");
    report.command = vec!["./report".to_owned()];
    report.schedule = Some("*/15 * * * *".to_owned());
    let fixture = Fixture::new(vec![report]);
    let spec = fixture.spec("report");
    let mut cron = deploy::cron::cron_job(&fixture.names, &spec);
    assert_eq!(cron.spec.schedule, "*/15 * * * *");
    assert_eq!(cron.spec.concurrency_policy.as_deref(), Some("Forbid"));
    let job = cron.spec.job_template.spec.as_mut().expect("job");
    assert_eq!(job.backoff_limit, Some(0));
    let pod = job.template.spec.as_ref().expect("pod");
    assert_eq!(pod.restart_policy.as_deref(), Some("Never"));
    confined_behind_the_gate(pod);
    steady(
        &mut job.template,
        cron.metadata.labels.as_mut().expect("labels"),
        &spec,
    );
    check("cron-job.json", &cron);
    let beta = deploy::cron::as_served(&cron, deploy::cron::CronApi::V1Beta1).expect("sent");
    let sent = serde_json::to_value(&beta).expect("json");
    assert_eq!(sent["apiVersion"], "batch/v1beta1");
    let mut typed = serde_json::to_value(&cron).expect("json");
    typed["apiVersion"] = "batch/v1beta1".into();
    assert_eq!(sent, typed, "the same object under the other version");
}

#[test]
fn a_web_service_gets_an_ingress_and_only_the_controller_reaches_its_port() {
    use crate::plan::{Kind, ServicePlan};
    use deploy::ingress::{self, IngressOptions};

    let mut web = ServicePlan::new("web", Kind::Web, "/src/web");
    web.port = Some(8080);
    let fixture = Fixture::new(vec![web]);
    let options = IngressOptions::from_vars(Some("preview.example.com".to_owned()), &|_| None)
        .expect("options");
    let service = &fixture.plan.services[0];
    check(
        "ingress.json",
        &ingress::ingress(&fixture.names, service, &options).expect("ingress"),
    );
    let policy = ingress::policy(&fixture.names, service, &options).expect("policy");
    check("ingress-policy.json", &policy);
    let spec = policy.spec.as_ref().expect("spec");
    for peer in spec
        .ingress
        .iter()
        .flatten()
        .flat_map(|r| r.from.iter().flatten())
    {
        let namespaces = peer.namespace_selector.as_ref().expect("a namespace");
        assert!(
            namespaces
                .match_labels
                .as_ref()
                .is_some_and(|l| l.contains_key("kubernetes.io/metadata.name")),
            "a namespace by its own name, never every namespace: {peer:?}"
        );
        assert!(
            peer.pod_selector
                .as_ref()
                .is_some_and(|p| p.match_labels.is_some())
        );
    }
    assert_eq!(
        spec.pod_selector
            .as_ref()
            .and_then(|p| p.match_labels.clone()),
        Some(deploy::services::pod_labels(&fixture.names, "web"))
    );
}

#[test]
fn on_a_default_storage_class_the_journal_is_a_claim_the_sidecar_mounts() {
    let names = names();
    let claim = deploy::journal::Journal::Claim {
        class: "standard".to_owned(),
        made: false,
    };
    check(
        "sidecar-journal-claim.json",
        &deploy::journal::claim(&names, "standard"),
    );
    let deployment = deploy::sidecar::deployment(
        &names,
        "af-proxy:0123456789ab",
        "Never",
        "d1g3st",
        &claim,
        None,
        af_policy::manifest::OnLoss::Keep,
    );
    let pod = deployment.spec.template.spec.as_ref().expect("pod");
    check("sidecar-journal-volume.json", &pod.volumes);
    let place = deploy::journal::place(&deployment, Some("af-sidecar-1")).expect("a place");
    assert_eq!(
        place.storage,
        crate::runtime::JournalStorage::PersistentVolumeClaim
    );
    assert_eq!(place.name, super::names::JOURNAL_CLAIM);
    assert!(place.outlives_the_sidecar());
    let in_pod = deploy::journal::Journal::InPod("no default StorageClass".to_owned());
    let deployment = deploy::sidecar::deployment(
        &names,
        "af-proxy:0123456789ab",
        "Never",
        "d1g3st",
        &in_pod,
        None,
        af_policy::manifest::OnLoss::Keep,
    );
    let place = deploy::journal::place(&deployment, Some("af-sidecar-1")).expect("a place");
    assert_eq!(place.storage, crate::runtime::JournalStorage::Pod);
    assert_eq!(place.name, "af-sidecar-1");
    assert_eq!(place.reason.as_deref(), Some("no default StorageClass"));
    assert!(!place.outlives_the_sidecar());
}

#[test]
fn a_service_pod_resolves_through_the_sidecar_only_and_starts_after_its_gate() {
    use crate::plan::{EnvPlan, Kind, ServicePlan};
    use crate::runtime::service_env::Provisions;
    use crate::trust::{EnvCa, TrustFiles};
    use crate::webhook::WebhookSecrets;

    let names = names();
    let mut web = ServicePlan::new("web", Kind::Web, "/src/web");
    web.port = Some(8080);
    web.health_path = Some("/healthz".to_owned());
    let plan = EnvPlan::new(
        names.env().clone(),
        "shop",
        vec![web],
        af_policy::egress::EgressSpec::default(),
    )
    .expect("plan");
    let ca = EnvCa::generate(names.env(), std::time::SystemTime::now()).expect("a CA");
    let trust = TrustFiles::new("", &ca);
    let webhooks = WebhookSecrets::derive("0123456789abcdef0123456789abcdef");
    let gate = deploy::services::Gate {
        image: "af-probe:0123456789ab".to_owned(),
        pull_policy: "Never".to_owned(),
        escapes: vec![
            "tcp:198.51.100.10:8443".to_owned(),
            "dns:198.51.100.10:5353:probe.test".to_owned(),
        ],
        rounds: 3,
        deadline_secs: 60,
    };
    let spec = deploy::services::Spec {
        plan: &plan,
        service: &plan.services[0],
        image: "af/pr-42/web:latest",
        pull_policy: "Never",
        sidecar: "10.96.7.7".parse().expect("ip"),
        provisions: Provisions {
            trust: &trust,
            webhooks: &webhooks,
        },
        gate: &gate,
        fence: &fence(),
        watch_period_secs: 10,
        stores: &[],
    };
    check(
        "service-service.json",
        &deploy::services::service(&names, &plan.services[0]).expect("a port"),
    );
    let mut deployment = deploy::services::deployment(&names, &spec);
    // The CA is made afresh each run: its digest is checked here, a stand-in kept in the file.
    let annotations = deployment
        .spec
        .template
        .metadata
        .as_mut()
        .and_then(|m| m.annotations.as_mut())
        .expect("annotations");
    let digest = annotations.insert(
        crate::runtime::labels::CONFIG.to_owned(),
        "provisions".to_owned(),
    );
    assert_eq!(digest, Some(spec.provisions.digest()));
    let labels = deployment.metadata.labels.as_mut().expect("labels");
    labels.insert(
        crate::runtime::labels::CONFIG.to_owned(),
        "rendering".to_owned(),
    );
    check("service-deployment.json", &deployment);
    check(
        "service-env-secret.json",
        &deploy::services::env_secret(&names, spec.provisions),
    );
    let pod = deployment.spec.template.spec.as_ref().expect("pod");
    // No secret's value is in the Deployment: each is named in the Secret, in order.
    let rendered = serde_json::to_string(&deployment).expect("json");
    let env = pod.containers[0].env.as_ref().expect("env");
    for provider in crate::webhook::Provider::ALL {
        let secret = webhooks.get(provider);
        assert!(!rendered.contains(secret), "{secret} in the Deployment");
        let upper = provider.name().to_ascii_uppercase();
        for name in [
            format!("{upper}_WEBHOOK_SECRET"),
            format!("AF_WEBHOOK_SECRET_{upper}"),
        ] {
            let var = env.iter().find(|v| v.name == name).expect("the variable");
            let key = var
                .value_from
                .as_ref()
                .and_then(|f| f.secret_key_ref.as_ref())
                .expect("by reference");
            assert_eq!(
                (key.name.as_str(), key.key.as_str()),
                (super::names::SERVICE_ENV, name.as_str())
            );
        }
    }
    let dns = pod.dns_config.as_ref().expect("dns");
    assert_eq!(
        dns.nameservers.as_deref(),
        Some(&["10.96.7.7".to_owned()][..])
    );
    confined_behind_the_gate(pod);
}

#[test]
fn a_scaled_service_runs_its_replicas_and_every_pod_of_it_is_limited() {
    use crate::plan::{Kind, ServicePlan};
    use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

    let limits = af_policy::manifest::Limits {
        cpu_millicores: Some(500),
        memory_bytes: Some(256 << 20),
    };
    let mut web = ServicePlan::new("web", Kind::Web, "/src/web");
    web.port = Some(8080);
    web.replicas = 3;
    web.resources = limits;
    web.migrate = vec!["./migrate".to_owned()];
    let mut report = ServicePlan::new("report", Kind::Cron, "/src/report");
    report.schedule = Some("*/15 * * * *".to_owned());
    report.resources = af_policy::manifest::Limits {
        cpu_millicores: Some(2000),
        memory_bytes: None,
    };
    let fixture = Fixture::new(vec![web, report]);
    let spec = fixture.spec("web");
    let mut deployment = deploy::services::deployment(&fixture.names, &spec);
    assert_eq!(deployment.spec.replicas, Some(3));
    let wanted = BTreeMap::from([
        ("cpu".to_owned(), Quantity("500m".to_owned())),
        ("memory".to_owned(), Quantity("268435456".to_owned())),
    ]);
    let resources = |pod: Option<&k8s_openapi::api::core::v1::PodSpec>| {
        pod.expect("pod").containers[0]
            .resources
            .clone()
            .expect("resources")
    };
    let served = resources(deployment.spec.template.spec.as_ref());
    assert_eq!(served.limits.as_ref(), Some(&wanted));
    assert_eq!(served.requests, served.limits, "requested as limited");
    let job = deploy::jobs::job(&fixture.names, &spec, Duration::from_secs(600));
    let job_pod = job.spec.as_ref().and_then(|s| s.template.spec.as_ref());
    assert_eq!(resources(job_pod), served, "the migration is limited alike");
    let cron = deploy::cron::cron_job(&fixture.names, &fixture.spec("report"));
    let cron_pod = cron
        .spec
        .job_template
        .spec
        .as_ref()
        .and_then(|s| s.template.spec.as_ref());
    let cron_limits = resources(cron_pod).limits.expect("limits");
    assert_eq!(
        cron_limits,
        BTreeMap::from([("cpu".to_owned(), Quantity("2000m".to_owned()))]),
        "only the limit the manifest sets"
    );
    // The gate is not limited: it runs before the service and is done when it starts.
    let pod = deployment.spec.template.spec.as_ref().expect("pod");
    let gate = &pod.init_containers.as_ref().expect("the gate")[0];
    assert_eq!(gate.resources, None);
    steady(
        &mut deployment.spec.template,
        deployment.metadata.labels.as_mut().expect("labels"),
        &spec,
    );
    check("service-deployment-scaled.json", &deployment);
}

#[test]
fn a_service_without_limits_has_no_resources_and_one_replica() {
    use crate::plan::{Kind, ServicePlan};

    let fixture = Fixture::new(vec![ServicePlan::new("bg", Kind::Worker, "/src/bg")]);
    let deployment = deploy::services::deployment(&fixture.names, &fixture.spec("bg"));
    assert_eq!(deployment.spec.replicas, Some(1));
    let pod = deployment.spec.template.spec.as_ref().expect("pod");
    assert_eq!(pod.containers[0].resources, None);
}

#[test]
fn the_images_system_stores_are_mounted_over_with_the_environment_ca_appended() {
    use crate::plan::{Kind, ServicePlan};
    use crate::trust::store::{ImageFile, SYSTEM_STORES, replacements};
    let mut web = ServicePlan::new("web", Kind::Web, "/src/web");
    web.port = Some(8080);
    let fixture = Fixture::new(vec![web]);
    let root = "-----BEGIN CERTIFICATE-----\nUk9PVA==\n-----END CERTIFICATE-----\n";
    // A Debian-style image: its one store.
    let found = [
        (SYSTEM_STORES[0], ImageFile::File(root.to_owned())),
        (SYSTEM_STORES[1], ImageFile::Leave),
        (SYSTEM_STORES[2], ImageFile::Leave),
    ];
    let stores = replacements(found, &fixture.trust.ca_pem);
    let config_map = deploy::services::system_store(&names(), "web", &stores);
    assert_eq!(config_map.metadata.name.as_deref(), Some("af-store-web"));
    let data = config_map.data.expect("data");
    let pem = &data["etc_ssl_certs_ca-certificates.crt"];
    assert!(
        pem.starts_with(root) && pem.ends_with(&fixture.trust.ca_pem),
        "{pem}"
    );

    let paths = [SYSTEM_STORES[0]];
    let spec = deploy::services::Spec {
        stores: &paths,
        ..fixture.spec("web")
    };
    let deployment = deploy::services::deployment(&names(), &spec);
    let pod = deployment.spec.template.spec.clone().expect("pod");
    let volumes = pod.volumes.expect("volumes");
    let store = volumes
        .iter()
        .find(|v| v.name == "af-store")
        .expect("the store volume");
    assert_eq!(
        store.config_map.as_ref().map(|c| c.name.as_str()),
        Some("af-store-web")
    );
    let main = &pod.containers[0];
    let mount = main
        .volume_mounts
        .iter()
        .flatten()
        .find(|m| m.mount_path == SYSTEM_STORES[0])
        .expect("mounted over the image's store");
    assert_eq!(
        (mount.sub_path.as_deref(), mount.read_only),
        (Some("etc_ssl_certs_ca-certificates.crt"), Some(true))
    );
    // An image without a store gets neither the volume nor a mount.
    let bare = deploy::services::deployment(&names(), &fixture.spec("web"));
    let pod = bare.spec.template.spec.clone().expect("pod");
    assert!(
        pod.volumes
            .expect("volumes")
            .iter()
            .all(|v| v.name != "af-store")
    );
}
