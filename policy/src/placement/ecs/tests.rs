//! The thirteen verdicts against the generated plan, and each closure undone in the plan
//! turning its own path open.

use super::plan::{Destination, SgRule, WORKLOAD_GROUP, WORKLOAD_ROUTES};
use super::*;
use crate::egress::{Mode, RuleSpec};

fn catalogue() -> EgressSpec {
    EgressSpec {
        rules: vec![
            RuleSpec::new("api.stripe.com", Mode::Sandbox),
            RuleSpec::new("api.github.com", Mode::Mock),
            RuleSpec::new("*.githubusercontent.com", Mode::Allow),
        ],
        ..EgressSpec::default()
    }
}

fn verdicts(plan: &Plan, allow_list: &AllowList) -> Vec<(&'static str, Verdict)> {
    paths::judge(plan, allow_list)
        .into_iter()
        .map(|p| (p.id, p.verdict))
        .collect()
}

fn verdict_of(plan: &Plan, allow_list: &AllowList, id: &str) -> Verdict {
    verdicts(plan, allow_list)
        .into_iter()
        .find(|(i, _)| *i == id)
        .map(|(_, v)| v)
        .unwrap_or_else(|| panic!("no path {id}"))
}

#[test]
fn the_generated_plan_closes_ten_paths_leaves_one_open_and_two_unproven() {
    let report = report("shop", &catalogue(), &Network::placeholder());
    let expected = [
        ("internet-ipv4", Verdict::Closed, Grade::Computed),
        ("public-ip", Verdict::Closed, Grade::Computed),
        ("internet-ipv6", Verdict::Closed, Grade::Computed),
        ("inside-vpc", Verdict::Closed, Grade::Computed),
        ("ecr-api", Verdict::Closed, Grade::Computed),
        ("ecr-docker", Verdict::Closed, Grade::Computed),
        ("s3-layers", Verdict::Closed, Grade::Computed),
        ("cloudwatch-logs", Verdict::Closed, Grade::Computed),
        ("ecs-exec", Verdict::Closed, Grade::Computed),
        ("dns-resolver", Verdict::Closed, Grade::Computed),
        ("task-metadata", Verdict::Open, Grade::Documented),
        ("instance-metadata", Verdict::Unproven, Grade::Documented),
        ("time-sync", Verdict::Unproven, Grade::Documented),
    ];
    let found: Vec<_> = report
        .paths
        .iter()
        .map(|p| (p.id, p.verdict, p.grade))
        .collect();
    assert_eq!(found, expected);
    assert_eq!(
        report.counts,
        Counts {
            closed: 10,
            open: 1,
            unproven: 2
        }
    );
    for path in &report.paths {
        assert_eq!(
            path.closed_by.is_empty(),
            path.verdict != Verdict::Closed,
            "{}",
            path.id
        );
        assert!(path.evidence.observed.is_empty(), "{}", path.id);
        assert!(!path.evidence.documented.is_empty(), "{}", path.id);
    }
    assert_eq!(report.notice, Some(PLACEHOLDER_NOTICE));
    assert!(report.to_string().starts_with(PLACEHOLDER_NOTICE));
}

#[test]
fn each_closure_undone_in_the_plan_opens_its_own_path() {
    let allow_list = AllowList::from_catalogue(&catalogue());
    let generated = Plan::generate("shop", &Network::placeholder(), &allow_list);
    let egress_to = |plan: &mut Plan, to: &str| {
        if let Some(group) = plan.security_groups.get_mut(WORKLOAD_GROUP) {
            group.egress.push(SgRule {
                protocol: "tcp".into(),
                from_port: 443,
                to_port: 443,
                destination: Destination::Cidr(to.into()),
            });
        }
    };
    let route_to = |plan: &mut Plan, to: &str| {
        if let Some(table) = plan.route_tables.get_mut(WORKLOAD_ROUTES) {
            table.routes.push(super::plan::Route {
                destination: to.into(),
                target: "igw-1".into(),
            });
        }
    };
    let widen = |plan: &mut Plan, short: &str| {
        let region = plan.network.region.clone();
        if let Some(statement) = plan
            .vpc_endpoints
            .get_mut(&format!("com.amazonaws.{region}.{short}"))
            .and_then(|endpoint| endpoint.policy.statements.last_mut())
        {
            statement.resources = vec!["*".into()];
        }
    };
    type Undo = Box<dyn Fn(&mut Plan)>;
    let cases: Vec<(&str, Undo)> = vec![
        (
            "internet-ipv4",
            Box::new(move |p| egress_to(p, "0.0.0.0/0")),
        ),
        ("internet-ipv4", Box::new(move |p| route_to(p, "0.0.0.0/0"))),
        ("public-ip", Box::new(|p| p.task.assign_public_ip = true)),
        ("internet-ipv6", Box::new(move |p| egress_to(p, "::/0"))),
        ("internet-ipv6", Box::new(move |p| route_to(p, "::/0"))),
        ("inside-vpc", Box::new(move |p| egress_to(p, "10.0.0.0/16"))),
        ("ecr-api", Box::new(move |p| widen(p, "ecr.api"))),
        ("ecr-docker", Box::new(move |p| widen(p, "ecr.dkr"))),
        ("s3-layers", Box::new(move |p| widen(p, "s3"))),
        ("cloudwatch-logs", Box::new(move |p| widen(p, "logs"))),
        (
            "ecs-exec",
            Box::new(|p| p.task.enable_execute_command = true),
        ),
        (
            "dns-resolver",
            Box::new(|p| p.dns_firewall.rule_group.fail_open = rule_group::FailOpen::Enabled),
        ),
        (
            "dns-resolver",
            Box::new(|p| p.dns_firewall.rule_group.rules[0].priority = 5 + plan::TERMINAL_PRIORITY),
        ),
    ];
    for (id, undo) in cases {
        let mut plan = generated.clone();
        assert_eq!(
            verdict_of(&plan, &allow_list, id),
            Verdict::Closed,
            "{id} before"
        );
        undo(&mut plan);
        let opened: Vec<&str> = verdicts(&plan, &allow_list)
            .into_iter()
            .filter(|(_, v)| *v == Verdict::Open)
            .map(|(i, _)| i)
            .collect();
        assert_eq!(opened, [id, "task-metadata"], "undoing {id}");
    }
}

