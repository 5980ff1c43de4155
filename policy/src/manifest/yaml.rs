//! A YAML document as a tree of positioned nodes, built from `saphyr-parser`'s event stream.
//!
//! af builds its own small tree rather than using a ready-made loader so that anchors and
//! aliases are refused where they are written instead of being expanded, every duplicate key is
//! reported rather than only the first, and nesting is bounded before it can exhaust the stack.
//! Scalars are resolved with saphyr's YAML 1.2 core schema (`Scalar`).

use saphyr::Scalar;
use saphyr_parser::{Event, Marker, Parser, Span};

use super::path::{FieldPath, Segment};
use super::problem::{Location, Problem};
use crate::error::{Report, codes};

/// How deeply collections may nest. The manifest's own structure needs 6.
const MAX_DEPTH: usize = 32;

/// One positioned node.
#[derive(Debug)]
pub(crate) struct Node<'a> {
    /// Where the node starts.
    pub at: Location,
    /// What the node holds.
    pub value: Value<'a>,
}

/// What a node holds.
#[derive(Debug)]
pub(crate) enum Value<'a> {
    /// A scalar resolved by the core schema.
    Scalar(Scalar<'a>),
    /// A sequence.
    Seq(Vec<Node<'a>>),
    /// A mapping, in document order.
    Map(Vec<(Node<'a>, Node<'a>)>),
    /// An alias; already reported, never expanded.
    Alias,
}

impl<'a> Node<'a> {
    /// The key's text when this node is a string scalar.
    pub(super) fn as_str(&self) -> Option<&str> {
        match &self.value {
            Value::Scalar(Scalar::String(s)) => Some(s),
            _ => None,
        }
    }

    /// The value under `key` when this node is a mapping.
    pub(super) fn get(&self, key: &str) -> Option<&Node<'a>> {
        match &self.value {
            Value::Map(entries) => entries
                .iter()
                .find(|(k, _)| k.as_str() == Some(key))
                .map(|(_, v)| v),
            _ => None,
        }
    }

    /// The node at `path`, or the deepest node on the way there that exists.
    pub(super) fn locate(&self, path: &FieldPath) -> Location {
        let mut node = self;
        for segment in path.segments() {
            let next = match (segment, &node.value) {
                (Segment::Key(key), _) => node.get(key),
                (Segment::Index(i), Value::Seq(items)) => items.get(*i),
                (Segment::Index(_), _) => None,
            };
            match next {
                Some(next) => node = next,
                None => break,
            }
        }
        node.at
    }

    /// The node as JSON, for deserializing into the typed model once its shape is known good.
    pub(super) fn to_json(&self) -> serde_json::Value {
        use serde_json::Value as J;
        match &self.value {
            Value::Scalar(Scalar::Null) | Value::Alias => J::Null,
            Value::Scalar(Scalar::Boolean(b)) => J::Bool(*b),
            Value::Scalar(Scalar::Integer(i)) => J::from(*i),
            Value::Scalar(Scalar::FloatingPoint(f)) => {
                serde_json::Number::from_f64(f.into_inner()).map_or(J::Null, J::Number)
            }
            Value::Scalar(Scalar::String(s)) => J::String(s.to_string()),
            Value::Seq(items) => J::Array(items.iter().map(Node::to_json).collect()),
            Value::Map(entries) => J::Object(
                entries
                    .iter()
                    .filter_map(|(k, v)| Some((k.as_str()?.to_owned(), v.to_json())))
                    .collect(),
            ),
        }
    }
}

/// A parsed document: its root (absent for an empty file) and the problems found while reading
/// it. A syntax error ends reading, so the root is then absent too.
pub(crate) struct Document<'a> {
    pub root: Option<Node<'a>>,
    pub problems: Vec<Problem>,
}

/// Parse `text` into a positioned tree, collecting anchors, aliases and duplicate keys.
pub(crate) fn parse(text: &str) -> Document<'_> {
    let mut builder = Builder::default();
    for event in Parser::new_from_str(text) {
        let outcome = match event {
            Ok((event, span)) => builder.on_event(event, span),
            Err(e) => Err(Problem {
                location: location(*e.marker()),
                report: Report::new(
                    &codes::MAN_SYNTAX,
                    format!("The manifest is not valid YAML here: {}.", e.info()),
                ),
            }),
        };
        if let Err(fatal) = outcome {
            builder.problems.push(fatal);
            return Document {
                root: None,
                problems: builder.problems,
            };
        }
    }
    Document {
        root: builder.root,
        problems: builder.problems,
    }
}

