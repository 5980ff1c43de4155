//! A Route 53 Resolver DNS Firewall rule group and the predicate over it: does it block every
//! domain it does not name, and can it not be opened by a firewall that stops answering?
//!
//! The document is the JSON AWS returns, joined into one file so one reader can judge it:
//!
//! ```json
//! {
//!   "FirewallRules": [
//!     {"Name": "forwarded", "Priority": 100, "Action": "ALLOW", "FirewallDomainListId": "rslvr-fdl-1"},
//!     {"Name": "every-domain", "Priority": 10000, "Action": "BLOCK", "BlockResponse": "NXDOMAIN",
//!      "FirewallDomainListId": "rslvr-fdl-2"}
//!   ],
//!   "DomainLists": {"rslvr-fdl-1": ["api.stripe.com."], "rslvr-fdl-2": ["*"]},
//!   "FirewallFailOpen": "DISABLED"
//! }
//! ```
//!
//! `FirewallRules` is `ListFirewallRules`' answer (other fields AWS returns are ignored),
//! `DomainLists` maps each list id to what `ListFirewallDomains` returns for it, and
//! `FirewallFailOpen` is the VPC's `GetFirewallConfig` value.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::error::{Report, codes};

/// The domain that matches every query name.
pub const EVERY_DOMAIN: &str = "*";

/// A rule group with its domain lists and the VPC's fail-open setting.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RuleGroup {
    /// The rules, in any order; DNS Firewall reads them by priority, lowest number first.
    #[serde(rename = "FirewallRules")]
    pub rules: Vec<Rule>,
    /// Each domain list's id and its domains.
    #[serde(rename = "DomainLists")]
    pub domain_lists: BTreeMap<String, Vec<String>>,
    /// Whether a query goes through when DNS Firewall does not answer.
    #[serde(rename = "FirewallFailOpen")]
    pub fail_open: FailOpen,
}

/// One rule of the group, as `ListFirewallRules` returns it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Rule {
    /// The rule's name.
    #[serde(rename = "Name")]
    pub name: String,
    /// Its priority: the lowest number is consulted first.
    #[serde(rename = "Priority")]
    pub priority: u32,
    /// What a matching query gets.
    #[serde(rename = "Action")]
    pub action: Action,
    /// The domain list the rule matches.
    #[serde(rename = "FirewallDomainListId")]
    pub domain_list: String,
    /// What a blocked query is answered with.
    #[serde(
        rename = "BlockResponse",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub block_response: Option<String>,
}

/// A rule's action.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum Action {
    /// The query is answered and no later rule is consulted.
    Allow,
    /// The query is refused and no later rule is consulted.
    Block,
    /// The query is logged and the next rule is consulted.
    Alert,
}

/// The VPC's `FirewallFailOpen`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum FailOpen {
    /// A query is refused when DNS Firewall does not answer.
    Disabled,
    /// A query goes through when DNS Firewall does not answer.
    Enabled,
}

impl RuleGroup {
    /// Read the documented JSON; AF-SCH-013 at the line and column serde stopped at, or naming
    /// a rule whose domain list is not among `DomainLists`.
    pub fn from_json(text: &str) -> Result<RuleGroup, Report> {
        let group: RuleGroup = serde_json::from_str(text).map_err(|e| {
            Report::new(
                &codes::SCH_RULE_GROUP_UNREADABLE,
                format!(
                    "The rule group is not the documented JSON at line {}, column {}: {e}.",
                    e.line(),
                    e.column()
                ),
            )
        })?;
        if let Some(rule) = group
            .rules
            .iter()
            .find(|r| !group.domain_lists.contains_key(&r.domain_list))
        {
            return Err(Report::new(
                &codes::SCH_RULE_GROUP_UNREADABLE,
                format!(
                    "The rule {} names the domain list {}, which DomainLists does not hold.",
                    rule.name, rule.domain_list
                ),
            ));
        }
        Ok(group)
    }