#[test]
fn the_endpoint_policies_name_only_this_environments_resources() {
    let network = Network::placeholder();
    let plan = Plan::generate("shop", &network, &AllowList::default());
    let resources: Vec<String> = plan
        .vpc_endpoints
        .values()
        .flat_map(|e| e.policy.statements.iter().flat_map(|s| s.resources.clone()))
        .collect();
    assert_eq!(
        resources,
        [
            "*",
            "arn:aws:ecr:us-east-1:*:repository/af/shop",
            "arn:aws:ecr:us-east-1:*:repository/af/shop",
            "arn:aws:logs:us-east-1:*:log-group:/af/shop:*",
            "arn:aws:s3:::prod-us-east-1-starport-layer-bucket/*",
        ]
    );
}

#[test]
fn the_generated_rule_group_passes_its_own_check_and_blocks_locally_answered_hosts() {
    let allow_list = AllowList::from_catalogue(&catalogue());
    let plan = Plan::generate("shop", &Network::placeholder(), &allow_list);
    let group = &plan.dns_firewall.rule_group;
    assert!(rule_group::check(group).is_empty());
    let listed = |action| -> Vec<String> {
        group
            .rules
            .iter()
            .filter(|r| r.action == action && r.priority < plan::TERMINAL_PRIORITY)
            .flat_map(|r| group.domain_lists[&r.domain_list].clone())
            .collect()
    };
    assert_eq!(
        listed(rule_group::Action::Allow),
        ["api.stripe.com.", "*.githubusercontent.com."]
    );
    assert_eq!(listed(rule_group::Action::Block), ["api.github.com."]);
}

#[test]
fn a_host_dns_firewall_cannot_hold_opens_the_resolver_and_is_named_in_the_refusal() {
    let mut egress = catalogue();
    egress
        .rules
        .push(RuleSpec::new("api.*.example.com", Mode::Allow));
    let report = report("shop", &egress, &Network::placeholder());
    let dns = report.paths.iter().find(|p| p.id == "dns-resolver");
    assert_eq!(dns.map(|p| p.verdict), Some(Verdict::Open));
    let refusals: Vec<(&str, bool)> = report
        .refusals()
        .iter()
        .map(|r| (r.code.code, r.statement.contains("api.*.example.com")))
        .collect();
    assert_eq!(refusals, [("AF-SCH-006", false), ("AF-SCH-012", true)]);
}

#[test]
fn the_probe_image_decides_what_the_instance_metadata_path_says() {
    let without = report("shop", &catalogue(), &Network::placeholder());
    let with = report(
        "shop",
        &catalogue(),
        &Network {
            probe_image: Some("registry.example/af-probe:1".into()),
            ..Network::placeholder()
        },
    );
    let why = |r: &EcsReport| {
        r.paths
            .iter()
            .find(|p| p.id == "instance-metadata")
            .map(|p| (p.verdict, p.why.clone()))
    };
    let (verdict, text) = why(&without).expect("path");
    assert_eq!(verdict, Verdict::Unproven);
    assert!(text.contains("no probe container"), "{text}");
    let (verdict, text) = why(&with).expect("path");
    assert_eq!(verdict, Verdict::Unproven);
    assert!(text.contains("registry.example/af-probe:1"), "{text}");
    assert_eq!(
        with.plan.task.probe_container.as_deref(),
        Some("registry.example/af-probe:1")
    );
}