/// A collection still being read.
enum Open<'a> {
    Seq(Location, Vec<Node<'a>>),
    Map(Location, Vec<(Node<'a>, Node<'a>)>, Option<Node<'a>>),
}

#[derive(Default)]
struct Builder<'a> {
    open: Vec<Open<'a>>,
    root: Option<Node<'a>>,
    documents: usize,
    problems: Vec<Problem>,
}

impl<'a> Builder<'a> {
    /// Take one event; `Err` is a problem that ends reading.
    fn on_event(&mut self, event: Event<'a>, span: Span) -> Result<(), Problem> {
        let at = location(span.start);
        match event {
            Event::DocumentStart(_) => {
                self.documents += 1;
                if self.documents > 1 {
                    return Err(Problem {
                        location: at,
                        report: Report::new(
                            &codes::MAN_SYNTAX,
                            "The manifest holds a second YAML document; af reads exactly one.",
                        )
                        .with_next(
                            "Remove the `---` and everything after it, or merge the documents.",
                        ),
                    });
                }
            }
            Event::Scalar(text, style, anchor, tag) => {
                self.anchor(anchor, at);
                let scalar = Scalar::parse_from_cow_and_metadata(text, style, tag.as_ref())
                    .ok_or_else(|| Problem {
                        location: at,
                        report: Report::new(
                            &codes::MAN_WRONG_TYPE,
                            "This value does not match the type its YAML tag names.",
                        )
                        .with_next("Remove the tag or correct the value."),
                    })?;
                self.close(Node {
                    at,
                    value: Value::Scalar(scalar),
                });
            }
            Event::Alias(_) => {
                self.problems.push(Problem {
                    location: at,
                    report: Report::new(
                        &codes::MAN_ALIAS,
                        "This value is a YAML alias; af does not expand aliases.",
                    ),
                });
                self.close(Node {
                    at,
                    value: Value::Alias,
                });
            }
            Event::SequenceStart(anchor, _) | Event::MappingStart(anchor, _) => {
                self.anchor(anchor, at);
                if self.open.len() >= MAX_DEPTH {
                    return Err(Problem {
                        location: at,
                        report: Report::new(
                            &codes::MAN_SYNTAX,
                            format!("The manifest nests deeper than {MAX_DEPTH} levels here."),
                        )
                        .with_next("Flatten the structure; no af.yaml key nests this deep."),
                    });
                }
                self.open
                    .push(if matches!(event, Event::SequenceStart(..)) {
                        Open::Seq(at, Vec::new())
                    } else {
                        Open::Map(at, Vec::new(), None)
                    });
            }
            Event::SequenceEnd | Event::MappingEnd => {
                let node = match self.open.pop() {
                    Some(Open::Seq(at, items)) => Node {
                        at,
                        value: Value::Seq(items),
                    },
                    Some(Open::Map(at, entries, _)) => Node {
                        at,
                        value: Value::Map(entries),
                    },
                    None => return Ok(()),
                };
                self.close(node);
            }
            Event::StreamStart | Event::StreamEnd | Event::DocumentEnd | Event::Nothing => {}
        }
        Ok(())
    }

    fn anchor(&mut self, anchor: usize, at: Location) {
        if anchor > 0 {
            self.problems.push(Problem {
                location: at,
                report: Report::new(
                    &codes::MAN_ALIAS,
                    "This value carries a YAML anchor; af does not accept anchors or aliases.",
                ),
            });
        }
    }

    /// A node is complete: put it in its parent, or make it the root.
    fn close(&mut self, node: Node<'a>) {
        match self.open.last_mut() {
            None => self.root = Some(node),
            Some(Open::Seq(_, items)) => items.push(node),
            Some(Open::Map(_, entries, pending)) => match pending.take() {
                None => *pending = Some(node),
                Some(key) => {
                    if let Some(text) = key.as_str()
                        && entries.iter().any(|(k, _)| k.as_str() == Some(text))
                    {
                        self.problems.push(Problem {
                            location: key.at,
                            report: Report::new(
                                &codes::MAN_DUPLICATE,
                                format!("The key `{text}` appears twice in the same mapping."),
                            )
                            .with_next("Keep one of the two."),
                        });
                    }
                    entries.push((key, node));
                }
            },
        }
    }
}

fn location(marker: Marker) -> Location {
    Location {
        line: marker.line(),
        column: marker.col() + 1,
    }
}