    fn matches_every_domain(&self, rule: &Rule) -> bool {
        self.domain_lists
            .get(&rule.domain_list)
            .is_some_and(|domains| domains.iter().any(|d| d == EVERY_DOMAIN))
    }
}

/// Every reason `group` does not close the DNS channel, each coded; empty when it does: the
/// rule with the highest priority number, alone at it, is a BLOCK on every domain; no ALLOW on
/// every domain comes before it; every domain holds a star only at its front; fail-open is
/// disabled.
pub fn check(group: &RuleGroup) -> Vec<Report> {
    let mut refusals = Vec::new();
    if group.fail_open == FailOpen::Enabled {
        refusals.push(Report::new(
            &codes::SCH_RULE_GROUP_FAIL_OPEN,
            "FirewallFailOpen is ENABLED, so every query goes through while DNS Firewall does not answer.",
        ));
    }
    for (list, domains) in &group.domain_lists {
        for domain in domains.iter().filter(|d| !is_firewall_domain(d)) {
            refusals.push(Report::new(
                &codes::SCH_RULE_GROUP_STAR,
                format!(
                    "The domain {domain} in the list {list} has a star that is not at its front."
                ),
            ));
        }
    }
    let Some(last) = group.rules.iter().map(|r| r.priority).max() else {
        refusals.push(terminal_missing("The rule group has no rules."));
        return refusals;
    };
    let at_last: Vec<&Rule> = group.rules.iter().filter(|r| r.priority == last).collect();
    if at_last.len() > 1 {
        let names: Vec<&str> = at_last.iter().map(|r| r.name.as_str()).collect();
        refusals.push(Report::new(
            &codes::SCH_RULE_GROUP_SHARED_LAST,
            format!(
                "The rules {} share the last priority, {last}.",
                names.join(" and ")
            ),
        ));
    }
    let blocks_all = |r: &&Rule| r.action == Action::Block && group.matches_every_domain(r);
    let terminal = group
        .rules
        .iter()
        .filter(blocks_all)
        .min_by_key(|r| r.priority);
    let Some(terminal) = terminal else {
        refusals.push(terminal_missing(
            "No rule of the group is a BLOCK on a list holding *, so a name no rule lists is answered.",
        ));
        return refusals;
    };
    if terminal.priority != last {
        let after: Vec<String> = group
            .rules
            .iter()
            .filter(|r| r.priority > terminal.priority)
            .map(|r| format!("{} ({})", r.name, r.priority))
            .collect();
        refusals.push(terminal_missing(format!(
            "The BLOCK on every domain, {} at priority {}, is followed by {}.",
            terminal.name,
            terminal.priority,
            after.join(", ")
        )));
    }
    for allow in group.rules.iter().filter(|r| {
        r.action == Action::Allow && r.priority < terminal.priority && group.matches_every_domain(r)
    }) {
        refusals.push(Report::new(
            &codes::SCH_RULE_GROUP_ALLOW_ALL,
            format!(
                "The rule {} allows every domain at priority {}, before the BLOCK on every domain at {}, so nothing is blocked.",
                allow.name, allow.priority, terminal.priority
            ),
        ));
    }
    refusals
}

/// Whether `domain` can be held by a DNS Firewall domain list: no star, `*` alone, or a star
/// only as the front label (`*.example.com`).
pub fn is_firewall_domain(domain: &str) -> bool {
    let rest = domain
        .strip_prefix("*.")
        .unwrap_or(if domain == EVERY_DOMAIN { "" } else { domain });
    !rest.contains('*')
}

