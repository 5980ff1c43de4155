//! What the answering modes work from, gathered on this machine for the sidecar's
//! configuration: the fixture packs and OpenAPI descriptions egress rules name (read relative
//! to the manifest's directory), and the test credentials rules name (read from `af`'s own
//! environment).

use std::collections::BTreeMap;
use std::fmt;
use std::path::Path;

use af_policy::egress::{EgressSpec, Mode};
use af_policy::error::{Report, codes};
use af_sidecar_api::config::{ApiKey, ModelConfig};
use serde_json::Value;

/// The inputs of mock, synth and sandbox mode.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ModesInput {
    /// Fixture packs by the path a rule's `fixtures` writes.
    pub packs: BTreeMap<String, Value>,
    /// OpenAPI descriptions by the path a rule's `openapi` writes.
    pub openapi: BTreeMap<String, Value>,
    /// Test credentials by the name a rule's `credential` gives.
    pub credentials: Credentials,
    /// Credentials named by a rule but not set in the environment (the sidecar refuses those
    /// sandbox hosts with AF-NET-044).
    pub missing_credentials: Vec<String>,
    /// The model synth may ask, when a rule is in synth mode and `AF_SYNTH_MODEL_URL` is set:
    /// `AF_SYNTH_MODEL_KEY` is its Bearer key and `AF_SYNTH_MODEL` its name (default
    /// `gpt-4o-mini`). `Debug` leaves the key out.
    pub model: Option<ModelConfig>,
}

/// Test credentials by name. `Debug` shows the names only.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct Credentials(pub BTreeMap<String, String>);

impl fmt::Debug for Credentials {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_set().entries(self.0.keys()).finish()
    }
}

impl ModesInput {
    /// Read every file the rules name from `dir` (the manifest's directory) and look every
    /// credential up with `var`. A file that is missing, unreadable or neither YAML nor JSON
    /// refuses (AF-RUN-052); a missing credential is only listed.
    pub fn load(
        egress: &EgressSpec,
        dir: &Path,
        var: impl Fn(&str) -> Option<String>,
    ) -> Result<ModesInput, Report> {
        let mut input = ModesInput::default();
        for (index, rule) in egress.rules.iter().enumerate() {
            if let Some(path) = &rule.fixtures {
                let doc = read_document(dir, path, index, "fixtures")?;
                input.packs.insert(path.clone(), doc);
            }
            if let Some(path) = &rule.openapi {
                let doc = read_document(dir, path, index, "openapi")?;
                input.openapi.insert(path.clone(), doc);
            }
            if let Some(name) = &rule.credential {
                match var(name).filter(|v| !v.is_empty()) {
                    Some(value) => {
                        input.credentials.0.insert(name.clone(), value);
                    }
                    None if !input.missing_credentials.contains(name) => {
                        input.missing_credentials.push(name.clone());
                    }
                    None => {}
                }
            }
        }
        let synth = egress.rules.iter().any(|r| r.mode == Mode::Synth)
            || egress.default == Some(Mode::Synth);
        input.model = var("AF_SYNTH_MODEL_URL")
            .filter(|url| synth && !url.is_empty())
            .map(|base_url| {
                ModelConfig::new(
                    base_url,
                    ApiKey::new(var("AF_SYNTH_MODEL_KEY").unwrap_or_default()),
                    var("AF_SYNTH_MODEL").unwrap_or_else(|| "gpt-4o-mini".to_owned()),
                )
            });
        Ok(input)
    }
}

/// A YAML or JSON file (JSON is YAML) as a JSON value.
fn read_document(dir: &Path, path: &str, index: usize, field: &str) -> Result<Value, Report> {
    let full = dir.join(path);
    let refuse = |what: String| {
        Report::new(
            &codes::RUN_MODES_INPUT,
            format!("egress rules[{index}].{field} names {path}, which {what}."),
        )
        .with_next(format!(
            "Fix rules[{index}].{field} (a path relative to {}) or the file; nothing was created.",
            dir.display()
        ))
    };
    let text = std::fs::read_to_string(&full)
        .map_err(|e| refuse(format!("could not be read ({}: {e})", full.display())))?;
    serde_saphyr::from_str::<Value>(&text).map_err(|e| refuse(format!("is not YAML or JSON: {e}")))
}

#[cfg(test)]
mod tests {
    use af_policy::egress::{Mode, RuleSpec};

    use super::*;

    struct Dir(std::path::PathBuf);

    impl Dir {
        fn new(tag: &str) -> Dir {
            let dir = std::env::temp_dir().join(format!("af-modes-{tag}-{}", std::process::id()));
            std::fs::create_dir_all(dir.join("mocks")).expect("dir");
            Dir(dir)
        }
        fn write(&self, name: &str, text: &str) {
            std::fs::write(self.0.join(name), text).expect("write");
        }
    }

