//! From what happened to a rule: the egress rules that would decide what the catalogue's
//! default decided, one per host (and port, when not the scheme's own), with the methods and
//! paths seen. Pure: the manifest's catalogue and journal records in, rules out, each checked
//! by the catalogue compiler and against every request it is for. `af net suggest` prints them
//! and `af ui` offers one per request.
//!
//! What a service can put in the journal never makes it fail, and never makes it propose what
//! the address guard refuses: a loopback, link-local (metadata), private or shared address in
//! any spelling, or a name that only means one (`localhost`, the metadata service's), is listed
//! apart as refused by the guard, since a rule naming such an address exactly is what opens the
//! guard. Spellings of one host are one host (`[::ffff:198.51.100.7]` is `198.51.100.7`,
//! `API.example.com.` is `api.example.com`). A host some rule already limits to paths or
//! methods is never given a rule for the host as a whole: its tunnels are decided request by
//! request already, and a host-wide rule would widen the limit.

use std::collections::BTreeMap;
use std::collections::BTreeSet;

use std::net::IpAddr;

use af_policy::egress::address::{self, AddressClass};
use af_policy::egress::{
    Catalogue, Decision, EgressSpec, Mode, Reason, RuleProblem, RuleSpec, Target, normalize_host,
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
    /// What no rule is suggested for, and why, by host.
    pub not_suggested: Vec<NotSuggested>,
}

/// A host the default decided that gets no suggested rule.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct NotSuggested {
    /// The host (and port, when not the scheme's own), as a rule would name it.
    pub host: String,
    /// Why.
    pub why: NoRule,
    /// The journal positions of its requests.
    pub requests: Vec<u64>,
}

