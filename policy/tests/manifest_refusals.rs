//! Every way a manifest is refused: the code, the line and the column.

mod common;

use common::{problems, refusals, statements};

const HEAD: &str = "version: 1\nname: shop\n";

fn with_head(rest: &str) -> String {
    format!("{HEAD}{rest}")
}

#[test]
fn a_misspelled_top_level_key_is_refused_with_the_key_it_resembles() {
    let text = "version: 1\nname: shop\nsevices: []\n";
    assert_eq!(refusals(text), [("AF-MAN-006", 3, 1)]);
    let problem = &problems(text)[0];
    assert!(problem.report.statement.contains("did you mean services?"));
    assert_eq!(problem.report.next, "Rename sevices to services.");
}

#[test]
fn a_misspelled_service_key_is_refused_with_the_key_it_resembles() {
    let text = with_head("services:\n  - name: api\n    port: 80\n    helth_path: /healthz\n");
    assert_eq!(refusals(&text), [("AF-MAN-006", 6, 5)]);
    assert!(statements(&text)[0].contains("in services[0]; did you mean health_path?"));
}

#[test]
fn an_unknown_key_like_no_known_one_lists_the_keys_known_there() {
    let text = with_head("runtime:\n  flavour: vanilla\n");
    assert_eq!(refusals(&text), [("AF-MAN-006", 4, 3)]);
    let next = &problems(&text)[0].report.next;
    assert!(
        next.contains("domain, kubeconfig_context, namespace_prefix, provider"),
        "{next}"
    );
}

