//! From what happened to a rule: the egress rules that would decide what the catalogue's
//! default decided, one per host (and port, when not the scheme's own), with the methods and
//! paths seen. Pure: the manifest's catalogue and journal records in, rules out, each checked
//! by the catalogue compiler and against every request it is for. `af net suggest` prints them
//! and `af ui` offers one per request.

use std::collections::BTreeMap;
use std::collections::BTreeSet;

use af_policy::egress::{
    Catalogue, Decision, EgressSpec, Mode, Reason, RuleProblem, RuleSpec, Target,
};
use af_sidecar_api::journal::{DecisionRecord, Record};
use serde::Serialize;

/// At most this many paths on a suggested rule; a host seen on more gets a rule for all its
/// paths (a list that long is no longer a limit a person reads).
pub const MAX_PATHS: usize = 16;

/// Rules for the requests the default decided, and what they were made from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Suggestion {
    /// The rules, by host, ready to add under `egress.rules`.
    pub rules: Vec<RuleSpec>,
    /// The journal positions of the requests the rules are for, per rule.
    pub requests: Vec<Vec<u64>>,
}

impl Suggestion {
    /// The rules as YAML, the sequence to paste under `egress.rules:` in `af.yaml`.
    pub fn to_yaml(&self) -> Result<String, SuggestError> {
        serde_saphyr::to_string(&self.rules).map_err(|e| SuggestError::Yaml(e.to_string()))
    }
}

/// Why no suggestion could be made.
#[derive(Debug, thiserror::Error)]
pub enum SuggestError {
    /// The manifest's catalogue itself does not compile.
    #[error("the manifest's egress catalogue does not compile: rules[{}].{}: {}", .0.rule, .0.field, .0.message)]
    Catalogue(RuleProblem),
    /// A suggested rule was refused by the compiler (a bug: the rules are made from what the
    /// catalogue already decided).
    #[error("a suggested rule does not compile: {0}")]
    Rule(String),
    /// A request the rules are for is still decided by something else.
    #[error("the suggested rules do not decide request {0}")]
    Uncovered(u64),
    /// The rules could not be written as YAML.
    #[error("the suggested rules could not be written as YAML: {0}")]
    Yaml(String),
}

/// Rules deciding with `mode` every decision in `records` that `spec`'s catalogue gives to its
/// default (when the default is not already `mode`).
pub fn suggest(
    spec: &EgressSpec,
    records: &[Record],
    mode: Mode,
) -> Result<Suggestion, SuggestError> {
    let catalogue = compile(spec).map_err(SuggestError::Catalogue)?;
    let mut hosts: BTreeMap<(String, Option<u16>), Seen<'_>> = BTreeMap::new();
    for record in records {
        let Some(d) = record.entry.as_decision() else {
            continue;
        };
        if !by_default(&catalogue, d, mode) {
            continue;
        }
        hosts
            .entry((d.host.clone(), own_port(d)))
            .or_default()
            .add(record.seq, d);
    }
    let rules: Vec<RuleSpec> = hosts
        .iter()
        .map(|((host, port), seen)| {
            let mut rule = seen.rule(host, *port, mode);
            let n = seen.seqs.len();
            rule.note = Some(format!(
                "af net suggest: {n} request{} the default decided",
                if n == 1 { "" } else { "s" }
            ));
            rule
        })
        .collect();
    check(spec, &rules, hosts.values(), mode)?;
    Ok(Suggestion {
        rules,
        requests: hosts.into_values().map(|seen| seen.seqs).collect(),
    })
}

/// The rule deciding exactly `d`'s request with `mode`, whatever decided it before: its host
/// (with the port when not the scheme's own), and its method and path when it was a request
/// rather than a tunnel. `None` when the record names no host (`af ui`'s per-request snippet).
pub fn rule_for(d: &DecisionRecord, mode: Mode) -> Option<RuleSpec> {
    if d.host.is_empty() {
        return None;
    }
    let mut seen = Seen::default();
    seen.add(0, d);
    Some(seen.rule(&d.host, own_port(d), mode))
}

/// `d`'s port when a rule must name it: not 80 or 443, the ports the schemes imply.
fn own_port(d: &DecisionRecord) -> Option<u16> {
    (!matches!(d.port, 80 | 443)).then_some(d.port)
}

fn compile(spec: &EgressSpec) -> Result<Catalogue, RuleProblem> {
    Catalogue::compile(spec).map_err(|mut problems| problems.swap_remove(0))
}

/// Whether the catalogue, as the manifest has it now, gives `d` to its default, and the
/// default is not already `mode`. Decisions the sidecar made for other reasons (a connection
/// limit, a head it could not read, a refused address) are not the catalogue's to change.
fn by_default(catalogue: &Catalogue, d: &DecisionRecord, mode: Mode) -> bool {
    d.reason == Reason::Default.as_str()
        && !d.host.is_empty()
        && catalogue.default_mode() != mode
        && decide(catalogue, d).reason == Reason::Default
}