/// Why a request gets no rule.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, thiserror::Error)]
#[serde(rename_all = "snake_case", tag = "kind", content = "class")]
pub enum NoRule {
    /// The record names no host.
    #[error("the record names no host")]
    NoHost,
    /// The host is not one a rule can name.
    #[error("the host is not one a rule can name")]
    BadHost,
    /// A rule for it would not decide all its requests: another rule outranks it for some.
    #[error("a rule for it would not decide all its requests: another rule outranks it")]
    Overlaps,
    /// The address guard refuses the host's address, whatever the rules say: a rule naming it
    /// would be what opens the guard.
    #[error("refused by the guard: a {} address, which no suggested rule opens", .0.as_str())]
    RefusedByGuard(#[serde(serialize_with = "class_name")] AddressClass),
}

fn class_name<S: serde::Serializer>(class: &AddressClass, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(class.as_str())
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
    let mut refused: BTreeMap<(String, Option<u16>), (NoRule, Vec<u64>)> = BTreeMap::new();
    for record in records {
        let Some(d) = record.entry.as_decision() else {
            continue;
        };
        if !by_default(&catalogue, d, mode) {
            continue;
        }
        match host_of(d) {
            Ok(host) => hosts
                .entry((host, own_port(d)))
                .or_default()
                .add(record.seq, d),
            Err(why) => {
                refused
                    .entry((d.host.clone(), own_port(d)))
                    .or_insert((why, Vec::new()))
                    .1
                    .push(record.seq);
            }
        }
    }
    let mut suggestion = Suggestion {
        rules: Vec::new(),
        requests: Vec::new(),
        not_suggested: refused
            .into_iter()
            .map(|((host, port), (why, requests))| NotSuggested {
                host: named(&host, port),
                why,
                requests,
            })
            .collect(),
    };
    let mut merged = spec.clone();
    for ((host, port), seen) in &hosts {
        let mut rule = seen.rule(host, *port, mode);
        let n = seen.seqs.len();
        rule.note = Some(format!(
            "af net suggest: {n} request{} the default decided",
            if n == 1 { "" } else { "s" }
        ));
        match decides(&merged, &rule, seen, mode) {
            Ok(()) => {
                merged.rules.push(rule.clone());
                suggestion.rules.push(rule);
                suggestion.requests.push(seen.seqs.clone());
            }
            Err(why) => suggestion.not_suggested.push(NotSuggested {
                host: rule.host,
                why,
                requests: seen.seqs.clone(),
            }),
        }
    }
    Ok(suggestion)
}

/// The host a rule for `d` names: its one spelling (an address canonical, a name lowercased
/// without its final dot), unless no rule can name it or the address guard refuses it.
fn host_of(d: &DecisionRecord) -> Result<String, NoRule> {
    if d.host.is_empty() {
        return Err(NoRule::NoHost);
    }
    if d.host.contains('*') {
        return Err(NoRule::BadHost);
    }
    // Normalised first, as the catalogue reads a rule's host: `169.254.169.254.` and
    // full-width digits are the address itself, and must be judged as such.
    let host = match normalize_host(&d.host) {
        Ok(host) => host.into_owned(),
        Err(_) => d.host.trim_end_matches('.').to_owned(),
    };
    let literal = host.trim_start_matches('[').trim_end_matches(']');
    if let Ok(ip) = literal.parse::<IpAddr>() {
        let ip = ip.to_canonical();
        address::classify(ip).map_err(NoRule::RefusedByGuard)?;
        return Ok(ip.to_string());
    }
    normalize_host(&d.host).map_err(|_| NoRule::BadHost)?;
    if let Some(class) = address::internal_name(&host) {
        return Err(NoRule::RefusedByGuard(class));
    }
    Ok(host)
}

/// `host` with `port` as a rule writes it (an IPv6 address bracketed).
fn named(host: &str, port: Option<u16>) -> String {
    match (port, host.contains(':')) {
        (Some(port), true) => format!("[{host}]:{port}"),
        (Some(port), false) => format!("{host}:{port}"),
        (None, _) => host.to_owned(),
    }
}

/// The rule deciding exactly `d`'s request with `mode`, whatever decided it before: its host
/// (with the port when not the scheme's own), and its method and path when it was a request
/// rather than a tunnel (`af ui`'s per-request snippet). None for a record that names no host,
/// or a host the address guard refuses.
pub fn rule_for(d: &DecisionRecord, mode: Mode) -> Result<RuleSpec, NoRule> {
    let host = host_of(d)?;
    let mut seen = Seen::default();
    seen.add(0, d);
    Ok(seen.rule(&host, own_port(d), mode))
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
        let mut rule = RuleSpec::new(named(host, port), mode);
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

/// Whether `rule`, added to the rules of `merged` (the manifest's and those suggested so far),
/// compiles and decides every request of `seen` with `mode`.
fn decides(
    merged: &EgressSpec,
    rule: &RuleSpec,
    seen: &Seen<'_>,
    mode: Mode,
) -> Result<(), NoRule> {
    let mut with = merged.clone();
    with.rules.push(rule.clone());
    let index = with.rules.len() - 1;
    let catalogue = compile(&with).map_err(|_| NoRule::BadHost)?;
    let all = seen.decisions.iter().all(|d| {
        let decision = decide(&catalogue, d);
        decision.mode == mode && decision.rule.map(|r| r.index()) == Some(index)
    });
    if all { Ok(()) } else { Err(NoRule::Overlaps) }
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
            record(3, "CONNECT", "2001:db8::7", 8443, ""),
        ];
        let spec = manifest(vec![RuleSpec::new("*.x.test", Mode::Block)]);
        // The wildcard block rule decided records 1 and 2 when they were made; only the
        // tunnel went to the default.
        let s = suggest(&spec, &records, Mode::Allow).expect("suggests");
        assert_eq!(s.requests, [vec![3]]);
        assert_eq!(s.rules[0].host, "[2001:db8::7]:8443");
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
    fn what_the_address_guard_refuses_is_listed_apart_in_every_spelling() {
        let refused = [
            "169.254.169.254",
            "127.0.0.1",
            "::1",
            "[::1]",
            "fe80::1",
            "10.0.0.1",
            "100.64.0.1",
            "::ffff:127.0.0.1",
            "[::ffff:169.254.169.254]",
            "localhost",
            "LOCALHOST.",
            "api.localhost",
            "metadata.google.internal",
            "169.254.169.254.",
            "127.0.0.1.",
            "[::1].",
            "\u{ff11}\u{ff12}\u{ff17}.\u{ff10}.\u{ff10}.\u{ff11}",
        ];
        let mut records: Vec<Record> = refused
            .iter()
            .zip(1..)
            .map(|(host, seq)| record(seq, "GET", host, 80, "/"))
            .collect();
        records.push(record(99, "CONNECT", "127.0.0.1", 2375, ""));
        // The control in the same journal: a public address is suggested.
        records.push(record(100, "GET", "198.51.100.7", 80, "/v1"));
        let s = suggest(&manifest(Vec::new()), &records, Mode::Allow).expect("suggests");
        assert_eq!(
            s.rules.iter().map(|r| r.host.as_str()).collect::<Vec<_>>(),
            ["198.51.100.7"]
        );
        assert_eq!(s.requests, [vec![100]]);
        let apart: BTreeSet<u64> = s
            .not_suggested
            .iter()
            .inspect(|n| assert!(matches!(n.why, NoRule::RefusedByGuard(_)), "{n:?}"))
            .flat_map(|n| n.requests.iter().copied())
            .collect();
        assert_eq!(apart, (1..=17).chain([99]).collect(), "{s:?}");
        assert!(
            s.not_suggested
                .iter()
                .any(|n| n.host == "127.0.0.1:2375" && n.why.to_string().contains("loopback"))
        );
    }

    #[test]
    fn two_spellings_of_one_host_are_one_rule() {
        let records = [
            record(1, "GET", "198.51.100.7", 80, "/a"),
            record(2, "GET", "[::ffff:198.51.100.7]", 80, "/b"),
            record(3, "GET", "::ffff:c633:6407", 80, "/c"),
            record(4, "GET", "API.X.test.", 80, "/d"),
            record(5, "GET", "api.x.test", 80, "/e"),
        ];
        let s = suggest(&manifest(Vec::new()), &records, Mode::Allow).expect("suggests");
        let hosts: Vec<&str> = s.rules.iter().map(|r| r.host.as_str()).collect();
        assert_eq!(hosts, ["198.51.100.7", "api.x.test"]);
        assert_eq!(s.requests, [vec![1, 2, 3], vec![4, 5]]);
    }

    #[test]
    fn a_host_a_rule_limits_to_paths_is_never_given_a_rule_for_all_of_it() {
        let mut ok = RuleSpec::new("allowed.test", Mode::Allow);
        ok.paths = vec!["/ok".to_owned()];
        let spec = manifest(vec![ok]);
        let records = [
            // The tunnel the path rule opened, journaled before the rule decided inside it.
            record(1, "CONNECT", "allowed.test", 443, ""),
            record(2, "GET", "allowed.test", 443, "/other"),
        ];
        let s = suggest(&spec, &records, Mode::Allow).expect("suggests");
        assert_eq!(s.requests, [vec![2]], "{s:?}");
        assert_eq!(s.rules[0].paths, ["/other"], "limited as the requests were");
        let mut merged = spec.clone();
        merged.rules.extend(s.rules.iter().cloned());
        let catalogue = Catalogue::compile(&merged).expect("compiles");
        let d = |path| {
            catalogue.decide(&Target {
                method: "GET",
                host: "allowed.test",
                port: 443,
                path,
            })
        };
        assert_eq!(d("/elsewhere").mode, Mode::Block, "nothing widened");
        assert_eq!(d("/ok").mode, Mode::Allow);
        assert_eq!(d("/other").mode, Mode::Allow);
    }

    proptest::proptest! {
        /// Whatever a service puts in the journal, suggest answers; it proposes nothing the
        /// guard refuses, and every rule it proposes decides the requests it is for.
        #[test]
        fn any_journal_gets_an_answer_and_never_a_rule_the_guard_refuses(
            entries in proptest::collection::vec(
                (
                    proptest::sample::select(vec![
                        "CONNECT", "GET", "POST", "get", "",
                    ]),
                    proptest::sample::select(vec![
                        "api.x.test", "API.x.test.", "198.51.100.7", "::ffff:198.51.100.7",
                        "[::ffff:198.51.100.7]", "2001:db8::7", "[2001:db8::7]", "127.0.0.1",
                        "[::ffff:127.0.0.1]", "::1", "fe80::1", "169.254.169.254", "10.0.0.1",
                        "100.64.0.1", "localhost", "metadata.google.internal", "", "bad host",
                        "a..b", "xn--", "*.x.test", "allowed.test", "169.254.169.254.",
                        "127.0.0.1.", "[::1].", "\u{ff11}\u{ff12}\u{ff17}.\u{ff10}.\u{ff10}.\u{ff11}",
                        "METADATA.google.internal.",
                    ]),
                    proptest::sample::select(vec![0u16, 22, 80, 443, 2375, 8443, 65535]),
                    proptest::sample::select(vec![
                        "", "/", "/ok", "/ok/1", "/v1/a?b=c", "/%2e%2e/x", "//", "/a b",
                    ]),
                ),
                0..24,
            ),
            mode in proptest::sample::select(vec![Mode::Allow, Mode::Mock, Mode::Capture]),
        ) {
            let records: Vec<Record> = entries
                .iter()
                .zip(1..)
                .map(|(&(method, host, port, path), seq)| record(seq, method, host, port, path))
                .collect();
            let mut ok = RuleSpec::new("allowed.test", Mode::Allow);
            ok.paths = vec!["/ok".to_owned()];
            let spec = manifest(vec![ok]);
            let s = suggest(&spec, &records, mode).expect("every journal gets an answer");
            for rule in &s.rules {
                let host = rule.host.rsplit_once(':').filter(|(h, p)| {
                    !h.ends_with(':') && p.parse::<u16>().is_ok() && !rule.host.ends_with(']')
                        || h.ends_with(']')
                });
                let port = host.and_then(|(_, p)| p.parse::<u16>().ok());
                let host = host.map_or(rule.host.as_str(), |(h, _)| h);
                let literal = host.trim_start_matches('[').trim_end_matches(']');
                if let Ok(ip) = literal.parse::<IpAddr>() {
                    proptest::prop_assert!(address::classify(ip.to_canonical()).is_ok(), "{rule:?}");
                }
                proptest::prop_assert!(address::internal_name(host).is_none(), "{rule:?}");
                // The path-limited rule covers the web's ports: a rule for another port of
                // the host does not widen it.
                let on_its_ports = port.is_none_or(|p| af_policy::egress::WEB_PORTS.contains(&p));
                proptest::prop_assert!(
                    host != "allowed.test"
                        || !on_its_ports
                        || !rule.paths.is_empty()
                        || !rule.methods.is_empty(),
                    "the path-limited host widened: {rule:?}"
                );
            }
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
