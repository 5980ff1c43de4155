//! `af net explain`: every rule that matched a request and why the winner won.

use serde::Serialize;
use thiserror::Error;
use url::Url;

use super::host::{MAX_HOST_LEN, canonicalize};
use super::{Catalogue, Decision, Mode, RuleId, Target};

/// Why a URL could not be explained.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum UrlError {
    /// The text is not an absolute URL.
    #[error("{0:?} is not an absolute URL")]
    NotAbsolute(String),
    /// The URL has no host.
    #[error("{0:?} names no host")]
    NoHost(String),
    /// The URL's scheme has no default port and none is given.
    #[error("{0:?} names no port and its scheme has no default one")]
    NoPort(String),
}

/// One rule that matched the request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct MatchedRule {
    /// The rule's position in `egress.rules`.
    pub index: usize,
    /// The rule's host pattern as written.
    pub host: String,
    /// The rule's verdict.
    pub mode: Mode,
    /// How specific the match is, in words.
    pub specificity: String,
    /// Whether this rule decided.
    pub winner: bool,
}

/// The explanation of one decision.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Explanation {
    /// The method as given.
    pub method: String,
    /// The host, canonical.
    pub host: String,
    /// The port the request would go to.
    pub port: u16,
    /// The path.
    pub path: String,
    /// The verdict.
    pub mode: Mode,
    /// The deciding rule's label, or `default`.
    pub rule: String,
    /// Whether the sidecar opens TLS to this host.
    pub open_tls: bool,
    /// Every rule that matched, most specific first.
    pub matched: Vec<MatchedRule>,
    /// One sentence on why the winner won.
    pub why: String,
}

impl Catalogue {
    /// Explain how `method url` is decided.
    pub fn explain(&self, method: &str, url: &str) -> Result<Explanation, UrlError> {
        let parsed = Url::parse(url).map_err(|_| UrlError::NotAbsolute(url.to_owned()))?;
        let host = match parsed.host() {
            Some(url::Host::Ipv6(ip)) => ip.to_string(),
            Some(host) => host.to_string(),
            None => return Err(UrlError::NoHost(url.to_owned())),
        };
        let port = parsed
            .port_or_known_default()
            .ok_or_else(|| UrlError::NoPort(url.to_owned()))?;
        let path = parsed.path().to_owned();
        let decision = self.decide(&Target {
            method,
            host: &host,
            port,
            path: &path,
        });
        let mut buf = [0; MAX_HOST_LEN];
        let canonical =
            canonicalize(&host, &mut buf).map_err(|_| UrlError::NoHost(url.to_owned()))?;
        let mut matched: Vec<_> = (0..self.len())
            .filter_map(|i| {
                let id = RuleId(u32::try_from(i).ok()?);
                let spec = self.request_specificity(id, &canonical, port, method, &path)?;
                Some((id, spec))
            })
            .collect();
        matched.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
        let why = self.why(&decision, &matched);
        Ok(Explanation {
            method: method.to_owned(),
            host: canonical.as_str().to_owned(),
            port,
            path,
            mode: decision.mode,
            rule: self.rule_label(decision.rule).to_owned(),
            open_tls: decision.open_tls,
            matched: matched
                .iter()
                .map(|(id, spec)| MatchedRule {
                    index: id.index(),
                    host: self.rule(*id).host.clone(),
                    mode: self.rule(*id).mode,
                    specificity: spec.to_string(),
                    winner: decision.rule == Some(*id),
                })
                .collect(),
            why,
        })
    }

    fn why(&self, decision: &Decision, matched: &[(RuleId, super::Specificity)]) -> String {
        use super::Reason;
        match decision.reason {
            Reason::Default => format!(
                "No rule matches, so the default ({}) decides.",
                self.default_mode()
            ),
            Reason::InvalidHost => "The host is not a valid host name, so it is refused.".into(),
            Reason::NonCanonicalPath => "The path has dot segments or needless escapes while a \
                                         path rule applies to this host, so it is refused."
                .into(),
            Reason::Rule => match matched {
                [_] => "It is the only rule that matches.".into(),
                [(first, a), (second, b), ..] if a == b => format!(
                    "{first} and {second} are equally specific; the one written first wins."
                ),
                [(first, a), (second, _), ..] => {
                    format!("{first} is more specific ({a}) than {second} and every other match.")
                }
                [] => String::new(),
            },
        }
    }
}
