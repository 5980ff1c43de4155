//! The DNS Firewall's names, generated from the manifest's egress catalogue rather than kept
//! beside it: a host the sidecar forwards to for real (allow, sandbox) must resolve; a host it
//! answers itself (block, mock, capture, synth) must not, because a name the sidecar answers
//! resolving publicly is a route around the decision the manifest made about it.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::egress::{EgressSpec, HostPattern, Mode, parse_host_port};

/// The catalogue's hosts as DNS Firewall domains, by how specific they are.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct AllowList {
    /// Domains in the order DNS Firewall must consult them (exact names, then wildcards with
    /// the most labels first), each with whether it resolves.
    pub tiers: Vec<Tier>,
    /// IP literals the catalogue names: no query asks for them, so they need no domain.
    pub addresses: Vec<String>,
    /// Hosts that cannot be written as a DNS Firewall domain without widening them: named in
    /// the refusal, never dropped.
    pub unexpressible: Vec<Unexpressible>,
}

/// Domains equally specific: one ALLOW list and one BLOCK list, which never share a domain.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Tier {
    /// How many labels the domains spell out; exact names come before every wildcard.
    pub rank: Rank,
    /// Domains that must resolve (a forwarding rule names them).
    pub allow: Vec<String>,
    /// Domains that must not resolve (only rules answered here name them).
    pub block: Vec<String>,
}

/// The order of a tier: exact names first, then wildcards by labels spelled out, most first,
/// because DNS Firewall stops at the first rule that matches and the catalogue's most
/// specific rule decides.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Rank {
    /// `api.example.com.`
    #[default]
    Exact,
    /// `*.example.com.`, with the labels of its suffix.
    Wildcard(usize),
}

impl Ord for Rank {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        match (self, other) {
            (Rank::Exact, Rank::Exact) => std::cmp::Ordering::Equal,
            (Rank::Exact, Rank::Wildcard(_)) => std::cmp::Ordering::Less,
            (Rank::Wildcard(_), Rank::Exact) => std::cmp::Ordering::Greater,
            (Rank::Wildcard(a), Rank::Wildcard(b)) => b.cmp(a),
        }
    }
}

impl PartialOrd for Rank {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

/// A declared host DNS Firewall cannot hold, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Unexpressible {
    /// The host as the rule writes it.
    pub host: String,
    /// The rule's mode.
    pub mode: Mode,
    /// Why it cannot be a domain.
    pub reason: &'static str,
}

impl AllowList {
    /// The allow list for `egress`. A host with rules of several modes resolves if any of them
    /// forwards, because the sidecar sends some of its requests for real.
    pub fn from_catalogue(egress: &EgressSpec) -> AllowList {
        let mut list = AllowList::default();
        let mut domains: BTreeMap<(Rank, String), bool> = BTreeMap::new();
        if egress.default_mode().forwards() {
            list.unexpressible.push(Unexpressible {
                host: "(egress.default)".to_owned(),
                mode: egress.default_mode(),
                reason: EVERY_NAME,
            });
        }
        for rule in &egress.rules {
            let forwards = rule.mode.forwards();
            let refuse = |reason| Unexpressible {
                host: rule.host.clone(),
                mode: rule.mode,
                reason,
            };
            let Ok(host) = parse_host_port(&rule.host) else {
                list.unexpressible
                    .push(refuse("the host is not one the catalogue reads"));
                continue;
            };
            let (rank, domain) = match host.pattern {
                HostPattern::Exact(name) => (Rank::Exact, format!("{name}.")),
                HostPattern::Suffix(suffix) => (
                    Rank::Wildcard(suffix.split('.').count()),
                    format!("*.{suffix}."),
                ),
                HostPattern::Ip(ip) => {
                    list.addresses.push(ip.to_string());
                    continue;
                }
                // Every name is already the terminal BLOCK's; forwarding every name is not a
                // list DNS Firewall can hold and still block anything.
                HostPattern::Any if !forwards => continue,
                HostPattern::Any => {
                    list.unexpressible.push(refuse(EVERY_NAME));
                    continue;
                }
                HostPattern::Labels { .. } => {
                    list.unexpressible.push(refuse(
                        "a star stands for one label in the middle of the name, and a DNS Firewall domain holds a star only at its front",
                    ));
                    continue;
                }
            };
            *domains.entry((rank, domain)).or_default() |= forwards;
        }
        for ((rank, domain), resolves) in domains {
            if list.tiers.last().is_none_or(|t| t.rank != rank) {
                list.tiers.push(Tier {
                    rank,
                    ..Tier::default()
                });
            }
            if let Some(tier) = list.tiers.last_mut() {
                if resolves {
                    tier.allow.push(domain);
                } else {
                    tier.block.push(domain);
                }
            }
        }
        list
    }