    impl Drop for Dir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    fn rule(host: &str, mode: Mode) -> RuleSpec {
        RuleSpec::new(host, mode)
    }

    #[test]
    fn packs_and_descriptions_are_read_by_the_path_the_rule_writes() {
        let dir = Dir::new("read");
        dir.write(
            "mocks/stripe.yaml",
            "routes:\n  - path: /v1/charges\n    status: 200\n",
        );
        dir.write("petstore.json", r#"{"openapi": "3.0.0", "paths": {}}"#);
        let mut mock = rule("api.stripe.com", Mode::Mock);
        mock.fixtures = Some("mocks/stripe.yaml".to_owned());
        let mut synth = rule("petstore.test", Mode::Synth);
        synth.openapi = Some("./petstore.json".to_owned());
        let egress = EgressSpec {
            rules: vec![mock, synth],
            ..EgressSpec::default()
        };
        let input = ModesInput::load(&egress, &dir.0, |_| None).expect("load");
        assert_eq!(
            input.packs["mocks/stripe.yaml"],
            serde_json::json!({"routes": [{"path": "/v1/charges", "status": 200}]})
        );
        assert_eq!(input.openapi["./petstore.json"]["openapi"], "3.0.0");
        assert!(input.credentials.0.is_empty() && input.missing_credentials.is_empty());
    }

    #[test]
    fn a_missing_or_broken_file_is_refused_naming_the_rule() {
        let dir = Dir::new("broken");
        let mut missing = rule("api.stripe.com", Mode::Mock);
        missing.fixtures = Some("mocks/nope.yaml".to_owned());
        let egress = EgressSpec {
            rules: vec![rule("a.test", Mode::Allow), missing],
            ..EgressSpec::default()
        };
        let err = ModesInput::load(&egress, &dir.0, |_| None).expect_err("missing");
        assert_eq!(err.code.code, "AF-RUN-052");
        assert!(
            err.statement
                .contains("rules[1].fixtures names mocks/nope.yaml"),
            "{err}"
        );
        assert!(err.next.contains("rules[1].fixtures"), "{err}");

        dir.write("bad.yaml", "routes: [unclosed\n");
        let mut bad = rule("petstore.test", Mode::Synth);
        bad.openapi = Some("bad.yaml".to_owned());
        let egress = EgressSpec {
            rules: vec![bad],
            ..EgressSpec::default()
        };
        let err = ModesInput::load(&egress, &dir.0, |_| None).expect_err("unparsable");
        assert_eq!(err.code.code, "AF-RUN-052");
        assert!(err.statement.contains("is not YAML or JSON"), "{err}");
    }

    #[test]
    fn a_synth_model_is_configured_from_the_environment_only_for_synth_rules() {
        let mut spec = EgressSpec::default();
        spec.rules.push(RuleSpec::new("api.shop.test", Mode::Synth));
        let vars = |name: &str| match name {
            "AF_SYNTH_MODEL_URL" => Some("http://model.test/v1".to_owned()),
            "AF_SYNTH_MODEL_KEY" => Some("key-123".to_owned()),
            _ => None,
        };
        let input = ModesInput::load(&spec, Path::new("."), vars).expect("loads");
        let model = input.model.expect("configured");
        assert_eq!(model.base_url, "http://model.test/v1");
        assert_eq!(model.model, "gpt-4o-mini");
        assert!(!format!("{model:?}").contains("key-123"));
        spec.rules[0].mode = Mode::Mock;
        let input = ModesInput::load(&spec, Path::new("."), vars).expect("loads");
        assert_eq!(input.model, None, "no synth rule, no model");
    }

    #[test]
    fn credentials_come_from_the_environment_and_missing_ones_are_listed_once() {
        let dir = Dir::new("creds");
        let mut stripe = rule("api.stripe.com", Mode::Sandbox);
        stripe.credential = Some("STRIPE_TEST_KEY".to_owned());
        let mut twilio = rule("api.twilio.com", Mode::Sandbox);
        twilio.credential = Some("TWILIO_TEST_TOKEN".to_owned());
        let mut twilio_again = rule("*.twilio.com", Mode::Sandbox);
        twilio_again.credential = Some("TWILIO_TEST_TOKEN".to_owned());
        let egress = EgressSpec {
            rules: vec![stripe, twilio, twilio_again],
            ..EgressSpec::default()
        };
        let input = ModesInput::load(&egress, &dir.0, |name| {
            (name == "STRIPE_TEST_KEY").then(|| "sk_test_123".to_owned())
        })
        .expect("load");
        assert_eq!(input.credentials.0["STRIPE_TEST_KEY"], "sk_test_123");
        assert_eq!(input.missing_credentials, ["TWILIO_TEST_TOKEN"]);
        let shown = format!("{input:?}");
        assert!(shown.contains("STRIPE_TEST_KEY") && !shown.contains("sk_test_123"));
    }
}
