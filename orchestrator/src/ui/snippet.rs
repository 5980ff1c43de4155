//! The egress rule that would decide one recorded request with a chosen mode (made by
//! `suggest::rule_for`: exactly its host, port, path and method), as an `af.yaml` fragment,
//! checked by the catalogue compiler.

use af_policy::egress::{Catalogue, EgressSpec, Mode, RuleSpec};
use af_sidecar_api::journal::DecisionRecord;
use serde::Serialize;

/// `egress: {rules: [...]}`, the shape pasted into `af.yaml`.
#[derive(Serialize)]
struct Fragment {
    egress: Rules,
}

#[derive(Serialize)]
struct Rules {
    rules: Vec<RuleSpec>,
}

/// The mode a snippet takes when none is asked for: the request's own verdict, or `allow` for
/// one that was refused (the rule that would let it out).
pub(super) fn default_mode(d: &DecisionRecord) -> Mode {
    match d.mode {
        Some(mode) if mode != Mode::Block && !d.refused() => mode,
        _ => Mode::Allow,
    }
}

/// `rule` as the YAML fragment to paste, or why it cannot be one (the catalogue compiler's
/// first problem).
pub(super) fn yaml(rule: RuleSpec) -> Result<String, String> {
    let spec = EgressSpec {
        rules: vec![rule],
        ..EgressSpec::default()
    };
    if let Err(problems) = Catalogue::compile(&spec) {
        return Err(problems.first().map_or_else(
            || "the rule does not compile".to_owned(),
            |p| format!("{}: {}", p.field, p.message),
        ));
    }
    let fragment = Fragment {
        egress: Rules { rules: spec.rules },
    };
    serde_saphyr::to_string(&fragment).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use af_policy::egress::Target;

    use crate::suggest::rule_for as rule;

    use super::*;

    fn decision(method: &str, host: &str, port: u16, path: &str) -> DecisionRecord {
        DecisionRecord {
            method: method.to_owned().into(),
            host: host.to_owned(),
            port,
            path: path.to_owned(),
            mode: Some(Mode::Block),
            code: Some("AF-NET-010".into()),
            ..DecisionRecord::default()
        }
    }

    #[test]
    fn a_refused_request_gets_an_allow_rule_for_exactly_its_host_path_and_method() {
        let d = decision("POST", "api.example.test", 443, "/v1/users?page=2");
        assert_eq!(default_mode(&d), Mode::Allow);
        let text = yaml(rule(&d, default_mode(&d)).expect("a host")).expect("compiles");
        let parsed: serde_json::Value = serde_saphyr::from_str(&text).expect("YAML");
        assert_eq!(
            parsed,
            serde_json::json!({"egress": {"rules": [{
                "host": "api.example.test",
                "mode": "allow",
                "paths": ["/v1/users"],
                "methods": ["POST"],
            }]}})
        );
        // The rule decides that request and not its neighbours.
        let spec: EgressSpec =
            serde_json::from_value(parsed["egress"].clone()).expect("an egress section");
        let catalogue = Catalogue::compile(&spec).expect("compiles");
        let decide = |method, path| {
            catalogue
                .decide(&Target {
                    method,
                    host: "api.example.test",
                    port: 443,
                    path,
                })
                .mode
        };
        assert_eq!(decide("POST", "/v1/users"), Mode::Allow);
        assert_eq!(decide("GET", "/v1/users"), Mode::Block);
        assert_eq!(decide("POST", "/v1/orders"), Mode::Block);
    }

    #[test]
    fn a_tunnel_on_another_port_gets_a_host_and_port_rule_without_limits() {
        let d = decision("CONNECT", "db.example.test", 5432, "");
        let rule = rule(&d, Mode::Allow).expect("a host");
        assert_eq!(rule.host, "db.example.test:5432");
        assert!(rule.methods.is_empty() && rule.paths.is_empty());
    }

    #[test]
    fn a_local_answer_keeps_its_mode_and_a_record_without_a_host_has_no_rule() {
        let mocked = DecisionRecord {
            mode: Some(Mode::Mock),
            code: None,
            ..decision("GET", "api.github.com", 443, "/user")
        };
        assert_eq!(default_mode(&mocked), Mode::Mock);
        assert_eq!(
            rule(&decision("", "", 443, ""), Mode::Allow),
            Err(crate::suggest::NoRule::NoHost)
        );
    }

    #[test]
    fn the_page_offers_no_rule_for_what_the_address_guard_refuses() {
        for host in [
            "169.254.169.254",
            "::1",
            "fe80::1",
            "10.0.0.1",
            "100.64.0.1",
            "[::ffff:127.0.0.1]",
            "localhost",
            "metadata.google.internal",
        ] {
            let refused = rule(&decision("GET", host, 80, "/"), Mode::Allow);
            assert!(
                matches!(refused, Err(crate::suggest::NoRule::RefusedByGuard(_))),
                "{host}: {refused:?}"
            );
            assert!(
                refused
                    .err()
                    .is_some_and(|why| why.to_string().contains("refused by the guard")),
                "{host}"
            );
        }
        // The control: a public address gets its rule.
        assert_eq!(
            rule(&decision("GET", "198.51.100.7", 80, "/"), Mode::Allow).map(|r| r.host),
            Ok("198.51.100.7".to_owned())
        );
    }
}
