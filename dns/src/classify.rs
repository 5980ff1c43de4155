//! Where a name belongs: the environment (inside), the machine itself (localhost) or the world
//! (outside). Pure: no I/O, no allocation per query.

use std::collections::HashSet;

use hickory_proto::rr::{LowerName, Name};

use crate::FastHash;

/// The three places a queried name can belong to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum NameClass {
    /// `localhost` or a name below it: answered locally, never forwarded.
    Localhost,
    /// May be one of the environment's names: ask the runtime's resolver, then check the answer.
    Inside,
    /// Everything else: answered with the sidecar's own address.
    Outside,
}

/// Decides [`NameClass`] from the configured inside names and zones.
#[derive(Debug, Clone)]
pub(crate) struct Classifier {
    names: HashSet<LowerName, FastHash>,
    zones: Vec<LowerName>,
    /// Every single-label name is inside, listed or not.
    any_single_label: bool,
}

impl Classifier {
    /// Builds a classifier from normalised names (see [`crate::DnsConfig::validate`]); with
    /// `any_single_label`, every single-label name is inside, not only the listed ones.
    ///
    /// Entries that are not DNS names are skipped; validation has already refused them.
    pub(crate) fn new(
        inside_names: &[String],
        inside_zones: &[String],
        any_single_label: bool,
    ) -> Self {
        Self {
            names: inside_names.iter().filter_map(|n| fqdn(n)).collect(),
            zones: inside_zones.iter().filter_map(|n| fqdn(n)).collect(),
            any_single_label,
        }
    }

    /// Classifies one queried name (case-insensitive).
    pub(crate) fn classify(&self, name: &LowerName) -> NameClass {
        if name.is_localhost() {
            NameClass::Localhost
        } else if (self.any_single_label && name.num_labels() == 1)
            || self.names.contains(name)
            || self.zones.iter().any(|zone| zone.zone_of(name))
        {
            NameClass::Inside
        } else {
            NameClass::Outside
        }
    }
}

/// `name` (normalised by validation) as a fully qualified, lower-case name.
pub(crate) fn fqdn(name: &str) -> Option<LowerName> {
    let mut parsed = Name::from_ascii(name).ok()?;
    parsed.set_fqdn(true);
    Some(LowerName::new(&parsed))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn class_with(name: &str, any_single_label: bool) -> NameClass {
        let classifier = Classifier::new(
            &["api-db.test".into(), "db".into()],
            &["svc.cluster.local".into()],
            any_single_label,
        );
        classifier.classify(&name.parse().expect("name"))
    }

    fn class(name: &str) -> NameClass {
        class_with(name, false)
    }

    #[test]
    fn localhost_and_names_below_it_are_local() {
        assert_eq!(class("localhost."), NameClass::Localhost);
        assert_eq!(class("Foo.LOCALHOST."), NameClass::Localhost);
        assert_eq!(class("localhost.example.com."), NameClass::Outside);
    }

    #[test]
    fn unlisted_single_labels_are_outside_unless_every_one_is_inside() {
        assert_eq!(class("printer."), NameClass::Outside);
        assert_eq!(class_with("printer.", true), NameClass::Inside);
    }

    #[test]
    fn listed_names_and_zones_are_inside() {
        assert_eq!(class("db."), NameClass::Inside);
        assert_eq!(class("API-DB.test."), NameClass::Inside);
        assert_eq!(class("svc.cluster.local."), NameClass::Inside);
        assert_eq!(class("web.ns.svc.cluster.local."), NameClass::Inside);
    }

    #[test]
    fn everything_else_is_outside() {
        assert_eq!(class("example.com."), NameClass::Outside);
        assert_eq!(class("other.api-db.test."), NameClass::Outside);
        assert_eq!(class("evilsvc.cluster.local."), NameClass::Outside);
        assert_eq!(class("."), NameClass::Outside);
    }
}
