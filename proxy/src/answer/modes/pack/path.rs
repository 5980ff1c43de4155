//! Path templates (`/v1/customers/{id}`): parsed once, matched against request paths.

use std::fmt;

use super::Problem;

/// A path with `{name}` parameters: each segment is a literal, or one parameter with an
/// optional literal prefix and suffix (`{id}.json`). A trailing `/` is ignored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PathTemplate {
    text: String,
    segments: Vec<Segment>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Segment {
    Literal(String),
    Param {
        prefix: String,
        name: String,
        suffix: String,
    },
}

impl Segment {
    /// Literals outrank parameters with a literal part, which outrank bare parameters.
    fn rank(&self) -> u8 {
        match self {
            Segment::Literal(_) => 2,
            Segment::Param { prefix, suffix, .. } if !prefix.is_empty() || !suffix.is_empty() => 1,
            Segment::Param { .. } => 0,
        }
    }
}

impl PathTemplate {
    /// Parse a template such as `/v1/customers/{id}`.
    pub fn parse(text: &str) -> Result<PathTemplate, Problem> {
        if !text.starts_with('/') {
            return Err(Problem::NotAbsolute);
        }
        let mut segments = Vec::new();
        for raw in split_path(text) {
            let segment = match (raw.find('{'), raw.find('}')) {
                (None, None) => Segment::Literal(raw.to_owned()),
                (Some(open), Some(close))
                    if open + 1 < close
                        && raw.matches('{').count() == 1
                        && raw.matches('}').count() == 1 =>
                {
                    Segment::Param {
                        prefix: raw[..open].to_owned(),
                        name: raw[open + 1..close].to_owned(),
                        suffix: raw[close + 1..].to_owned(),
                    }
                }
                _ => return Err(Problem::Brace(raw.to_owned())),
            };
            if let Segment::Param { name, .. } = &segment
                && segments
                    .iter()
                    .any(|s| matches!(s, Segment::Param { name: n, .. } if n == name))
            {
                return Err(Problem::DuplicateParameter(name.clone()));
            }
            segments.push(segment);
        }
        Ok(PathTemplate {
            text: text.to_owned(),
            segments,
        })
    }

    /// The parameter values if `path` (without its query) fits the template.
    pub fn matches<'a>(&'a self, path: &'a str) -> Option<Vec<(&'a str, &'a str)>> {
        let mut params = Vec::new();
        let mut parts = split_path(path);
        for segment in &self.segments {
            let part = parts.next()?;
            match segment {
                Segment::Literal(literal) if literal == part => {}
                Segment::Literal(_) => return None,
                Segment::Param {
                    prefix,
                    name,
                    suffix,
                } => {
                    let value = part
                        .strip_prefix(prefix.as_str())?
                        .strip_suffix(suffix.as_str())?;
                    if value.is_empty() {
                        return None;
                    }
                    params.push((name.as_str(), value));
                }
            }
        }
        parts.next().is_none().then_some(params)
    }

    /// How this template compares with another matching the same path: the first segment
    /// where one is literal and the other is not decides.
    pub fn outranks(&self, other: &PathTemplate) -> std::cmp::Ordering {
        let mine = self.segments.iter().map(Segment::rank);
        mine.cmp(other.segments.iter().map(Segment::rank))
    }

    /// The parameter names, in order.
    pub fn parameters(&self) -> impl Iterator<Item = &str> {
        self.segments.iter().filter_map(|s| match s {
            Segment::Param { name, .. } => Some(name.as_str()),
            Segment::Literal(_) => None,
        })
    }
}

impl fmt::Display for PathTemplate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

/// The segments of a path: `/` is none, and one trailing `/` is ignored.
fn split_path(path: &str) -> impl Iterator<Item = &str> {
    let inner = path.strip_prefix('/').unwrap_or(path);
    let inner = inner.strip_suffix('/').unwrap_or(inner);
    inner.split('/').filter(move |_| !inner.is_empty())
}
