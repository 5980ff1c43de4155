//! TEMPORARY stand-in for `af_policy::egress::{Catalogue, Decision, Target, RuleId}` until the
//! lead's catalogue lands on main. Same signatures as the contract; matching is deliberately
//! simple (exact host, `*`, `*.suffix`, IP literal, optional `:port`). Delete this file and
//! re-export from `af_policy::egress` once merged.

use std::net::IpAddr;

pub use af_policy::egress::{EgressSpec, Mode, RuleSpec};

/// Index of a rule in the catalogue.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RuleId(pub u32);

/// What to decide.
#[derive(Debug, Clone, Copy)]
pub struct Target<'a> {
    pub method: &'a str,
    pub host: &'a str,
    pub port: u16,
    pub path: &'a str,
}

/// A verdict.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Decision {
    pub mode: Mode,
    pub rule: Option<RuleId>,
    pub open_tls: bool,
}

/// A problem with one rule.
#[derive(Debug, Clone)]
pub struct RuleProblem {
    pub index: usize,
    pub message: String,
}

impl std::fmt::Display for RuleProblem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "rules[{}]: {}", self.index, self.message)
    }
}

#[derive(Debug)]
struct Rule {
    host: String,
    port: Option<u16>,
    label: String,
}

/// The compiled catalogue.
#[derive(Debug)]
pub struct Catalogue {
    spec: EgressSpec,
    rules: Vec<Rule>,
}

impl Catalogue {
    pub fn compile(spec: &EgressSpec) -> Result<Catalogue, Vec<RuleProblem>> {
        let mut rules = Vec::new();
        let mut problems = Vec::new();
        for (index, r) in spec.rules.iter().enumerate() {
            let raw = r.host.trim().to_ascii_lowercase();
            if raw.is_empty() {
                problems.push(RuleProblem { index, message: "host is empty".into() });
                continue;
            }
            let (host, port) = match raw.rsplit_once(':') {
                Some((h, p)) if !h.contains(':') || h.ends_with(']') => match p.parse::<u16>() {
                    Ok(p) => (h.trim_matches(['[', ']']).to_owned(), Some(p)),
                    Err(_) => {
                        problems.push(RuleProblem { index, message: format!("bad port {p:?}") });
                        continue;
                    }
                },
                _ => (raw.trim_matches(['[', ']']).to_owned(), None),
            };
            let label = format!("rules[{index}] {}", r.host);
            rules.push(Rule { host: host.trim_end_matches('.').to_owned(), port, label });
        }
        if problems.is_empty() {
            Ok(Catalogue { spec: spec.clone(), rules })
        } else {
            Err(problems)
        }
    }

    fn matches(rule: &Rule, host: &str, port: u16) -> Option<u32> {
        if rule.port.is_some_and(|p| p != port) {
            return None;
        }
        let weight = if rule.port.is_some() { 1 } else { 0 };
        if rule.host == "*" {
            return Some(weight);
        }
        if let Some(suffix) = rule.host.strip_prefix("*.") {
            let ok = host.len() > suffix.len() + 1
                && host.ends_with(suffix)
                && host.as_bytes()[host.len() - suffix.len() - 1] == b'.';
            return ok.then_some(100 + suffix.len() as u32 + weight);
        }
        rule.host.eq_ignore_ascii_case(host).then_some(10_000 + weight)
    }

    pub fn decide_host(&self, host: &str, port: u16) -> Decision {
        let host = host.trim_end_matches('.');
        let mut best: Option<(u32, usize)> = None;
        for (i, r) in self.rules.iter().enumerate() {
            if let Some(w) = Self::matches(r, host, port)
                && best.is_none_or(|(bw, _)| w > bw)
            {
                best = Some((w, i));
            }
        }
        match best {
            Some((_, i)) => {
                let spec = &self.spec.rules[i];
                Decision {
                    mode: spec.mode,
                    rule: Some(RuleId(i as u32)),
                    open_tls: spec.mode.needs_interception()
                        || !spec.paths.is_empty()
                        || !spec.methods.is_empty(),
                }
            }
            None => Decision {
                mode: self.spec.default_mode(),
                rule: None,
                open_tls: self.spec.default_mode().needs_interception(),
            },
        }
    }

    pub fn decide(&self, target: &Target<'_>) -> Decision {
        self.decide_host(target.host, target.port)
    }

    pub fn rule_label(&self, rule: Option<RuleId>) -> &str {
        match rule {
            Some(RuleId(i)) => self.rules.get(i as usize).map_or("default", |r| &r.label),
            None => "default",
        }
    }

    pub fn rule(&self, id: RuleId) -> &RuleSpec {
        &self.spec.rules[id.0 as usize]
    }

    pub fn allow_ipv6(&self) -> bool {
        self.spec.allow_ipv6
    }

    pub fn names_ip(&self, ip: IpAddr) -> bool {
        self.rules.iter().enumerate().any(|(i, r)| {
            self.spec.rules[i].mode.forwards() && r.host.parse::<IpAddr>().is_ok_and(|x| x == ip)
        })
    }
}