    /// Whether `domain` (with its trailing dot) must resolve.
    pub fn resolves(&self, domain: &str) -> Option<bool> {
        self.tiers.iter().find_map(|t| {
            if t.allow.iter().any(|d| d == domain) {
                Some(true)
            } else if t.block.iter().any(|d| d == domain) {
                Some(false)
            } else {
                None
            }
        })
    }
}

const EVERY_NAME: &str = "every name would resolve, and an ALLOW on every domain blocks nothing";

#[cfg(test)]
mod tests {
    use super::*;
    use crate::egress::RuleSpec;

    fn catalogue(rules: &[(&str, Mode)]) -> EgressSpec {
        EgressSpec {
            rules: rules.iter().map(|(h, m)| RuleSpec::new(*h, *m)).collect(),
            ..EgressSpec::default()
        }
    }

    #[test]
    fn every_mode_decides_whether_its_host_resolves_and_middle_stars_are_named() {
        let egress = catalogue(&[
            ("api.stripe.com", Mode::Allow),
            ("api.sandbox.paypal.com:443", Mode::Sandbox),
            ("tracker.example.net", Mode::Block),
            ("api.github.com", Mode::Mock),
            ("api.sendgrid.com", Mode::Capture),
            ("api.openai.com", Mode::Synth),
            ("*.s3.amazonaws.com", Mode::Allow),
            ("*.example.org", Mode::Mock),
            ("api.*.example.com", Mode::Allow),
            ("203.0.113.7", Mode::Allow),
        ]);
        let list = AllowList::from_catalogue(&egress);
        for (domain, resolves) in [
            ("api.stripe.com.", true),
            ("api.sandbox.paypal.com.", true),
            ("*.s3.amazonaws.com.", true),
            ("tracker.example.net.", false),
            ("api.github.com.", false),
            ("api.sendgrid.com.", false),
            ("api.openai.com.", false),
            ("*.example.org.", false),
        ] {
            assert_eq!(list.resolves(domain), Some(resolves), "{domain}");
        }
        assert_eq!(list.resolves("api.*.example.com."), None);
        assert_eq!(
            list.unexpressible
                .iter()
                .map(|u| u.host.as_str())
                .collect::<Vec<_>>(),
            ["api.*.example.com"]
        );
        assert_eq!(list.addresses, ["203.0.113.7"]);
    }

    #[test]
    fn exact_names_come_before_wildcards_and_longer_suffixes_before_shorter() {
        let egress = catalogue(&[
            ("*.example.com", Mode::Mock),
            ("*.eu.example.com", Mode::Allow),
            ("api.eu.example.com", Mode::Block),
        ]);
        let tiers = AllowList::from_catalogue(&egress).tiers;
        let order: Vec<(&[String], &[String])> = tiers
            .iter()
            .map(|t| (t.allow.as_slice(), t.block.as_slice()))
            .collect();
        assert_eq!(
            order,
            [
                (&[][..], &["api.eu.example.com.".to_owned()][..]),
                (&["*.eu.example.com.".to_owned()][..], &[][..]),
                (&[][..], &["*.example.com.".to_owned()][..]),
            ]
        );
    }

    #[test]
    fn a_host_forwarded_by_any_rule_resolves_and_forwarding_everything_is_named() {
        let mut egress = catalogue(&[("api.example.com", Mode::Mock), ("*", Mode::Block)]);
        egress.rules.push(RuleSpec {
            methods: vec!["GET".into()],
            ..RuleSpec::new("api.example.com", Mode::Allow)
        });
        let list = AllowList::from_catalogue(&egress);
        assert_eq!(list.resolves("api.example.com."), Some(true));
        assert!(list.unexpressible.is_empty());

        let open = EgressSpec {
            default: Some(Mode::Allow),
            ..catalogue(&[("*", Mode::Sandbox)])
        };
        let hosts: Vec<String> = AllowList::from_catalogue(&open)
            .unexpressible
            .into_iter()
            .map(|u| u.host)
            .collect();
        assert_eq!(hosts, ["(egress.default)", "*"]);
    }
}
