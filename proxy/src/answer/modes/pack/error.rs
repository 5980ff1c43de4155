//! Why a pack (or an OpenAPI path template) is refused.

/// Why a fixture pack was refused.
#[derive(Debug, thiserror::Error)]
pub enum PackError {
    /// A built-in pack is not YAML (a build defect, caught by the unit tests).
    #[error("built-in fixture pack {pack}: {reason}")]
    BuiltinYaml {
        /// The built-in pack's file name.
        pack: &'static str,
        /// The YAML reader's first line.
        reason: String,
    },
    /// A field of the document is wrong.
    #[error("fixture pack {pack}: {at}: {problem}")]
    Invalid {
        /// The pack's name (or the path it was loaded from).
        pack: String,
        /// Where in the document: `routes[3].path`.
        at: String,
        /// What is wrong there.
        problem: Problem,
    },
}

/// What is wrong with one field of a pack (or of an OpenAPI path template).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Problem {
    /// The document does not have the pack's shape (missing, unknown or mistyped field).
    #[error("{0}")]
    Shape(String),
    /// A path template does not start with `/`.
    #[error("must start with '/'")]
    NotAbsolute,
    /// A segment has braces that are not one `{name}`.
    #[error("segment {0:?} is not a literal or one {{name}} parameter")]
    Brace(String),
    /// A parameter name is used twice in one template.
    #[error("parameter {{{0}}} appears twice")]
    DuplicateParameter(String),
    /// The method is not a standard HTTP method.
    #[error(
        "{0:?} is not an HTTP method (GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS, TRACE, CONNECT)"
    )]
    Method(String),
    /// The status is outside 100-599.
    #[error("{0} is not an HTTP status (100-599)")]
    Status(u16),
    /// A header name is not a valid token.
    #[error("{0:?} is not a header name")]
    HeaderName(String),
    /// A header value holds characters a header cannot carry.
    #[error("is not a valid header value")]
    HeaderValue,
    /// A query, form or header value is an object, array or null.
    #[error("must be a string, number or boolean")]
    NotScalar,
    /// A route gives both `json` and `text`.
    #[error("give the answer as `json` or `text`, not both")]
    TwoAnswers,
}