/// The catalogue's decision on `d`: a tunnel or an SNI on its host, a request on all of it.
fn decide(catalogue: &Catalogue, d: &DecisionRecord) -> Decision {
    if is_connection(d) {
        catalogue.decide_host(&d.host, d.port)
    } else {
        catalogue.decide(&Target {
            method: &d.method,
            host: &d.host,
            port: d.port,
            path: &d.path,
        })
    }
}

/// A tunnel (CONNECT) or a TLS connection decided on its SNI: no request was seen inside.
fn is_connection(d: &DecisionRecord) -> bool {
    d.method.is_empty() || d.method.eq_ignore_ascii_case("CONNECT")
}

/// What one host was seen doing.
#[derive(Debug, Default)]
struct Seen<'a> {
    seqs: Vec<u64>,
    decisions: Vec<&'a DecisionRecord>,
    methods: BTreeSet<String>,
    paths: BTreeSet<String>,
    /// Some request was a connection, whose requests a path or method limit would open.
    connections: bool,
}

impl<'a> Seen<'a> {
    fn add(&mut self, seq: u64, d: &'a DecisionRecord) {
        self.seqs.push(seq);
        self.decisions.push(d);
        if is_connection(d) {
            self.connections = true;
            return;
        }
        self.methods.insert(d.method.to_ascii_uppercase());
        let path = d.path.split('?').next().unwrap_or("/");
        self.paths
            .insert(if path.is_empty() { "/" } else { path }.to_owned());
    }

    /// The rule: the methods and paths seen, unless a connection was seen (limits would make
    /// the sidecar open TLS to a host its services tunnel to) or the paths are too many.
    fn rule(&self, host: &str, port: Option<u16>, mode: Mode) -> RuleSpec {
        let host = match (port, host.contains(':')) {
            (Some(port), true) => format!("[{host}]:{port}"),
            (Some(port), false) => format!("{host}:{port}"),
            (None, _) => host.to_owned(),
        };
        let mut rule = RuleSpec::new(host, mode);
        if self.connections {
            return rule;
        }
        let paths = outermost(&self.paths);
        if paths.len() <= MAX_PATHS && paths.iter().all(|p| p != "/") {
            rule.paths = paths;
        }
        rule.methods = self.methods.iter().cloned().collect();
        rule
    }
}

/// The paths without those another one already covers (a prefix on a segment boundary).
fn outermost(paths: &BTreeSet<String>) -> Vec<String> {
    let mut kept: Vec<String> = Vec::new();
    // Sorted, a covering path comes before every path it covers.
    for path in paths {
        let covered = kept.iter().any(|k| {
            path.strip_prefix(k.as_str())
                .is_some_and(|rest| rest.is_empty() || rest.starts_with('/') || k.ends_with('/'))
        });
        if !covered {
            kept.push(path.clone());
        }
    }
    kept
}