fn terminal_missing(statement: impl Into<String>) -> Report {
    Report::new(&codes::SCH_RULE_GROUP_TERMINAL, statement)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rule(name: &str, priority: u32, action: Action, list: &str) -> Rule {
        Rule {
            name: name.into(),
            priority,
            action,
            domain_list: list.into(),
            block_response: None,
        }
    }

    /// A group that closes the channel: forwarded names allowed, then every domain blocked.
    fn correct() -> RuleGroup {
        RuleGroup {
            rules: vec![
                rule("forwarded", 100, Action::Allow, "named"),
                rule("every-domain", 10_000, Action::Block, "all"),
            ],
            domain_lists: BTreeMap::from([
                (
                    "named".into(),
                    vec!["api.stripe.com.".into(), "*.github.com.".into()],
                ),
                ("all".into(), vec![EVERY_DOMAIN.into()]),
            ]),
            fail_open: FailOpen::Disabled,
        }
    }

    fn codes_of(group: &RuleGroup) -> Vec<&'static str> {
        check(group).iter().map(|r| r.code.code).collect()
    }

    #[test]
    fn a_correct_group_is_accepted() {
        assert_eq!(codes_of(&correct()), Vec::<&str>::new());
    }

    #[test]
    fn each_open_shape_is_refused_for_its_own_reason() {
        let allow_all_first = {
            let mut g = correct();
            g.rules.push(rule("everything", 5, Action::Allow, "all"));
            g
        };
        let terminal_moved = {
            let mut g = correct();
            g.rules[0].priority = 20_000;
            g
        };
        let shared_last = {
            let mut g = correct();
            g.rules.push(rule("late", 10_000, Action::Alert, "named"));
            g
        };
        let middle_star = {
            let mut g = correct();
            if let Some(list) = g.domain_lists.get_mut("named") {
                list.push("api.*.example.com.".into());
            }
            g
        };
        let fail_open = RuleGroup {
            fail_open: FailOpen::Enabled,
            ..correct()
        };
        let no_terminal = {
            let mut g = correct();
            g.rules.pop();
            g
        };
        let cases = [
            ("allow every domain first", allow_all_first, "AF-SCH-014"),
            ("terminal moved off the end", terminal_moved, "AF-SCH-015"),
            ("two rules at the last priority", shared_last, "AF-SCH-016"),
            ("star in the middle", middle_star, "AF-SCH-017"),
            ("fail-open enabled", fail_open, "AF-SCH-018"),
            ("no terminal block", no_terminal, "AF-SCH-015"),
        ];
        for (shape, group, code) in cases {
            assert_eq!(codes_of(&group), [code], "{shape}");
        }
    }

    #[test]
    fn the_documented_json_reads_and_unknown_lists_are_refused() {
        let text = r#"{"FirewallRules":[
            {"Name":"forwarded","Priority":100,"Action":"ALLOW","FirewallDomainListId":"a",
             "FirewallRuleGroupId":"rslvr-frg-1","CreationTime":"2026-01-01T00:00:00Z"},
            {"Name":"every-domain","Priority":200,"Action":"BLOCK","BlockResponse":"NXDOMAIN",
             "FirewallDomainListId":"b"}],
            "DomainLists":{"a":["api.stripe.com."],"b":["*"]},"FirewallFailOpen":"DISABLED"}"#;
        let group = RuleGroup::from_json(text).expect("read");
        assert!(check(&group).is_empty());
        let dangling = text.replace(
            r#""FirewallDomainListId":"b""#,
            r#""FirewallDomainListId":"c""#,
        );
        let refused = RuleGroup::from_json(&dangling).expect_err("refused");
        assert_eq!(refused.code.code, "AF-SCH-013");
        assert!(refused.statement.contains("names the domain list c"));
        let typo = text.replace("FirewallFailOpen", "FailOpen");
        assert_eq!(
            RuleGroup::from_json(&typo).expect_err("refused").code.code,
            "AF-SCH-013"
        );
    }

    #[test]
    fn a_star_is_a_firewall_domain_only_at_the_front() {
        for (domain, holds) in [
            ("*", true),
            ("*.example.com.", true),
            ("api.example.com.", true),
            ("api.*.example.com.", false),
            ("*.*.example.com.", false),
            ("api*.example.com.", false),
            ("example.com*", false),
        ] {
            assert_eq!(is_firewall_domain(domain), holds, "{domain}");
        }
    }
}
