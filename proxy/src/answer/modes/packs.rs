//! The fixture packs mock mode picks from: the built-in ones and the repository's own.

use std::collections::BTreeMap;

use serde_json::Value;

use crate::answer::modes::builtin;
use crate::answer::modes::pack::{Pack, PackError};

/// The built-in packs plus the repository's own, loaded once at start.
#[derive(Debug, Clone)]
pub(crate) struct Packs {
    builtin: Vec<Pack>,
    repo: BTreeMap<String, Pack>,
}

impl Packs {
    /// Parse the built-in packs and the repository's packs (keyed by the path a rule's
    /// `fixtures` names).
    pub(crate) fn load(repo: &BTreeMap<String, Value>) -> Result<Packs, PackError> {
        let repo = repo
            .iter()
            .map(|(path, doc)| Ok((path.clone(), Pack::from_value(path, doc)?)))
            .collect::<Result<_, PackError>>()?;
        Ok(Packs {
            builtin: builtin::packs()?,
            repo,
        })
    }

    /// The pack for a rule: the repository pack its `fixtures` names, else the built-in pack
    /// that answers for `host`.
    pub(crate) fn for_rule(&self, fixtures: Option<&str>, host: &str) -> Option<&Pack> {
        fixtures.and_then(|path| self.repo.get(path)).or_else(|| {
            self.builtin
                .iter()
                .find(|p| p.hosts().iter().any(|h| h == host))
        })
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn repository_pack_named_by_rule_wins_over_builtin_host_pack() {
        let repo = BTreeMap::from([(
            "mocks/stripe.yaml".to_owned(),
            json!({"routes": [{"method": "GET", "path": "/v1/balance", "json": {}}]}),
        )]);
        let packs = Packs::load(&repo).expect("packs load");
        let named = packs.for_rule(Some("mocks/stripe.yaml"), "api.stripe.com");
        assert_eq!(named.map(Pack::name), Some("mocks/stripe.yaml"));
        let builtin = packs
            .for_rule(None, "api.stripe.com")
            .expect("a built-in pack");
        assert!(builtin.hosts().iter().any(|h| h == "api.stripe.com"));
        assert!(packs.for_rule(None, "unknown.example.com").is_none());
    }
}
