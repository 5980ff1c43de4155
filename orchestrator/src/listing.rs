//! The egress catalogue in deciding order, as `af net policy` prints it and `af ui` shows it.

use af_policy::egress::{Catalogue, Mode};
use serde::Serialize;

/// One rule of the listing.
#[derive(Debug, Serialize)]
pub struct ListedRule<'a> {
    /// Its place in deciding order, from 1.
    pub order: usize,
    /// Its label (`rules[N]`).
    pub rule: String,
    /// The host pattern as written.
    pub host: &'a str,
    /// Its verdict.
    pub mode: Mode,
    /// Its path prefixes.
    #[serde(skip_serializing_if = "<[String]>::is_empty")]
    pub paths: &'a [String],
    /// Its methods.
    #[serde(skip_serializing_if = "<[String]>::is_empty")]
    pub methods: &'a [String],
    /// How specific it is, in words.
    pub specificity: String,
    /// Its note.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<&'a str>,
}

/// Every rule, most specific first, then the default.
#[derive(Debug, Serialize)]
pub struct Listing<'a> {
    /// The rules in deciding order.
    pub rules: Vec<ListedRule<'a>>,
    /// The verdict when no rule matches.
    pub default: Mode,
    /// Whether IPv6 destinations are allowed.
    pub allow_ipv6: bool,
}

impl<'a> Listing<'a> {
    /// The listing of `catalogue`.
    pub fn of(catalogue: &'a Catalogue) -> Self {
        let rules = catalogue
            .rules_in_order()
            .into_iter()
            .enumerate()
            .map(|(order, (id, rule, specificity))| ListedRule {
                order: order + 1,
                rule: id.to_string(),
                host: &rule.host,
                mode: rule.mode,
                paths: &rule.paths,
                methods: &rule.methods,
                specificity: specificity.to_string(),
                note: rule.note.as_deref(),
            })
            .collect();
        Listing {
            rules,
            default: catalogue.default_mode(),
            allow_ipv6: catalogue.allow_ipv6(),
        }
    }
}
