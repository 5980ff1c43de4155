//! The shape check: every key known, every value of the right type, every required key present.
//!
//! The check walks the YAML tree against the manifest's JSON Schema, which schemars derives
//! from the typed model, so the keys and types it knows cannot drift from what deserialization
//! accepts. It collects every problem instead of stopping at the first.

use saphyr::Scalar;
use serde_json::{Map, Value as Json};

use super::path::{FieldPath, Segment};
use super::problem::Problem;
use super::yaml::{Node, Value};
use crate::error::{Report, codes};

/// One shape problem and the path it concerns, so that later checks can skip what it taints.
pub(crate) struct Finding {
    pub path: FieldPath,
    pub problem: Problem,
}

/// Check `root` against `schema` (a schema with its definitions under `$defs`).
pub(crate) fn check(root: &Node<'_>, schema: &Json) -> Vec<Finding> {
    let empty = Map::new();
    let walker = Walker {
        defs: schema
            .get("$defs")
            .and_then(Json::as_object)
            .unwrap_or(&empty),
    };
    let mut findings = Vec::new();
    walker.check(root, schema, &FieldPath::root(), &mut findings);
    findings
}

struct Walker<'s> {
    defs: &'s Map<String, Json>,
}

impl<'s> Walker<'s> {
    /// Follow `$ref`s to the schema they name.
    fn resolve(&self, mut schema: &'s Json) -> &'s Json {
        while let Some(target) = schema
            .get("$ref")
            .and_then(Json::as_str)
            .and_then(|r| r.strip_prefix("#/$defs/"))
            .and_then(|name| self.defs.get(name))
        {
            schema = target;
        }
        schema
    }

    fn check(&self, node: &Node<'_>, schema: &'s Json, path: &FieldPath, out: &mut Vec<Finding>) {
        if matches!(node.value, Value::Alias) {
            return; // already refused where it is written
        }
        let about = schema.get("description").and_then(Json::as_str);
        let s = self.resolve(schema);
        let about = about.or_else(|| s.get("description").and_then(Json::as_str));

        if let Some(branches) = branches(s) {
            let mut admitting = Vec::new();
            for branch in branches {
                let mut found = Vec::new();
                self.check(node, branch, path, &mut found);
                if found.is_empty() {
                    return;
                }
                if self.admits_kind(branch, node) {
                    admitting.push(found);
                }
            }
            match <[Vec<Finding>; 1]>::try_from(admitting) {
                Ok([found]) => out.extend(found),
                Err(_) => out.push(self.wrong_type(node, s, path, about)),
            }
            return;
        }
        if !self.admits_kind(s, node) || !matches_constant(s, node) {
            out.push(self.wrong_type(node, s, path, about));
            return;
        }
        match &node.value {
            Value::Scalar(Scalar::Integer(i)) => {
                let (min, max) = bounds(s);
                if !(min..=max).contains(i) {
                    out.push(finding(
                        path,
                        node,
                        Report::new(
                            &codes::MAN_WRONG_TYPE,
                            format!("{} must be from {min} to {max}, not {i}.", subject(path)),
                        )
                        .with_next(format!("Write a whole number from {min} to {max}.")),
                    ));
                }
            }
            Value::Seq(items) => {
                if let Some(item_schema) = s.get("items") {
                    for (i, item) in items.iter().enumerate() {
                        self.check(item, item_schema, &path.index(i), out);
                    }
                }
            }
            Value::Map(entries) => self.check_mapping(node, entries, s, path, out),
            Value::Scalar(_) | Value::Alias => {}
        }
    }

    fn check_mapping(
        &self,
        node: &Node<'_>,
        entries: &[(Node<'_>, Node<'_>)],
        s: &'s Json,
        path: &FieldPath,
        out: &mut Vec<Finding>,
    ) {
        let empty = Map::new();
        let properties = s
            .get("properties")
            .and_then(Json::as_object)
            .unwrap_or(&empty);
        for (key, value) in entries {
            let Some(name) = key.as_str() else {
                out.push(finding(
                    path,
                    key,
                    Report::new(
                        &codes::MAN_WRONG_TYPE,
                        format!("A key {} is not a string.", place(path)),
                    )
                    .with_next("Write the key as text."),
                ));
                continue;
            };
            match (properties.get(name), s.get("additionalProperties")) {
                (Some(property), _) => self.check(value, property, &path.key(name), out),
                (None, Some(Json::Bool(false))) => {
                    out.push(unknown_key(path, key, name, properties));
                }
                (None, Some(additional)) if additional.is_object() => {
                    self.check(value, additional, &path.key(name), out);
                }
                (None, _) => {}
            }
        }
        let required = s.get("required").and_then(Json::as_array);
        for name in required.into_iter().flatten().filter_map(Json::as_str) {
            if !entries.iter().any(|(k, _)| k.as_str() == Some(name)) {
                let about = properties
                    .get(name)
                    .map(|p| self.describe(p))
                    .unwrap_or_default();
                out.push(finding(
                    path,
                    node,
                    Report::new(
                        &codes::MAN_MISSING_KEY,
                        format!("{} has no {name}, which is required.", subject(path)),
                    )
                    .with_next(format!("Add {name}: here.{about}")),
                ));
            }
        }
    }

    /// Whether `schema` accepts values of the node's kind at all.
    fn admits_kind(&self, schema: &'s Json, node: &Node<'_>) -> bool {
        let s = self.resolve(schema);
        if let Some(branches) = branches(s) {
            return branches.iter().any(|b| self.admits_kind(b, node));
        }
        let Some(kind) = kind(node) else { return true };
        match s.get("type") {
            Some(Json::String(t)) => type_admits(t, kind),
            Some(Json::Array(ts)) => ts
                .iter()
                .filter_map(Json::as_str)
                .any(|t| type_admits(t, kind)),
            _ => true,
        }
    }

    fn wrong_type(
        &self,
        node: &Node<'_>,
        s: &'s Json,
        path: &FieldPath,
        about: Option<&str>,
    ) -> Finding {
        let expected = self.expected(s);
        let quote = match (&node.value, expected.as_str()) {
            (
                Value::Scalar(Scalar::Integer(_) | Scalar::FloatingPoint(_) | Scalar::Boolean(_)),
                "a string",
            ) => " (put it in quotes)",
            _ => "",
        };
        let about = match (about, path.segments().last()) {
            (Some(about), Some(Segment::Key(key))) => format!(" {key}: {about}"),
            _ => String::new(),
        };
        finding(
            path,
            node,
            Report::new(
                &codes::MAN_WRONG_TYPE,
                format!(
                    "{} must be {expected}, not {}.",
                    subject(path),
                    actual(node)
                ),
            )
            .with_next(format!("Write {expected} here{quote}.{about}")),
        )
    }

    /// What a schema accepts, in words: "a string", "one of allow, block".
    fn expected(&self, schema: &'s Json) -> String {
        let s = self.resolve(schema);
        let constants = constants(s, self);
        if !constants.is_empty() {
            return format!("one of {}", constants.join(", "));
        }
        let mut words: Vec<String> = match (branches(s), s.get("type")) {
            (Some(branches), _) => branches.iter().map(|b| self.expected(b)).collect(),
            (None, Some(Json::String(t))) => vec![type_words(t).to_owned()],
            (None, Some(Json::Array(ts))) => ts
                .iter()
                .filter_map(Json::as_str)
                .map(|t| type_words(t).to_owned())
                .collect(),
            (None, _) => vec!["a value".to_owned()],
        };
        if words.len() > 1 {
            words.retain(|w| w != type_words("null"));
        }
        words.dedup();
        words.join(" or ")
    }

    /// A field's description, for a `Next:` line.
    fn describe(&self, schema: &'s Json) -> String {
        schema
            .get("description")
            .or_else(|| self.resolve(schema).get("description"))
            .and_then(Json::as_str)
            .map(|d| format!(" {d}"))
            .unwrap_or_default()
    }
}

fn branches(s: &Json) -> Option<&Vec<Json>> {
    s.get("anyOf")
        .or_else(|| s.get("oneOf"))
        .and_then(Json::as_array)
}

/// The literal values a schema allows, when it is an enumeration (possibly one branch per value).
fn constants<'s>(s: &'s Json, walker: &Walker<'s>) -> Vec<String> {
    let literal = |v: &Json| v.as_str().map_or_else(|| v.to_string(), str::to_owned);
    if let Some(c) = s.get("const") {
        return vec![literal(c)];
    }
    if let Some(values) = s.get("enum").and_then(Json::as_array) {
        return values.iter().map(literal).collect();
    }
    let Some(branches) = branches(s) else {
        return Vec::new();
    };
    let per_branch: Vec<Vec<String>> = branches
        .iter()
        .map(|b| constants(walker.resolve(b), walker))
        .collect();
    if per_branch.iter().all(|c| !c.is_empty()) {
        per_branch.concat()
    } else {
        Vec::new()
    }
}

