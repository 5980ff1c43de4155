//! Where in a manifest something is: `services[2].depends_on[0]`.

use std::fmt;

/// One step into a manifest: a mapping key or a list index.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Segment {
    /// A key of a mapping.
    Key(String),
    /// A position in a list, from 0.
    Index(usize),
}

/// A path from the top of a manifest to one value, shown as `services[2].depends_on[0]`.
#[derive(Debug, Clone, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct FieldPath(Vec<Segment>);

impl FieldPath {
    /// The top of the manifest.
    pub fn root() -> Self {
        Self::default()
    }

    /// This path followed by a mapping key.
    pub fn key(&self, key: impl Into<String>) -> Self {
        self.with(Segment::Key(key.into()))
    }

    /// This path followed by a list index.
    pub fn index(&self, index: usize) -> Self {
        self.with(Segment::Index(index))
    }

    /// This path followed by every step of `rest`.
    pub fn join(&self, rest: &FieldPath) -> Self {
        let mut joined = self.clone();
        joined.0.extend(rest.0.iter().cloned());
        joined
    }

    /// The steps, from the top.
    pub fn segments(&self) -> &[Segment] {
        &self.0
    }

    /// Whether this path is `prefix` or lies under it.
    pub fn starts_with(&self, prefix: &FieldPath) -> bool {
        self.0.starts_with(&prefix.0)
    }

    fn with(&self, segment: Segment) -> Self {
        let mut longer = self.clone();
        longer.0.push(segment);
        longer
    }
}

impl fmt::Display for FieldPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0.is_empty() {
            return f.write_str("the top level");
        }
        for (i, segment) in self.0.iter().enumerate() {
            match segment {
                Segment::Key(key) if i == 0 => f.write_str(key)?,
                Segment::Key(key) => write!(f, ".{key}")?,
                Segment::Index(index) => write!(f, "[{index}]")?,
            }
        }
        Ok(())
    }
}
