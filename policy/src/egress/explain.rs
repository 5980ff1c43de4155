//! `af net explain`: every rule that matched a request and why the winner won.

use serde::Serialize;
use thiserror::Error;
use url::Url;

use super::catalogue::Miss;
use super::host::canonicalize;
use super::ports::Ports;
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
    /// A CONNECT's target is not `host[:port]`.
    #[error("{0:?} is not a CONNECT authority such as api.example.com:443")]
    NotAuthority(String),
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

/// One rule that names the request's host but lost on something else.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct MissedRule {
    /// The rule's position in `egress.rules`.
    pub index: usize,
    /// The rule's host pattern as written.
    pub host: String,
    /// The rule's verdict.
    pub mode: Mode,
    /// What it lost on.
    pub lost_on: Miss,
    /// Why, in words.
    pub why: String,
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
    /// The path (empty for a CONNECT, which names none).
    pub path: String,
    /// The verdict.
    pub mode: Mode,
    /// The deciding rule's label, or `default`.
    pub rule: String,
    /// Whether the sidecar opens TLS to this host.
    pub open_tls: bool,
    /// Every rule that matched, most specific first.
    pub matched: Vec<MatchedRule>,
    /// Every rule that names the host but not the rest of the request, in written order.
    pub missed: Vec<MissedRule>,
    /// One sentence on why the winner won.
    pub why: String,
}

/// What is explained: a request, or a CONNECT that names only a host and port.
struct Question {
    host: String,
    port: u16,
    /// The path of a request; `None` for a CONNECT.
    path: Option<String>,
}

impl Question {
    /// `CONNECT host:port` (the port defaults to 443), or `METHOD absolute-url`.
    fn read(method: &str, text: &str) -> Result<Question, UrlError> {
        if method.eq_ignore_ascii_case("CONNECT") {
            return Question::authority(text);
        }
        let parsed = Url::parse(text).map_err(|_| UrlError::NotAbsolute(text.to_owned()))?;
        Ok(Question {
            host: host_of(&parsed).ok_or_else(|| UrlError::NoHost(text.to_owned()))?,
            port: parsed
                .port_or_known_default()
                .ok_or_else(|| UrlError::NoPort(text.to_owned()))?,
            path: Some(parsed.path().to_owned()),
        })
    }

    /// A CONNECT authority, read as the host and port of an `https` URL so the URL crate does
    /// the parsing; anything beyond `host[:port]` is refused.
    fn authority(text: &str) -> Result<Question, UrlError> {
        let not_authority = || UrlError::NotAuthority(text.to_owned());
        let parsed = Url::parse(&format!("https://{text}")).map_err(|_| not_authority())?;
        let bare = parsed.path() == "/"
            && parsed.query().is_none()
            && parsed.fragment().is_none()
            && parsed.username().is_empty()
            && parsed.password().is_none()
            && !text.contains('/');
        if !bare {
            return Err(not_authority());
        }
        Ok(Question {
            host: host_of(&parsed).ok_or_else(not_authority)?,
            port: parsed.port_or_known_default().ok_or_else(not_authority)?,
            path: None,
        })
    }
}

fn host_of(url: &Url) -> Option<String> {
    match url.host()? {
        url::Host::Ipv6(ip) => Some(ip.to_string()),
        host => Some(host.to_string()),
    }
}

impl Catalogue {
    /// Explain how `method url` is decided; for `CONNECT`, `url` is the `host:port` authority.
    ///
    /// A separate walk over every rule, so [`Catalogue::decide`] stays as fast as it is.
    pub fn explain(&self, method: &str, url: &str) -> Result<Explanation, UrlError> {
        let question = Question::read(method, url)?;
        let (host, port) = (question.host.as_str(), question.port);
        let decision = match &question.path {
            Some(path) => self.decide(&Target {
                method,
                host,
                port,
                path,
            }),
            None => self.decide_host(host, port),
        };
        let mut buf = None;
        let canonical =
            canonicalize(host, &mut buf).map_err(|_| UrlError::NoHost(url.to_owned()))?;
        let request = question.path.as_deref().map(|path| (method, path));
        let mut matched = Vec::new();
        let mut missed = Vec::new();
        for i in 0..self.len() {
            let Ok(id) = u32::try_from(i).map(RuleId) else {
                break;
            };
            match self.judge(id, &canonical, port, request) {
                None => {}
                Some(Ok(spec)) => matched.push((id, spec)),
                Some(Err(miss)) => missed.push(self.missed(id, miss, method, port, request)),
            }
        }
        matched.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
        let why = self.why(&decision, &matched, &missed);
        Ok(Explanation {
            method: method.to_owned(),
            host: canonical.as_str().to_owned(),
            port,
            path: question.path.unwrap_or_default(),
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
            missed,
            why,
        })
    }

    fn missed(
        &self,
        id: RuleId,
        lost_on: Miss,
        method: &str,
        port: u16,
        request: Option<(&str, &str)>,
    ) -> MissedRule {
        let rule = self.rule(id);
        let why = match lost_on {
            Miss::Port => match self.compiled(id).ports {
                Ports::Web => format!(
                    "it names no port, so it covers 80 and 443 only; the request goes to {port} \
                     (a rule for {} names it)",
                    with_port(rule.host.trim(), port)
                ),
                ports => format!("it covers {ports}; the request goes to {port}"),
            },
            Miss::Method => format!(
                "{method} is not one of its methods ({})",
                rule.methods.join(", ")
            ),
            Miss::Path => format!(
                "{} is not under any of its paths ({})",
                request.map_or("", |(_, path)| path),
                rule.paths.join(", ")
            ),
            Miss::PerRequest => "it names paths or methods, so it decides each request once TLS \
                                 is opened, not the tunnel"
                .to_owned(),
        };
        MissedRule {
            index: id.index(),
            host: rule.host.clone(),
            mode: rule.mode,
            lost_on,
            why,
        }
    }

    fn why(
        &self,
        decision: &Decision,
        matched: &[(RuleId, super::Specificity)],
        missed: &[MissedRule],
    ) -> String {
        use super::Reason;
        match decision.reason {
            Reason::Default if missed.is_empty() => format!(
                "No rule names this host, so the default ({}) decides.",
                self.default_mode()
            ),
            Reason::Default => format!(
                "{} named the host but not the rest of the request, so the default ({}) decides.",
                rule_list(missed),
                self.default_mode()
            ),
            Reason::Narrowed => format!(
                "{} names paths or methods for this host and no rule takes it whole, so its TLS is \
                 opened and each request inside is decided on its own; a request outside them \
                 goes to the default ({}).",
                decision.rule.map_or_else(String::new, |r| r.to_string()),
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

/// `rules[1]`, `rules[1] and rules[3]`, `rules[1], rules[2] and rules[3]`.
/// `host:port`, an IPv6 address in brackets.
fn with_port(host: &str, port: u16) -> String {
    if host.contains(':') && !host.starts_with('[') {
        format!("[{host}]:{port}")
    } else {
        format!("{host}:{port}")
    }
}

fn rule_list(rules: &[MissedRule]) -> String {
    let names: Vec<_> = rules
        .iter()
        .map(|r| format!("rules[{}]", r.index))
        .collect();
    match names.split_last() {
        Some((last, [])) => last.clone(),
        Some((last, rest)) => format!("{} and {last}", rest.join(", ")),
        None => String::new(),
    }
}