fn matches_constant(s: &Json, node: &Node<'_>) -> bool {
    let value = node.to_json();
    match (s.get("const"), s.get("enum").and_then(Json::as_array)) {
        (Some(c), _) => *c == value,
        (None, Some(values)) => values.contains(&value),
        (None, None) => true,
    }
}

/// The inclusive integer range a schema allows: its `minimum`/`maximum`, narrowed by what its
/// integer `format` can hold.
fn bounds(s: &Json) -> (i64, i64) {
    let (mut min, mut max) = match s.get("format").and_then(Json::as_str) {
        Some("uint8") => (0, i64::from(u8::MAX)),
        Some("uint16") => (0, i64::from(u16::MAX)),
        Some("uint32") => (0, i64::from(u32::MAX)),
        Some("uint64" | "uint") => (0, i64::MAX),
        Some("int8") => (i64::from(i8::MIN), i64::from(i8::MAX)),
        Some("int16") => (i64::from(i16::MIN), i64::from(i16::MAX)),
        Some("int32") => (i64::from(i32::MIN), i64::from(i32::MAX)),
        _ => (i64::MIN, i64::MAX),
    };
    if let Some(m) = s.get("minimum").and_then(Json::as_i64) {
        min = min.max(m);
    }
    if let Some(m) = s.get("maximum").and_then(Json::as_i64) {
        max = max.min(m);
    }
    (min, max)
}

