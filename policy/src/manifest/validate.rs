//! From text to a [`Manifest`], or to every problem in it sorted by position.

use serde::de::DeserializeOwned;
use serde_json::Value as Json;

use super::model::{MANIFEST_VERSION, Manifest, Service};
use super::names::dns_label_problem;
use super::path::FieldPath;
use super::problem::{Location, Problem};
use super::schema::SCHEMA;
use super::services;
use super::structure::{self, Finding};
use super::yaml::{self, Node, Value};
use crate::egress::{Catalogue, EgressSpec};
use crate::error::{Report, codes};
use crate::placement;

/// Read `text` as a manifest; on refusal, every problem sorted by position.
pub(crate) fn validate(text: &str) -> Result<Manifest, Vec<Problem>> {
    read(text).map_err(|mut problems| {
        problems.sort_by_key(|p| p.location);
        problems.dedup();
        problems
    })
}

/// Read `text` as a `T` through the manifest's YAML layer and shape check against `schema`
/// (anchors, aliases, repeated and unknown keys, wrong types): for other documents af reads,
/// with every problem at its line and column, sorted.
pub(crate) fn read_document<T: DeserializeOwned>(
    text: &str,
    schema: &Json,
) -> Result<T, Vec<Problem>> {
    let document = yaml::parse(text);
    let mut problems = document.problems;
    let Some(root) = document.root else {
        problems.push(Problem {
            location: Location::START,
            report: Report::new(&codes::MAN_MISSING_KEY, "The document is empty."),
        });
        return Err(problems);
    };
    problems.extend(
        structure::check(&root, schema)
            .into_iter()
            .map(|f| f.problem),
    );
    if problems.is_empty() {
        match serde_json::from_value(root.to_json()) {
            Ok(value) => return Ok(value),
            Err(e) => problems.push(Problem {
                location: root.at,
                report: Report::new(
                    &codes::MAN_WRONG_TYPE,
                    format!("The document could not be read: {e}."),
                ),
            }),
        }
    }
    problems.sort_by_key(|p| p.location);
    problems.dedup();
    Err(problems)
}

fn read(text: &str) -> Result<Manifest, Vec<Problem>> {
    let document = yaml::parse(text);
    let mut problems = document.problems;
    let Some(root) = document.root else {
        if problems.is_empty() {
            problems.push(Problem {
                location: Location::START,
                report: Report::new(&codes::MAN_MISSING_KEY, "The manifest is empty.").with_next(
                    "Start it with version: 1 and name: followed by the project's name.",
                ),
            });
        }
        return Err(problems);
    };
    let findings = structure::check(&root, &SCHEMA);
    // Aliases and repeated keys make the tree an unreliable picture of what was meant, and a
    // document that is not a mapping has no sections: report the shape problems alone.
    let readable = problems.is_empty() && matches!(root.value, Value::Map(_));
    let manifest = readable
        .then(|| Sections::new(&root, &findings).check())
        .and_then(|(manifest, semantic)| {
            problems.extend(semantic);
            manifest
        });
    problems.extend(findings.into_iter().map(|f| f.problem));
    match manifest {
        Some(manifest) if problems.is_empty() => Ok(manifest),
        _ => Err(problems),
    }
}

/// The top-level sections of a well-shaped mapping, each deserialized only if its shape is
/// sound, so one section's mistakes do not hide another's.
struct Sections<'t, 'a> {
    root: &'t Node<'a>,
    findings: &'t [Finding],
    problems: Vec<Problem>,
}

impl<'t, 'a> Sections<'t, 'a> {
    fn new(root: &'t Node<'a>, findings: &'t [Finding]) -> Self {
        Self {
            root,
            findings,
            problems: Vec::new(),
        }
    }