#[test]
fn a_value_of_the_wrong_type_is_refused_where_the_value_is() {
    let text = with_head("services:\n  - name: api\n    port: http\n");
    assert_eq!(refusals(&text), [("AF-MAN-007", 5, 11)]);
    assert_eq!(
        statements(&text),
        [r#"services[0].port must be a whole number, not the string "http"."#]
    );
}

#[test]
fn a_number_where_text_belongs_is_refused_with_a_hint_to_quote_it() {
    let text = with_head("services:\n  - name: api\n    port: 80\n    env:\n      PORT: 8080\n");
    assert_eq!(refusals(&text), [("AF-MAN-007", 7, 13)]);
    assert!(
        problems(&text)[0]
            .report
            .next
            .contains("(put it in quotes)")
    );
}

#[test]
fn numbers_outside_their_range_are_refused() {
    let text = with_head(
        "services:\n  - name: api\n    port: 0\n  - name: web\n    port: 70000\n    health_timeout: 0\n",
    );
    assert_eq!(
        refusals(&text),
        [
            ("AF-MAN-007", 5, 11),
            ("AF-MAN-007", 7, 11),
            ("AF-MAN-007", 8, 21)
        ]
    );
    assert!(statements(&text)[0].contains("must be from 1 to 65535, not 0"));
}

#[test]
fn an_unknown_mode_is_refused_listing_the_modes() {
    let text = with_head("egress:\n  rules:\n    - host: api.example.com\n      mode: alow\n");
    assert_eq!(refusals(&text), [("AF-MAN-007", 6, 13)]);
    assert!(statements(&text)[0].contains(
        "must be one of allow, block, mock, capture, synth, sandbox, not the string \"alow\""
    ));
}

#[test]
fn a_missing_required_key_is_refused_at_the_mapping_that_lacks_it() {
    assert_eq!(refusals("version: 1\n"), [("AF-MAN-014", 1, 1)]);
    let text = with_head("services:\n  - port: 80\n");
    assert_eq!(refusals(&text), [("AF-MAN-014", 4, 5)]);
    assert_eq!(
        statements(&text),
        ["services[0] has no name, which is required."]
    );
}

#[test]
fn an_empty_manifest_is_refused() {
    assert_eq!(refusals(""), [("AF-MAN-014", 1, 1)]);
    assert_eq!(refusals("# only a comment\n"), [("AF-MAN-014", 1, 1)]);
}

#[test]
fn a_manifest_that_is_not_a_mapping_is_refused() {
    assert_eq!(refusals("- version: 1\n"), [("AF-MAN-007", 1, 1)]);
}

#[test]
fn an_unsupported_version_is_refused() {
    assert_eq!(
        refusals("version: 2\nname: shop\n"),
        [("AF-MAN-012", 1, 10)]
    );
    assert_eq!(
        refusals("version: \"1\"\nname: shop\n"),
        [("AF-MAN-007", 1, 10)]
    );
}

#[test]
fn names_that_are_not_dns_labels_are_refused() {
    let text = "version: 1\nname: My_Shop\nservices:\n  - name: Api\n    port: 80\nruntime:\n  targets:\n    - name: eu.west\n";
    assert_eq!(
        refusals(text),
        [
            ("AF-MAN-008", 2, 7),
            ("AF-MAN-008", 4, 11),
            ("AF-MAN-008", 8, 13)
        ]
    );
    assert_eq!(
        statements(text)[1],
        r#"The service name "Api" is not a DNS label."#
    );
}

#[test]
fn yaml_anchors_and_aliases_are_refused_where_they_are_written() {
    let text = with_head(
        "services:\n  - name: api\n    port: 80\n    env: &common\n      A: b\n  - name: web\n    port: 81\n    env: *common\n",
    );
    assert_eq!(
        refusals(&text),
        [("AF-MAN-005", 6, 10), ("AF-MAN-005", 10, 10)]
    );
}

#[test]
fn an_alias_bomb_is_refused_without_being_expanded() {
    let mut text = String::from("version: 1\nname: shop\na0: &a0 [x, x, x, x, x, x, x, x, x, x]\n");
    for i in 1..20 {
        let p = i - 1;
        text.push_str(&format!(
            "a{i}: &a{i} [*a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}]\n"
        ));
    }
    let found = refusals(&text);
    assert!(
        found
            .iter()
            .all(|(code, ..)| ["AF-MAN-005", "AF-MAN-006"].contains(code))
    );
    assert!(
        found
            .iter()
            .filter(|(code, ..)| *code == "AF-MAN-005")
            .count()
            >= 190
    );
}

#[test]
fn a_key_written_twice_is_refused_at_the_second() {
    assert_eq!(
        refusals("version: 1\nname: shop\nname: other\n"),
        [("AF-MAN-013", 3, 1)]
    );
}

#[test]
fn two_services_with_one_name_are_refused_at_the_second() {
    let text = with_head("services:\n  - name: api\n    port: 80\n  - name: api\n    port: 81\n");
    assert_eq!(refusals(&text), [("AF-MAN-013", 6, 11)]);
    assert_eq!(statements(&text), ["Two services are named api."]);
}

#[test]
fn a_dependency_on_an_undeclared_service_is_refused_at_the_entry() {
    let text = with_head(
        "services:\n  - name: api\n    port: 80\n    depends_on: [db, cache]\n  - name: db\n    kind: worker\n",
    );
    assert_eq!(refusals(&text), [("AF-MAN-010", 6, 22)]);
    assert_eq!(
        statements(&text),
        ["Service api depends on cache, which the manifest does not declare."]
    );
}

#[test]
fn a_dependency_cycle_is_refused_and_named() {
    let text = with_head(
        "services:\n  - name: api\n    port: 80\n    depends_on: [worker]\n  - name: worker\n    kind: worker\n    depends_on:\n      - db\n  - name: db\n    kind: worker\n    depends_on: [api]\n",
    );
    assert_eq!(refusals(&text), [("AF-MAN-009", 13, 18)]);
    assert_eq!(
        statements(&text),
        ["The services' depends_on form a cycle: api → worker → db → api."]
    );
}

#[test]
fn a_service_that_depends_on_itself_is_a_cycle() {
    let text = with_head("services:\n  - name: api\n    port: 80\n    depends_on: [api]\n");
    assert_eq!(refusals(&text), [("AF-MAN-009", 6, 18)]);
    assert_eq!(
        statements(&text),
        ["The services' depends_on form a cycle: api → api."]
    );
}

#[test]
fn invalid_yaml_is_refused_with_its_position() {
    let found = refusals("version: 1\nname: [shop\n");
    assert_eq!(found.len(), 1);
    assert_eq!(found[0].0, "AF-MAN-004");
    assert!(found[0].1 >= 2, "{found:?}");
}

#[test]
fn a_second_yaml_document_is_refused() {
    assert_eq!(
        refusals("version: 1\nname: shop\n---\nversion: 1\n"),
        [("AF-MAN-004", 3, 1)]
    );
}

#[test]
fn nesting_deeper_than_any_manifest_needs_is_refused_without_exhausting_the_stack() {
    let deep = format!(
        "version: 1\nname: shop\nx: {}{}\n",
        "[".repeat(200_000),
        "]".repeat(200_000)
    );
    let found = refusals(&deep);
    assert_eq!(found[0].0, "AF-MAN-004");
    assert_eq!(found[0].1, 3);
}

#[test]
fn text_that_is_not_utf8_is_refused_where_it_stops_being_text() {
    let mut bytes = b"version: 1\nname: sh".to_vec();
    bytes.extend_from_slice(&[0xff, 0xfe]);
    let error = af_policy::manifest::Manifest::from_bytes(&bytes, std::path::Path::new("af.yaml"))
        .expect_err("not UTF-8");
    let problem = &error.problems()[0];
    assert_eq!(
        (
            problem.code(),
            problem.location.line,
            problem.location.column
        ),
        ("AF-MAN-002", 2, 9)
    );
}

#[test]
fn service_fields_that_only_make_sense_together_are_checked() {
    let text = with_head(
        "services:\n  - name: api\n  - name: job\n    kind: cron\n  - name: tick\n    kind: cron\n    schedule: every minute\n  - name: bg\n    kind: worker\n    schedule: \"* * * * *\"\n    health_path: healthz\n",
    );
    assert_eq!(
        refusals(&text),
        [
            ("AF-MAN-014", 4, 5),
            ("AF-MAN-014", 5, 5),
            ("AF-MAN-007", 9, 15),
            ("AF-MAN-007", 12, 15),
            ("AF-MAN-007", 13, 18),
            ("AF-MAN-007", 13, 18),
        ]
    );
    let said = statements(&text);
    assert_eq!(said[0], "Service api is a web service but has no port.");
    assert_eq!(
        said[1],
        "Service job is a cron service but has no schedule."
    );
}

#[test]
fn environment_names_and_resource_quantities_are_checked() {
    let text = with_head(
        "services:\n  - name: api\n    port: 80\n    env:\n      1BAD: x\n      GOOD_1: y\n    resources:\n      cpu: two\n      memory: 1GB\n",
    );
    assert_eq!(
        refusals(&text),
        [
            ("AF-MAN-007", 7, 13),
            ("AF-MAN-007", 10, 12),
            ("AF-MAN-007", 11, 15)
        ]
    );
}

#[test]
fn zero_and_sub_millicore_limits_are_refused_and_a_cron_service_runs_one_copy() {
    let text = with_head(
        "services:\n  - name: api\n    port: 80\n    replicas: 3\n    resources:\n      cpu: \"0.0001\"\n      memory: 0Mi\n  - name: tick\n    kind: cron\n    schedule: \"* * * * *\"\n    replicas: 2\n",
    );
    assert_eq!(
        refusals(&text),
        [
            ("AF-MAN-007", 8, 12),
            ("AF-MAN-007", 9, 15),
            ("AF-MAN-007", 13, 15),
        ]
    );
    assert_eq!(
        statements(&text)[2],
        "Service tick is a cron service, which runs once per schedule, but asks for 2 replicas."
    );
}

#[test]
fn every_problem_is_collected_and_sorted_by_line() {
    let text = "\
runtime:
  provider: nomad
name: Shop
services:
  - name: api
    port: 80
    depends_on: [db]
egress:
  rules:
    - host: api.example.com
      mode: allow
      colour: blue
version: 3
";
    assert_eq!(
        refusals(text),
        [
            ("AF-SCH-005", 2, 13),
            ("AF-MAN-008", 3, 7),
            ("AF-MAN-010", 7, 18),
            ("AF-MAN-006", 12, 7),
            ("AF-MAN-012", 13, 10),
        ]
    );
}

#[test]
fn the_error_reads_as_file_line_column_code_statement_and_next() {
    let error = common::load("version: 1\nname: shop\nsevices: []\n").expect_err("refused");
    assert_eq!(
        error.to_string(),
        "af.yaml:3:1: AF-MAN-006 The key sevices is not one af knows at the top level; did you mean services?\n  Next: Rename sevices to services."
    );
    assert_eq!(error.exit_status().code(), 2);
}

mod placement_at_load {
    use super::{refusals, statements, with_head};

    #[test]
    fn an_unsatisfiable_requirement_is_refused_at_the_requirement() {
        let text = with_head(
            "runtime:\n  provider: kubernetes\n  requires:\n    region: eu-west-2\n  targets:\n    - name: frankfurt\n      kubeconfig_context: eu-prod\n      tags: {region: eu-west-1}\n    - name: virginia\n      kubeconfig_context: us-prod\n      tags: {region: us-east-1}\n",
        );
        assert_eq!(refusals(&text), [("AF-SCH-001", 6, 13)]);
        assert_eq!(
            statements(&text),
            [
                "No runtime satisfies the placement requirement region=eu-west-2; targets offer region=eu-west-1 (frankfurt), region=us-east-1 (virginia)."
            ]
        );
        let error = super::common::load(&text).expect_err("refused");
        assert_eq!(error.exit_status().code(), 3);
    }

    #[test]
    fn target_problems_are_all_refused_at_their_fields() {
        let text = with_head(
            "runtime:\n  provider: kubernetes\n  targets:\n    - name: a\n      kubeconfig_context: one\n      domain: app.localhost\n    - name: a\n      kubeconfig_context: two\n    - name: c\n      kubeconfig_context: one\n    - name: d\n      provider: nomad\n",
        );
        assert_eq!(
            refusals(&text),
            [
                ("AF-SCH-004", 8, 15),
                ("AF-SCH-002", 9, 13),
                ("AF-SCH-003", 12, 27),
                ("AF-SCH-005", 14, 17),
            ]
        );
    }

    #[test]
    fn an_unknown_provider_is_refused_listing_what_this_build_has() {
        let text = with_head("runtime:\n  provider: nomad\n");
        assert_eq!(refusals(&text), [("AF-SCH-005", 4, 13)]);
        assert_eq!(
            statements(&text),
            ["The runtime provider nomad is not one this build has; it has local, kubernetes."]
        );
    }
}

#[test]
fn an_egress_rule_that_cannot_be_compiled_is_refused_at_its_field() {
    let text = with_head(
        "egress:\n  rules:\n    - host: api.example.com\n      mode: allow\n    - host: \"exa mple.com\"\n      mode: allow\n    - host: mail.example.com\n      mode: capture\n      rate_limit: 10/s\n",
    );
    assert_eq!(
        refusals(&text),
        [("AF-MAN-011", 7, 13), ("AF-MAN-011", 11, 19)]
    );
    let said = statements(&text);
    assert!(
        said[0].starts_with("The host of egress rule 1 (exa mple.com) cannot be used: "),
        "{}",
        said[0]
    );
    assert!(said[1].contains("not to a capture rule"), "{}", said[1]);
}

#[test]
fn a_mistake_in_one_service_does_not_hide_problems_in_the_others() {
    let text = with_head(
        "services:\n  - name: api\n    port: 80\n    depends_on: [api]\n  - name: api\n    port: 81\n  - name: db\n    colour: blue\n",
    );
    assert_eq!(
        refusals(&text),
        [
            ("AF-MAN-009", 6, 18),
            ("AF-MAN-013", 7, 11),
            ("AF-MAN-006", 10, 5)
        ]
    );
}

#[test]
fn a_dependency_on_a_service_that_could_not_be_read_is_not_called_missing() {
    let text = with_head(
        "services:\n  - name: api\n    port: 80\n    depends_on: [db]\n  - name: db\n    port: eighty\n",
    );
    assert_eq!(refusals(&text), [("AF-MAN-007", 8, 11)]);
}

#[test]
fn problems_found_before_a_syntax_error_are_sorted_with_it() {
    // Found by the cargo-fuzz target: a parser error can be reported at the start of the
    // construct it could not finish, before problems already found inside it.
    let found = refusals(
        "version: 1\nname: shop\nservices:\n  - name:version: 1\nname: shop\nservices:\n  - name: db\n    path: ./db\n    kind path: ./api\n    dockerfile: Doc db\n    path: ./db\n    kin :: shop\nservice@:\n  - name: db\n    path: .kerfile.dev\n    command: [\"bin/server\", \"--port\"ut: 60\n    env:\n      DATABASE_URvh_path: /db\n    kin :dworker\n    podworker\n    port: 2716\n  - na/healthz\n    health_timeout: : 1\n      DATABASE_URversion: 1\nname: shopLme: api\n    patvupam: \npos",
    );
    assert!(
        found
            .windows(2)
            .all(|w| (w[0].1, w[0].2) <= (w[1].1, w[1].2)),
        "{found:?}"
    );
    assert!(found.iter().any(|(code, ..)| *code == "AF-MAN-004"));
}

#[test]
fn a_capability_that_goes_around_the_sidecar_is_refused_at_its_entry() {
    let text = with_head(
        "services:\n  - name: api\n    port: 80\n    capabilities: [CHOWN, NET_RAW, SETUID, NET_ADMIN, SYS_ADMIN]\n",
    );
    assert_eq!(
        refusals(&text),
        [
            ("AF-MAN-015", 6, 27),
            ("AF-MAN-015", 6, 44),
            ("AF-MAN-015", 6, 55)
        ]
    );
    assert!(
        statements(&text)[0].starts_with("Service api asks for NET_RAW, and it lets a process")
    );
    assert!(problems(&text)[0].report.next.starts_with("Remove it"));
}

#[test]
fn the_capabilities_a_service_may_have_are_accepted() {
    // Positive control for the refusal above: the same list without the refused ones reads.
    let text = with_head(
        "services:\n  - name: api\n    port: 80\n    capabilities: [CHOWN, SETUID, SETGID, NET_BIND_SERVICE]\n",
    );
    let manifest = common::load(&text).unwrap_or_else(|e| panic!("{e}"));
    let names: Vec<&str> = manifest.services[0]
        .capabilities
        .iter()
        .map(|c| c.name())
        .collect();
    assert_eq!(names, ["CHOWN", "SETUID", "SETGID", "NET_BIND_SERVICE"]);
}

#[test]
fn an_unknown_capability_is_refused_as_a_wrong_value() {
    let text = with_head("services:\n  - name: api\n    port: 80\n    capabilities: [CAP_CHOWN]\n");
    assert_eq!(refusals(&text)[0].0, "AF-MAN-007");
}

#[test]
fn an_empty_or_absolute_upstream_root_is_refused_where_it_is_written() {
    let text = with_head(
        "egress:\n  upstream_roots:\n    - certs/internal-ca.pem\n    - \"\"\n    - /etc/ssl/corp.pem\n",
    );
    assert_eq!(
        refusals(&text),
        [("AF-MAN-007", 6, 7), ("AF-MAN-007", 7, 7)]
    );
    let said = statements(&text);
    assert!(said[0].contains("upstream_roots[1] is empty"), "{said:?}");
    assert!(
        said[1].contains("upstream_roots[2] is an absolute path"),
        "{said:?}"
    );
    // The control: a relative path alone is accepted.
    let accepted = common::load(&with_head(
        "egress:\n  upstream_roots: [certs/internal-ca.pem]\n",
    ))
    .expect("a relative path is accepted");
    assert_eq!(accepted.egress.upstream_roots, ["certs/internal-ca.pem"]);
}

#[test]
fn a_prebuilt_image_is_a_reference_and_never_beside_a_build() {
    let ok = with_head("services:\n  - name: db\n    image: postgres:16\n    kind: worker\n");
    assert!(common::load(&ok).is_ok());
    let both = with_head(
        "services:\n  - name: db\n    image: postgres:16\n    dockerfile: Dockerfile.db\n    kind: worker\n",
    );
    assert_eq!(refusals(&both), [("AF-MAN-007", 5, 12)]);
    assert!(statements(&both)[0].contains("names both an image and a build"));
    let bad = with_head("services:\n  - name: db\n    image: \"Postgres 16\"\n    kind: worker\n");
    assert_eq!(refusals(&bad), [("AF-MAN-007", 5, 12)]);
    assert!(statements(&bad)[0].contains("is not an image reference"));
}