/// The manifest's rules and the suggested ones compile together, and the new catalogue gives
/// every request a suggested rule is for to that rule, with `mode`.
fn check<'s, 'a: 's>(
    spec: &EgressSpec,
    rules: &[RuleSpec],
    seen: impl Iterator<Item = &'s Seen<'a>>,
    mode: Mode,
) -> Result<(), SuggestError> {
    let mut merged = spec.clone();
    let first = merged.rules.len();
    merged.rules.extend(rules.iter().cloned());
    let catalogue = compile(&merged).map_err(|p| {
        let rule = merged.rules.get(p.rule).map_or("", |r| r.host.as_str());
        SuggestError::Rule(format!("{rule}: {}: {}", p.field, p.message))
    })?;
    for (index, seen) in seen.enumerate() {
        for (seq, d) in seen.seqs.iter().zip(&seen.decisions) {
            let decision = decide(&catalogue, d);
            let rule = decision.rule.map(|r| r.index());
            if decision.mode != mode || rule != Some(first + index) {
                return Err(SuggestError::Uncovered(*seq));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use af_sidecar_api::journal::Entry;

    use super::*;

    fn record(seq: u64, method: &str, host: &str, port: u16, path: &str) -> Record {
        Record {
            seq,
            at: "2026-11-29T14:03:01.000Z".to_owned(),
            env: "e".to_owned(),
            entry: Entry::Decision(DecisionRecord {
                via: if method == "CONNECT" {
                    "proxy"
                } else {
                    "transparent"
                }
                .into(),
                method: method.to_owned().into(),
                host: host.to_owned(),
                port,
                path: path.to_owned(),
                mode: Some(Mode::Block),
                reason: "default".into(),
                status: Some(403),
                code: Some("AF-NET-010".into()),
                ..DecisionRecord::default()
            }),
        }
    }

    fn manifest(rules: Vec<RuleSpec>) -> EgressSpec {
        EgressSpec {
            rules,
            ..EgressSpec::default()
        }
    }

    #[test]
    fn refused_requests_are_grouped_by_host_with_their_methods_and_outermost_paths() {
        let records = [
            record(1, "GET", "api.x.test", 80, "/v1/users/7?full=1"),
            record(2, "POST", "api.x.test", 80, "/v1/orders"),
            record(3, "GET", "api.x.test", 80, "/v1/users/7/avatar"),
            record(4, "CONNECT", "cdn.y.test", 443, ""),
            record(5, "GET", "cdn.y.test", 443, "/a.js"),
            record(6, "GET", "api.x.test", 8080, "/"),
        ];
        let s = suggest(&manifest(Vec::new()), &records, Mode::Allow).expect("suggests");
        let hosts: Vec<&str> = s.rules.iter().map(|r| r.host.as_str()).collect();
        assert_eq!(hosts, ["api.x.test", "api.x.test:8080", "cdn.y.test"]);
        assert_eq!(s.requests, [vec![1, 2, 3], vec![6], vec![4, 5]]);
        let api = &s.rules[0];
        assert_eq!(api.mode, Mode::Allow);
        assert_eq!(api.methods, ["GET", "POST"]);
        assert_eq!(api.paths, ["/v1/orders", "/v1/users/7"]);
        assert!(s.rules[1].paths.is_empty(), "the root path limits nothing");
        assert_eq!(s.rules[1].methods, ["GET"]);
        // A host its services tunnel to gets a rule for the host alone.
        assert!(s.rules[2].paths.is_empty() && s.rules[2].methods.is_empty());
    }

    #[test]
    fn what_a_rule_or_the_wanted_default_decides_now_is_not_suggested() {
        let records = [
            record(1, "CONNECT", "api.x.test", 443, ""),
            record(2, "CONNECT", "new.x.test", 443, ""),
        ];
        // api.x.test got a rule since those requests were refused.
        let spec = manifest(vec![RuleSpec::new("api.x.test", Mode::Mock)]);
        let s = suggest(&spec, &records, Mode::Capture).expect("suggests");
        assert_eq!(s.requests, [vec![2]]);
        assert_eq!(s.rules[0].host, "new.x.test");
        assert_eq!(s.rules[0].mode, Mode::Capture);
        let allow_all = EgressSpec {
            default: Some(Mode::Allow),
            ..EgressSpec::default()
        };
        let none = suggest(&allow_all, &records, Mode::Allow).expect("suggests");
        assert!(none.rules.is_empty(), "{none:?}");
    }

    #[test]
    fn suggested_rules_compile_and_decide_every_request_they_are_for() {
        let records = [
            record(1, "GET", "api.x.test", 80, "/v1/a"),
            record(2, "DELETE", "api.x.test", 80, "/v2/b/c"),
            record(3, "CONNECT", "::1", 8443, ""),
        ];
        let spec = manifest(vec![RuleSpec::new("*.x.test", Mode::Block)]);
        // The wildcard block rule decided records 1 and 2 when they were made; only the
        // tunnel went to the default.
        let s = suggest(&spec, &records, Mode::Allow).expect("suggests");
        assert_eq!(s.requests, [vec![3]]);
        assert_eq!(s.rules[0].host, "[::1]:8443");
        let open = suggest(&manifest(Vec::new()), &records, Mode::Mock).expect("suggests");
        let mut merged = manifest(Vec::new());
        merged.rules.extend(open.rules.iter().cloned());
        let catalogue = Catalogue::compile(&merged).expect("the suggestion compiles");
        for record in &records {
            let d = record.entry.as_decision().expect("decision");
            let decision = decide(&catalogue, d);
            assert_eq!(decision.mode, Mode::Mock, "{d:?}");
            assert_eq!(decision.reason, Reason::Rule, "{d:?}");
        }
        // The control: without the suggestion every one of them goes to the default.
        let before = Catalogue::compile(&manifest(Vec::new())).expect("compiles");
        for record in &records {
            let d = record.entry.as_decision().expect("decision");
            assert_eq!(decide(&before, d).reason, Reason::Default);
        }
    }

    #[test]
    fn the_yaml_reads_back_as_the_same_rules_whatever_the_note_holds() {
        let records = [record(1, "GET", "api.x.test", 80, "/a:%20b")];
        let s = suggest(&manifest(Vec::new()), &records, Mode::Allow).expect("suggests");
        let yaml = s.to_yaml().expect("yaml");
        let read: Vec<RuleSpec> = serde_saphyr::from_str(&yaml).expect("reads back");
        assert_eq!(read, s.rules, "{yaml}");
        // The page's one-request rule is the same rule, without the note.
        let d = records[0].entry.as_decision().expect("a decision");
        let mut one = rule_for(d, Mode::Allow).expect("a host");
        one.note.clone_from(&s.rules[0].note);
        assert_eq!(one, s.rules[0]);
    }
}