    /// Check every section; the manifest when every section could be read.
    fn check(mut self) -> (Option<Manifest>, Vec<Problem>) {
        let version = self.section::<Option<u32>>("version").flatten();
        if let Some(version) = version.filter(|v| *v != MANIFEST_VERSION) {
            self.refuse(
                FieldPath::root().key("version"),
                Report::new(
                    &codes::MAN_VERSION,
                    format!("The manifest says version: {version}; this build reads version {MANIFEST_VERSION}."),
                ),
            );
        }
        let name = self.section::<Option<String>>("name").flatten();
        if let Some(report) = name
            .as_deref()
            .and_then(|n| dns_label_problem(n, "manifest name"))
        {
            self.refuse(FieldPath::root().key("name"), report);
        }
        let services = self.items::<Service>("services");
        if let Some(services) = &services {
            for (path, report) in services::check(services) {
                self.refuse(path, report);
            }
        }
        let services = services.and_then(|s| s.into_iter().collect::<Option<Vec<_>>>());
        let egress = self.section::<EgressSpec>("egress");
        if let Some(Err(rule_problems)) = egress.as_ref().map(Catalogue::compile) {
            let rules = FieldPath::root().key("egress").key("rules");
            for problem in rule_problems {
                let host = egress
                    .as_ref()
                    .and_then(|e| e.rules.get(problem.rule))
                    .map_or("", |r| r.host.as_str());
                self.refuse(
                    rules.index(problem.rule).key(problem.field),
                    Report::new(
                        &codes::MAN_BAD_RULE,
                        format!(
                            "The {} of egress rule {} ({host}) cannot be used: {}.",
                            problem.field, problem.rule, problem.message
                        ),
                    ),
                );
            }
        }
        if let Some(egress) = &egress {
            for (path, report) in upstream_roots(egress) {
                self.refuse(path, report);
            }
        }
        let runtime = self.section("runtime");
        if let Some(runtime) = &runtime {
            let under = FieldPath::root().key("runtime");
            for (path, report) in placement::check(runtime) {
                self.refuse(under.join(&path), report);
            }
        }
        let containment = self.section("containment");
        let manifest = match (version, name, services, egress, runtime, containment) {
            (
                Some(version),
                Some(name),
                Some(services),
                Some(egress),
                Some(runtime),
                Some(containment),
            ) => Some(Manifest {
                version,
                name,
                services,
                egress,
                runtime,
                containment,
            }),
            _ => None,
        };
        (manifest, self.problems)
    }

    /// The section under `key` (its default when absent), or `None` when its shape is wrong.
    fn section<T: DeserializeOwned + Default>(&mut self, key: &str) -> Option<T> {
        let path = FieldPath::root().key(key);
        match self.root.get(key) {
            None => Some(T::default()),
            Some(node) => self.read(node, path),
        }
    }

    /// The list under `key` (empty when absent), each item read only if its own shape is sound;
    /// `None` when the list itself is not a list.
    fn items<T: DeserializeOwned>(&mut self, key: &str) -> Option<Vec<Option<T>>> {
        let path = FieldPath::root().key(key);
        let Some(node) = self.root.get(key) else {
            return Some(Vec::new());
        };
        let Value::Seq(items) = &node.value else {
            return None;
        };
        Some(
            items
                .iter()
                .enumerate()
                .map(|(i, item)| self.read(item, path.index(i)))
                .collect(),
        )
    }

    /// `node` as a `T`, or `None` when a shape problem lies at or under `path`.
    fn read<T: DeserializeOwned>(&mut self, node: &Node<'_>, path: FieldPath) -> Option<T> {
        if self.findings.iter().any(|f| f.path.starts_with(&path)) {
            return None;
        }
        match serde_json::from_value(node.to_json()) {
            Ok(value) => Some(value),
            Err(e) => {
                // The schema and the types are one description, so this is a bug in af; say so
                // rather than accept the value unread.
                let report = Report::new(
                    &codes::MAN_WRONG_TYPE,
                    format!("{path} could not be read: {e}."),
                )
                .with_next(
                    "Correct the value; if it matches `af schema`, report this as a bug in af.",
                );
                self.refuse(path, report);
                None
            }
        }
    }

    fn refuse(&mut self, path: FieldPath, report: Report) {
        self.problems.push(Problem {
            location: self.root.locate(&path),
            report,
        });
    }
}

/// `egress.upstream_roots` names files in the repository: each a relative path, not empty. The
/// files themselves are read, and checked to be PEM certificates, by whoever builds the
/// sidecar's configuration.
fn upstream_roots(egress: &EgressSpec) -> Vec<(FieldPath, Report)> {
    let under = FieldPath::root().key("egress").key("upstream_roots");
    egress
        .upstream_roots
        .iter()
        .enumerate()
        .filter_map(|(index, file)| {
            let why = if file.trim().is_empty() {
                "is empty"
            } else if std::path::Path::new(file).is_absolute() {
                "is an absolute path"
            } else {
                return None;
            };
            let report = Report::new(
                &codes::MAN_WRONG_TYPE,
                format!("egress.upstream_roots[{index}] {why}; it names a PEM file relative to af.yaml."),
            )
            .with_next("Give the CA's PEM file as a path relative to af.yaml, e.g. certs/internal-ca.pem, kept in the repository.");
            Some((under.index(index), report))
        })
        .collect()
}