/// The JSON Schema type of a node; `None` for an alias.
fn kind(node: &Node<'_>) -> Option<&'static str> {
    Some(match &node.value {
        Value::Scalar(Scalar::Null) => "null",
        Value::Scalar(Scalar::Boolean(_)) => "boolean",
        Value::Scalar(Scalar::Integer(_)) => "integer",
        Value::Scalar(Scalar::FloatingPoint(_)) => "number",
        Value::Scalar(Scalar::String(_)) => "string",
        Value::Seq(_) => "array",
        Value::Map(_) => "object",
        Value::Alias => return None,
    })
}

fn type_admits(schema_type: &str, kind: &str) -> bool {
    schema_type == kind || (schema_type == "number" && kind == "integer")
}

fn type_words(schema_type: &str) -> &'static str {
    match schema_type {
        "string" => "a string",
        "integer" => "a whole number",
        "number" => "a number",
        "boolean" => "true or false",
        "array" => "a list",
        "object" => "a mapping",
        "null" => "empty",
        _ => "a value",
    }
}

/// The node as the user wrote it, in words: `the string "x"`, `a list`.
fn actual(node: &Node<'_>) -> String {
    const SHOWN: usize = 40;
    match &node.value {
        Value::Scalar(Scalar::Null) => "empty".to_owned(),
        Value::Scalar(Scalar::Boolean(b)) => b.to_string(),
        Value::Scalar(Scalar::Integer(i)) => format!("the number {i}"),
        Value::Scalar(Scalar::FloatingPoint(f)) => format!("the number {f}"),
        Value::Scalar(Scalar::String(s)) if s.chars().count() > SHOWN => {
            format!(
                "the string {:?}…",
                s.chars().take(SHOWN).collect::<String>()
            )
        }
        Value::Scalar(Scalar::String(s)) => format!("the string {s:?}"),
        Value::Seq(_) => "a list".to_owned(),
        Value::Map(_) => "a mapping".to_owned(),
        Value::Alias => "an alias".to_owned(),
    }
}

fn unknown_key(path: &FieldPath, key: &Node<'_>, name: &str, known: &Map<String, Json>) -> Finding {
    let report = match did_you_mean(name, known.keys().map(String::as_str)) {
        Some(near) => Report::new(
            &codes::MAN_UNKNOWN_KEY,
            format!(
                "The key {name} is not one af knows {}; did you mean {near}?",
                place(path)
            ),
        )
        .with_next(format!("Rename {name} to {near}.")),
        None => {
            let keys: Vec<&str> = known.keys().map(String::as_str).collect();
            Report::new(
                &codes::MAN_UNKNOWN_KEY,
                format!("The key {name} is not one af knows {}.", place(path)),
            )
            .with_next(format!(
                "Remove it; the keys known here are {}.",
                keys.join(", ")
            ))
        }
    };
    finding(&path.key(name), key, report)
}

/// The known key closest to `name`, if it is close enough to be a misspelling of it.
pub(crate) fn did_you_mean<'k>(
    name: &str,
    known: impl Iterator<Item = &'k str>,
) -> Option<&'k str> {
    known
        .map(|k| (strsim::damerau_levenshtein(name, k), k))
        .filter(|(distance, k)| *distance <= 2 && distance * 3 <= k.len())
        .min_by_key(|(distance, _)| *distance)
        .map(|(_, k)| k)
}

fn finding(path: &FieldPath, node: &Node<'_>, report: Report) -> Finding {
    Finding {
        path: path.clone(),
        problem: Problem {
            location: node.at,
            report,
        },
    }
}

/// The path as the subject of a sentence.
fn subject(path: &FieldPath) -> String {
    if path.segments().is_empty() {
        "The manifest".to_owned()
    } else {
        path.to_string()
    }
}

/// Where a key sits, for "is not one af knows {place}".
fn place(path: &FieldPath) -> String {
    if path.segments().is_empty() {
        "at the top level".to_owned()
    } else {
        format!("in {path}")
    }
}
