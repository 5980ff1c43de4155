//! The rendered objects against their golden files in `orchestrator/tests/golden/kubernetes/`
//! (reviewed by hand once; a change to a rendering shows up as a diff there). Run with
//! `AF_BLESS=1` to rewrite them after an intended change, then review the diff.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use serde::Serialize;

use super::names::{DEFAULT_PREFIX, Names};
use super::namespace;
use super::policies::{self, ClusterResolver};
use super::probe::pod::{self, ProbePod};
use super::probe::targets::ProbeTargets;
use crate::env_id::EnvId;

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

#[test]
fn the_namespace_carries_our_labels_from_its_creation() {
    check("namespace.json", &namespace::render(&names()));
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
        &policies::render(&names(), &kube_dns),
    );
}

#[test]
fn the_sidecar_reaches_a_resolver_known_by_address_at_exactly_that_address() {
    let by_address = ClusterResolver::Addresses(vec![
        "10.244.0.5".parse().expect("ip"),
        "fd00:10:244::5".parse().expect("ip"),
    ]);
    let rendered = policies::render(&names(), &by_address);
    check("sidecar-egress-by-address.json", &rendered[4]);
    let unknown = policies::render(&names(), &ClusterResolver::Unknown);
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
fn the_probe_pod_runs_each_route_under_the_services_rules() {
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
            deadline: Duration::from_secs(120),
        },
    );
    check("probe-pod.json", &rendered);
}
