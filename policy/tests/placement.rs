//! Placement as a table: a runtime in, one placement or one refusal out.

#![allow(
    clippy::expect_used,
    reason = "test helpers fail the test by panicking, like #[test] functions"
)]

use std::collections::BTreeMap;

use af_policy::placement::{Placement, Provider, Runtime, Target, check, place};

fn tags(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

fn target(name: &str, context: &str, region: Option<&str>) -> Target {
    Target {
        name: name.to_owned(),
        provider: None,
        kubeconfig_context: Some(context.to_owned()),
        domain: None,
        namespace_prefix: None,
        tags: region.map_or_else(BTreeMap::new, |r| tags(&[("region", r)])),
    }
}

/// The seed's example: Frankfurt and Virginia on Kubernetes.
fn seed(requires: &[(&str, &str)]) -> Runtime {
    Runtime {
        provider: Some("kubernetes".to_owned()),
        domain: Some("preview.example.com".to_owned()),
        requires: tags(requires),
        targets: vec![
            Target {
                domain: Some("eu.preview.example.com".to_owned()),
                ..target("frankfurt", "eu-prod", Some("eu-west-1"))
            },
            Target {
                domain: Some("us.preview.example.com".to_owned()),
                ..target("virginia", "us-prod", Some("us-east-1"))
            },
        ],
        ..Runtime::default()
    }
}

fn placed_on(runtime: &Runtime) -> Option<String> {
    place(runtime).expect("places").target
}

fn refusal(runtime: &Runtime) -> (&'static str, String) {
    let report = place(runtime).expect_err("refused");
    (report.code.code, report.statement)
}

#[test]
fn the_seed_repository_is_placed_in_frankfurt() {
    let placement = place(&seed(&[("region", "eu-west-1")])).expect("places");
    assert_eq!(
        placement,
        Placement {
            target: Some("frankfurt".to_owned()),
            provider: Provider::Kubernetes,
            kubeconfig_context: Some("eu-prod".to_owned()),
            domain: Some("eu.preview.example.com".to_owned()),
            namespace_prefix: None,
            tags: tags(&[("region", "eu-west-1")]),
        }
    );
}

#[test]
fn a_requirement_no_target_meets_is_af_sch_001_naming_what_targets_offer() {
    let report = place(&seed(&[("region", "eu-west-2")])).expect_err("refused");
    assert_eq!(
        report.to_string(),
        "AF-SCH-001 No runtime satisfies the placement requirement region=eu-west-2; targets offer region=eu-west-1 (frankfurt), region=us-east-1 (virginia).\n  Next: Declare a target under runtime.targets carrying that tag, or relax runtime.requires. Nothing was created."
    );
}

#[test]
fn placement_follows_the_requirements_as_a_table() {
    type Requires = &'static [(&'static str, &'static str)];
    let cases: &[(Requires, Option<&str>)] = &[
        (&[], Some("frankfurt")),
        (&[("region", "eu-west-1")], Some("frankfurt")),
        (&[("region", "us-east-1")], Some("virginia")),
        (&[("region", "ap-south-1")], None),
        (&[("region", "us-east-1"), ("tier", "gpu")], None),
    ];
    for (requires, expected) in cases {
        let runtime = seed(requires);
        match expected {
            Some(name) => assert_eq!(placed_on(&runtime).as_deref(), Some(*name), "{requires:?}"),
            None => assert_eq!(refusal(&runtime).0, "AF-SCH-001", "{requires:?}"),
        }
    }
}

#[test]
fn every_requirement_must_hold_on_one_target() {
    let mut runtime = seed(&[("region", "us-east-1"), ("tier", "gpu")]);
    runtime.targets[0]
        .tags
        .insert("tier".to_owned(), "gpu".to_owned());
    assert_eq!(
        refusal(&runtime),
        (
            "AF-SCH-001",
            "No runtime satisfies the placement requirements region=us-east-1, tier=gpu together; targets offer region=eu-west-1 tier=gpu (frankfurt), region=us-east-1 no tier (virginia).".to_owned()
        )
    );
    runtime.targets[1]
        .tags
        .insert("tier".to_owned(), "gpu".to_owned());
    assert_eq!(placed_on(&runtime).as_deref(), Some("virginia"));
}

#[test]
fn a_target_without_the_tag_is_shown_as_offering_none() {
    let mut runtime = seed(&[("region", "eu-west-2")]);
    runtime.targets[1].tags.clear();
    assert!(
        refusal(&runtime)
            .1
            .ends_with("region=eu-west-1 (frankfurt), no region (virginia).")
    );
}

#[test]
fn without_targets_the_runtime_itself_is_the_placement() {
    let runtime = Runtime {
        provider: Some("kubernetes".to_owned()),
        kubeconfig_context: Some("k3d-dev".to_owned()),
        namespace_prefix: Some("af-".to_owned()),
        ..Runtime::default()
    };
    let placement = place(&runtime).expect("places");
    assert_eq!(placement.target, None);
    assert_eq!(placement.provider, Provider::Kubernetes);
    assert_eq!(placement.kubeconfig_context.as_deref(), Some("k3d-dev"));
    assert_eq!(placement.namespace_prefix.as_deref(), Some("af-"));
    assert_eq!(
        place(&Runtime::default()).expect("places").provider,
        Provider::Local
    );
}

#[test]
fn a_requirement_without_targets_is_refused() {
    let runtime = Runtime {
        requires: tags(&[("region", "eu-west-1")]),
        ..Runtime::default()
    };
    assert_eq!(
        refusal(&runtime).1,
        "No runtime satisfies the placement requirement region=eu-west-1; no targets are declared under runtime.targets."
    );
}

#[test]
fn targets_inherit_what_they_do_not_set() {
    let mut runtime = seed(&[]);
    runtime.namespace_prefix = Some("pr-".to_owned());
    runtime.targets[0].domain = None;
    let placement = place(&runtime).expect("places");
    assert_eq!(placement.provider, Provider::Kubernetes);
    assert_eq!(placement.domain.as_deref(), Some("preview.example.com"));
    assert_eq!(placement.namespace_prefix.as_deref(), Some("pr-"));
}

#[test]
fn placement_is_a_pure_function_of_the_runtime() {
    let runtime = seed(&[("region", "us-east-1")]);
    assert_eq!(place(&runtime), place(&runtime.clone()));
}

#[test]
fn providers_are_local_kubernetes_and_ecs_and_any_other_name_is_refused() {
    let cases = [
        ("local", None),
        ("kubernetes", None),
        ("ecs", None),
        ("nomad", Some("AF-SCH-005")),
        ("Local", Some("AF-SCH-005")),
    ];
    for (name, code) in cases {
        let runtime = Runtime {
            provider: Some(name.to_owned()),
            ..Runtime::default()
        };
        assert_eq!(place(&runtime).err().map(|r| r.code.code), code, "{name}");
    }
}

#[test]
fn target_refusals_are_all_found_with_their_paths() {
    let mut runtime = seed(&[]);
    runtime.targets.push(target("frankfurt", "other", None)); // same name
    runtime.targets.push(target("berlin", "eu-prod", None)); // same context as frankfurt
    runtime.targets.push(Target {
        domain: Some("App.Localhost.".to_owned()),
        ..target("dev", "k3d-dev", None)
    });
    runtime.targets.push(Target {
        provider: Some("nomad".to_owned()),
        ..target("fargate", "none", None)
    });
    let found: Vec<(String, &str)> = check(&runtime)
        .into_iter()
        .map(|(path, report)| (path.to_string(), report.code.code))
        .collect();
    assert_eq!(
        found,
        [
            ("targets[2].name".to_owned(), "AF-SCH-002"),
            ("targets[3].kubeconfig_context".to_owned(), "AF-SCH-003"),
            ("targets[4].domain".to_owned(), "AF-SCH-004"),
            ("targets[5].provider".to_owned(), "AF-SCH-005"),
        ]
    );
    assert_eq!(
        place(&runtime).expect_err("refused").code.code,
        "AF-SCH-002"
    );
}

#[test]
fn two_local_targets_are_the_same_runtime() {
    let local = |name: &str| Target {
        provider: Some("local".to_owned()),
        kubeconfig_context: None,
        ..target(name, "", None)
    };
    let runtime = Runtime {
        targets: vec![local("a"), local("b")],
        ..Runtime::default()
    };
    let report = place(&runtime).expect_err("refused");
    assert_eq!(report.code.code, "AF-SCH-003");
    assert_eq!(
        report.statement,
        "Runtime targets a and b both resolve to the local Docker daemon."
    );
}

#[test]
fn a_kubernetes_runtime_without_targets_cannot_keep_a_localhost_domain() {
    let runtime = Runtime {
        provider: Some("kubernetes".to_owned()),
        domain: Some("localhost".to_owned()),
        ..Runtime::default()
    };
    assert_eq!(refusal(&runtime).0, "AF-SCH-004");
    let local = Runtime {
        domain: Some("localhost".to_owned()),
        ..Runtime::default()
    };
    assert!(place(&local).is_ok());
}

#[test]
fn a_namespace_prefix_must_be_able_to_begin_a_namespace_name() {
    let with_prefix = |prefix: &str| Runtime {
        provider: Some("kubernetes".to_owned()),
        namespace_prefix: Some(prefix.to_owned()),
        ..Runtime::default()
    };
    for good in ["af-", "af-env-", "p", &"a".repeat(33)] {
        assert!(place(&with_prefix(good)).is_ok(), "{good}");
    }
    for bad in ["", "-af", "Af-", "af_", "af.", "1af", &"a".repeat(34)] {
        let (code, statement) = refusal(&with_prefix(bad));
        assert_eq!(code, "AF-SCH-007", "{bad}");
        assert_eq!(
            statement,
            format!("The namespace prefix {bad:?} cannot begin a Kubernetes namespace name.")
        );
    }
    let on_a_target = Runtime {
        provider: Some("kubernetes".to_owned()),
        targets: vec![Target {
            namespace_prefix: Some("Bad".to_owned()),
            ..target("eu", "eu-prod", None)
        }],
        ..Runtime::default()
    };
    let problems = check(&on_a_target);
    assert_eq!(problems.len(), 1);
    assert_eq!(problems[0].0.to_string(), "targets[0].namespace_prefix");
    assert_eq!(problems[0].1.code.code, "AF-SCH-007");
}
