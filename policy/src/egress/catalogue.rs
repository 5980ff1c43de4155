//! The compiled catalogue: rules indexed by host so one decision costs a few hash lookups and
//! allocates nothing.

use std::collections::HashMap;
use std::fmt;
use std::net::IpAddr;
use std::sync::Arc;

use foldhash::fast::RandomState;
use serde::Serialize;

use super::host::{CanonicalHost, HostBuf, canonicalize, ip_literal, last_dot};
use super::pattern::{
    HostPattern, is_canonical_path, parse_host_port, parse_method, parse_path, path_has_prefix,
    path_only,
};
use super::ports::Ports;
use super::rate::RateLimit;
use super::{EgressSpec, Mode, RuleSpec};

/// The position of a rule in `egress.rules`, as written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct RuleId(pub u32);

impl RuleId {
    /// The index into `egress.rules`.
    pub fn index(self) -> usize {
        self.0 as usize
    }
}

impl fmt::Display for RuleId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "rules[{}]", self.0)
    }
}

/// A request as the catalogue sees it.
#[derive(Debug, Clone, Copy)]
pub struct Target<'a> {
    /// The HTTP method, any case.
    pub method: &'a str,
    /// The host: a name in any case, with or without a trailing dot, or an IP literal.
    pub host: &'a str,
    /// The port the request goes to (from the listener or the CONNECT authority).
    pub port: u16,
    /// The request path; a query string is ignored.
    pub path: &'a str,
}

/// Why a decision came out as it did, when no rule explains it on its own.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reason {
    /// The winning rule decided.
    Rule,
    /// No rule matched; the catalogue's default decided.
    Default,
    /// A host decided before any request (a CONNECT, an SNI) that no rule names as a whole, but
    /// that a rule with `paths` or `methods` names: that rule decided to open it, and each
    /// request inside is decided on its own.
    Narrowed,
    /// The host cannot be a host name (empty, too long, not valid IDN): refused.
    InvalidHost,
    /// The path has dot segments or needless escapes while a path rule applies to the host:
    /// refused, because the server may read it as a path the rule never saw.
    NonCanonicalPath,
}

impl Reason {
    /// The name used in the journal.
    pub const fn as_str(self) -> &'static str {
        match self {
            Reason::Rule => "rule",
            Reason::Default => "default",
            Reason::Narrowed => "narrowed",
            Reason::InvalidHost => "invalid-host",
            Reason::NonCanonicalPath => "non-canonical-path",
        }
    }
}

/// The verdict for one request or one host.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Decision {
    /// What to do with the request.
    pub mode: Mode,
    /// The rule that decided, or `None` for the default and for refusals with a [`Reason`].
    pub rule: Option<RuleId>,
    /// Whether the sidecar must open TLS to this host to decide or serve its requests.
    pub open_tls: bool,
    /// Why the decision came out this way.
    pub reason: Reason,
}

/// A problem with one rule, found while compiling the catalogue.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RuleProblem {
    /// Index of the rule in `egress.rules`.
    pub rule: usize,
    /// The field at fault (`host`, `paths`, `methods`, `rate_limit`, ...).
    pub field: &'static str,
    /// One sentence describing the problem.
    pub message: String,
}

/// How specific a match is. Fields compare in order: the host first, then the port, then the
/// path, then the methods. A higher value wins; equal values go to the rule written first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Default)]
pub struct Specificity {
    /// 2 for an exact host or IP, 1 for a wildcard, 0 for `*`.
    pub host_class: u8,
    /// Labels written out literally in the host pattern.
    pub literal_labels: u8,
    /// True when the pattern has no leading `*.` (it matches a fixed number of labels).
    pub bounded: bool,
    /// True when the rule names a port.
    pub port: bool,
    /// Length of the path prefix that matched (0 when the rule has no paths).
    pub path_len: u16,
    /// True when the rule names methods.
    pub methods: bool,
}

impl Specificity {
    /// The same order as one integer: each field in bits of its own (29 in all), the first
    /// field highest, so a decision compares candidates with one instruction instead of six
    /// fields.
    const fn rank(self) -> u32 {
        (self.host_class as u32) << 27
            | (self.literal_labels as u32) << 19
            | (self.bounded as u32) << 18
            | (self.port as u32) << 17
            | (self.path_len as u32) << 1
            | self.methods as u32
    }
}

impl fmt::Display for Specificity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let host = match self.host_class {
            2 => "exact host",
            1 => "wildcard host",
            _ => "any host",
        };
        write!(f, "{host}, {} literal labels", self.literal_labels)?;
        if self.port {
            f.write_str(", port")?;
        }
        if self.path_len > 0 {
            write!(f, ", path of {} chars", self.path_len)?;
        }
        if self.methods {
            f.write_str(", methods")?;
        }
        Ok(())
    }
}

/// One rule, compiled.
#[derive(Debug)]
pub(crate) struct CompiledRule {
    pub(crate) spec: RuleSpec,
    /// Shared, so a record of the decision holds it without a copy.
    pub(crate) label: Arc<str>,
    pub(crate) pattern: HostPattern,
    pub(crate) ports: Ports,
    pub(crate) paths: Box<[Box<str>]>,
    pub(crate) methods: Box<[Box<str>]>,
    pub(crate) rate_limit: Option<RateLimit>,
    /// The specificity of the rule's host and port part.
    host_specificity: Specificity,
    /// The most specific this rule can be for any request.
    max_specificity: Specificity,
    /// `host_specificity` and `max_specificity` as [`Specificity::rank`]s.
    host_rank: u32,
    max_rank: u32,
}

impl CompiledRule {
    fn is_host_level(&self) -> bool {
        self.paths.is_empty() && self.methods.is_empty()
    }

    /// The rank of a match on `path` and `method` (as [`Specificity::rank`]), or `None` when
    /// they do not match.
    fn request_rank(&self, method: &str, path: &str) -> Option<u32> {
        if self.is_host_level() {
            return Some(self.host_rank);
        }
        self.request_specificity(method, path)
            .map(Specificity::rank)
    }

    /// The specificity of a match on `path` and `method`, or `None` when they do not match.
    fn request_specificity(&self, method: &str, path: &str) -> Option<Specificity> {
        if !self.methods.is_empty() && !self.methods.iter().any(|m| m.eq_ignore_ascii_case(method))
        {
            return None;
        }
        let path_len = if self.paths.is_empty() {
            0
        } else {
            self.paths
                .iter()
                .filter(|prefix| path_has_prefix(path, prefix))
                .map(|p| path_weight(p))
                .max()?
        };
        Some(Specificity {
            path_len,
            methods: !self.methods.is_empty(),
            ..self.host_specificity
        })
    }
}

fn path_weight(prefix: &str) -> u16 {
    // Every path rule weighs at least 1, so `/` still beats no path at all.
    u16::try_from(prefix.len()).unwrap_or(u16::MAX).max(1)
}

type Index<K> = HashMap<K, Vec<u32>, RandomState>;

/// The egress catalogue, compiled for deciding.
#[derive(Debug)]
pub struct Catalogue {
    rules: Vec<CompiledRule>,
    default_mode: Mode,
    allow_ipv6: bool,
    exact: Index<Box<str>>,
    ips: Index<IpAddr>,
    suffixes: Index<Box<str>>,
    /// Bit `n` is set when some wildcard suffix has `n` labels (63 stands for 63 or more), so a
    /// host is looked up only under suffix lengths that exist.
    suffix_label_counts: u64,
    /// The best host-level `*` rule without a port that covers every port (a block): it
    /// matches every request alike, so a decision starts from it instead of visiting it.
    any_winner: Candidate,
    /// The same for the web's ports ([`Ports::Web`]): where a request to 80 or 443 starts.
    any_web_winner: Candidate,
    /// The other `*` rules: visited for every host, names and addresses alike.
    any: Vec<u32>,
    /// Middle-star patterns: checked against every host name. Keep them few.
    scanned: Vec<u32>,
    /// `default`, the label of a decision no rule made, shared as the rules' labels are.
    default_label: Arc<str>,
}

/// A candidate rule as one integer: its [`Specificity::rank`] for this request in the high half
/// and the complement of its index in the low half, so the larger candidate wins (on equal
/// ranks the rule written first) and 0 is no candidate (rule indices stay below `u32::MAX`).
/// One compare where an `Option<(rank, index)>` took a branch per field.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Default)]
struct Candidate(u64);

impl Candidate {
    const NONE: Candidate = Candidate(0);

    fn new(rank: u32, index: u32) -> Candidate {
        Candidate(u64::from(rank) << 32 | u64::from(!index))
    }

    /// The rule's index, or `None` for [`Candidate::NONE`].
    fn index(self) -> Option<u32> {
        (self != Candidate::NONE).then_some(!(self.0 as u32))
    }
}

/// The best match found so far in one pass over the candidates.
#[derive(Default)]
struct Best {
    /// The winner for the whole request.
    request: Candidate,
    /// The winner among host-level rules (no paths, no methods).
    host: Candidate,
    /// The most specific path or method rule that matched the host.
    narrowing: Candidate,
    /// Whether a path or method rule applies to this host at all.
    host_has_path_rules: bool,
}

impl Catalogue {
    /// Compile a catalogue, reporting every rule that cannot be used.
    pub fn compile(spec: &EgressSpec) -> Result<Catalogue, Vec<RuleProblem>> {
        let mut problems = Vec::new();
        let mut rules = Vec::with_capacity(spec.rules.len());
        for (index, rule) in spec.rules.iter().enumerate() {
            match compile_rule(index, rule) {
                Ok(rule) => rules.push(rule),
                Err(mut found) => problems.append(&mut found),
            }
        }
        if !problems.is_empty() {
            return Err(problems);
        }
        let mut catalogue = Catalogue {
            rules,
            default_mode: spec.default_mode(),
            allow_ipv6: spec.allow_ipv6,
            exact: Index::default(),
            ips: Index::default(),
            suffixes: Index::default(),
            suffix_label_counts: 0,
            any_winner: Candidate::NONE,
            any_web_winner: Candidate::NONE,
            any: Vec::new(),
            scanned: Vec::new(),
            default_label: Arc::from("default"),
        };
        for (index, rule) in catalogue.rules.iter().enumerate() {
            let index = u32::try_from(index).unwrap_or(u32::MAX);
            match &rule.pattern {
                HostPattern::Exact(host) => {
                    catalogue.exact.entry(host.clone()).or_default().push(index)
                }
                HostPattern::Ip(ip) => catalogue.ips.entry(*ip).or_default().push(index),
                HostPattern::Suffix(suffix) => {
                    catalogue.suffix_label_counts |= 1 << label_count(suffix).min(63);
                    catalogue
                        .suffixes
                        .entry(suffix.clone())
                        .or_default()
                        .push(index)
                }
                HostPattern::Any if rule.is_host_level() && !rule.ports.named() => {
                    let candidate = Candidate::new(rule.host_rank, index);
                    let winner = match rule.ports {
                        Ports::Every => &mut catalogue.any_winner,
                        _ => &mut catalogue.any_web_winner,
                    };
                    *winner = (*winner).max(candidate);
                }
                HostPattern::Any => catalogue.any.push(index),
                HostPattern::Labels { .. } => catalogue.scanned.push(index),
            }
        }
        Ok(catalogue)
    }

    /// Decide one request. Allocates nothing for an ASCII host.
    pub fn decide(&self, target: &Target<'_>) -> Decision {
        let mut buf: HostBuf = None;
        let Ok(host) = canonicalize(target.host, &mut buf) else {
            return self.refusal(Reason::InvalidHost);
        };
        let best = self.scan(&host, target.port, Some((target.method, target.path)));
        if best.host_has_path_rules && !is_canonical_path(path_only(target.path)) {
            return self.refusal(Reason::NonCanonicalPath);
        }
        self.conclude(best.request, &best)
    }

    /// Decide a host before any request is seen: a CONNECT authority or a TLS SNI.
    pub fn decide_host(&self, host: &str, port: u16) -> Decision {
        let mut buf: HostBuf = None;
        let Ok(host) = canonicalize(host, &mut buf) else {
            return self.refusal(Reason::InvalidHost);
        };
        let best = self.scan(&host, port, None);
        match (best.host.index(), best.narrowing.index()) {
            // No rule takes the host as a whole, but one takes some of its requests: the host
            // is that rule's, which opens it, not the default's.
            (None, Some(index)) => Decision {
                mode: self.rules[index as usize].spec.mode,
                rule: Some(RuleId(index)),
                open_tls: true,
                reason: Reason::Narrowed,
            },
            _ => self.conclude(best.host, &best),
        }
    }

    fn refusal(&self, reason: Reason) -> Decision {
        Decision {
            mode: Mode::Block,
            rule: None,
            open_tls: false,
            reason,
        }
    }

    fn conclude(&self, winner: Candidate, best: &Best) -> Decision {
        let host_mode = best
            .host
            .index()
            .map_or(self.default_mode, |i| self.rules[i as usize].spec.mode);
        // A path or method rule can overturn the host's verdict for some requests only when it
        // could outrank the host-level winner; then the host must be opened to decide.
        let narrowed = best.narrowing > best.host;
        let open_tls = host_mode.needs_interception() || narrowed;
        match winner.index() {
            Some(index) => Decision {
                mode: self.rules[index as usize].spec.mode,
                rule: Some(RuleId(index)),
                open_tls,
                reason: Reason::Rule,
            },
            None => Decision {
                mode: self.default_mode,
                rule: None,
                open_tls,
                reason: Reason::Default,
            },
        }
    }

    /// One pass over every rule that can match `host`: exact names or addresses, each suffix
    /// at a label boundary, the `*` rules, then the scanned patterns.
    fn scan(&self, host: &CanonicalHost<'_>, port: u16, request: Option<(&str, &str)>) -> Best {
        let any = if Ports::Web.covers(port) {
            self.any_winner.max(self.any_web_winner)
        } else {
            self.any_winner
        };
        let mut best = Best {
            request: match request {
                Some(_) => any,
                None => Candidate::NONE,
            },
            host: any,
            ..Best::default()
        };
        let mut visit = |index: u32| self.visit(index, port, request, &mut best);
        let name = host.as_str();
        if let Some(ip) = host.maybe_ip.then(|| ip_literal(name)).flatten() {
            // Middle-star patterns never match an address.
            for &index in self.ips.get(&ip).map_or(&[][..], Vec::as_slice) {
                visit(index);
            }
            for &index in &self.any {
                visit(index);
            }
            return best;
        }
        // Plain loops: the iterator chains (`into_iter().flatten()`) cost a fold per lookup.
        for &index in self.exact.get(name).map_or(&[][..], Vec::as_slice) {
            visit(index);
        }
        // Each proper suffix (1 to labels - 1 labels), from the shortest, looked up only under
        // label counts some rule has; the walk stops once no longer suffix can match.
        let mut wanted = self.suffix_label_counts & ((1u64 << host.labels.min(63)) - 1);
        let mut labels = 0;
        let mut end_of_label = name.len();
        while wanted != 0 {
            let Some(dot) = last_dot(&name.as_bytes()[..end_of_label]) else {
                break;
            };
            labels += 1;
            let bit = 1 << labels.min(63);
            if wanted & bit != 0 {
                if labels < 63 {
                    wanted &= !bit;
                }
                for &index in self
                    .suffixes
                    .get(&name[dot + 1..])
                    .map_or(&[][..], Vec::as_slice)
                {
                    visit(index);
                }
            }
            end_of_label = dot;
        }
        for &index in &self.any {
            visit(index);
        }
        for &index in &self.scanned {
            if self.rules[index as usize].pattern.matches_name(name) {
                visit(index);
            }
        }
        best
    }

    /// Inlined into the scan's loops: as a call (registers saved, `Best` through memory) it
    /// cost twenty instructions a visit.
    #[inline(always)]
    fn visit(&self, index: u32, port: u16, request: Option<(&str, &str)>, best: &mut Best) {
        let rule = &self.rules[index as usize];
        if !rule.ports.covers(port) {
            return;
        }
        if rule.is_host_level() {
            best.host = best.host.max(Candidate::new(rule.host_rank, index));
        } else {
            best.host_has_path_rules = true;
            best.narrowing = best.narrowing.max(Candidate::new(rule.max_rank, index));
        }
        if let Some((method, path)) = request
            && let Some(rank) = rule.request_rank(method, path)
        {
            best.request = best.request.max(Candidate::new(rank, index));
        }
    }

    /// The verdict for requests no rule matches.
    pub fn default_mode(&self) -> Mode {
        self.default_mode
    }

    /// Whether services may reach IPv6 addresses at all.
    pub fn allow_ipv6(&self) -> bool {
        self.allow_ipv6
    }

    /// Whether a forwarding rule names exactly this IP address for this port. Only such a rule
    /// lets the address guard dial an address it would otherwise refuse.
    pub fn names_ip(&self, ip: IpAddr, port: u16) -> bool {
        let ip = ip.to_canonical();
        self.ips.get(&ip).into_iter().flatten().any(|&i| {
            let rule = &self.rules[i as usize];
            rule.spec.mode.forwards() && rule.ports.covers(port)
        })
    }

    /// The rule as written.
    pub fn rule(&self, id: RuleId) -> &RuleSpec {
        &self.rules[id.index()].spec
    }

    /// The ports the rule covers.
    pub fn ports(&self, id: RuleId) -> Ports {
        self.rules[id.index()].ports
    }

    /// The rule's rate limit, parsed.
    pub fn rate_limit(&self, id: RuleId) -> Option<RateLimit> {
        self.rules[id.index()].rate_limit
    }

    /// A short label for journals and headers: `rules[2] api.example.com`, or `default`.
    pub fn rule_label(&self, id: Option<RuleId>) -> &str {
        self.label(id)
    }

    /// [`Catalogue::rule_label`], shared: what a journal record keeps, without a copy per
    /// request.
    pub fn shared_rule_label(&self, id: Option<RuleId>) -> Arc<str> {
        self.label(id).clone()
    }

    fn label(&self, id: Option<RuleId>) -> &Arc<str> {
        id.map_or(&self.default_label, |id| &self.rules[id.index()].label)
    }

    /// Number of rules.
    pub fn len(&self) -> usize {
        self.rules.len()
    }

    /// Whether the catalogue has no rules (everything gets the default).
    pub fn is_empty(&self) -> bool {
        self.rules.is_empty()
    }

    /// The rules in deciding order: most specific first, ties in written order.
    pub fn rules_in_order(&self) -> Vec<(RuleId, &RuleSpec, Specificity)> {
        let mut ordered: Vec<_> = self
            .rules
            .iter()
            .enumerate()
            .map(|(i, rule)| {
                let id = RuleId(u32::try_from(i).unwrap_or(u32::MAX));
                (id, &rule.spec, rule.max_specificity)
            })
            .collect();
        ordered.sort_by(|a, b| b.2.cmp(&a.2).then(a.0.cmp(&b.0)));
        ordered
    }

    pub(crate) fn compiled(&self, id: RuleId) -> &CompiledRule {
        &self.rules[id.index()]
    }

    /// How rule `id` judges a request to `host:port` (`request` is its method and path, `None`
    /// for a CONNECT or an SNI): `None` when the rule does not name the host, else its
    /// specificity or what it lost on. The explanation's walk, never the deciding one.
    pub(crate) fn judge(
        &self,
        id: RuleId,
        host: &CanonicalHost<'_>,
        port: u16,
        request: Option<(&str, &str)>,
    ) -> Option<Result<Specificity, Miss>> {
        let rule = self.compiled(id);
        let host = host.as_str();
        let host_matches = match ip_literal(host) {
            Some(ip) => rule.pattern.matches_ip(ip),
            None => rule.pattern.matches_name(host),
        };
        if !host_matches {
            return None;
        }
        if !rule.ports.covers(port) {
            return Some(Err(Miss::Port));
        }
        let Some((method, path)) = request else {
            return Some(if rule.is_host_level() {
                Ok(rule.host_specificity)
            } else {
                Err(Miss::PerRequest)
            });
        };
        if !rule.methods.is_empty() && !rule.methods.iter().any(|m| m.eq_ignore_ascii_case(method))
        {
            return Some(Err(Miss::Method));
        }
        Some(rule.request_specificity(method, path).ok_or(Miss::Path))
    }
}

/// Why a rule that names the request's host still did not match it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Miss {
    /// The rule names another port.
    Port,
    /// The rule names methods and the request's is not one of them.
    Method,
    /// The rule names paths and none is a prefix of the request's.
    Path,
    /// A host-only question (CONNECT, SNI): the rule names paths or methods, so it decides
    /// each request once TLS is opened, not the tunnel.
    PerRequest,
}

/// Whether `host` (a rule's pattern) names a provider whose requests carry a signature made
/// with the credential rather than the credential itself: AWS (Signature V4).
fn signs_requests(host: &str) -> bool {
    let host = host.trim_end_matches('.').to_ascii_lowercase();
    let host = host.split(':').next().unwrap_or_default();
    ["amazonaws.com", "amazonaws.com.cn"]
        .iter()
        .any(|domain| host == *domain || host.ends_with(&format!(".{domain}")))
}

fn label_count(name: &str) -> usize {
    name.bytes().filter(|&b| b == b'.').count() + 1
}

fn compile_rule(index: usize, spec: &RuleSpec) -> Result<CompiledRule, Vec<RuleProblem>> {
    let mut problems = Vec::new();
    let mut problem = |field: &'static str, message: String| {
        problems.push(RuleProblem {
            rule: index,
            field,
            message,
        })
    };
    let host = parse_host_port(&spec.host)
        .map_err(|message| problem("host", message))
        .ok();
    let paths: Vec<Box<str>> = spec
        .paths
        .iter()
        .filter_map(|p| parse_path(p).map_err(|m| problem("paths", m)).ok())
        .collect();
    let methods: Vec<Box<str>> = spec
        .methods
        .iter()
        .filter_map(|m| parse_method(m).map_err(|e| problem("methods", e)).ok())
        .collect();
    let rate_limit = match &spec.rate_limit {
        None => None,
        Some(text) => text
            .parse::<RateLimit>()
            .map_err(|e| problem("rate_limit", e.to_string()))
            .ok(),
    };
    if spec.rate_limit.is_some() && !spec.mode.forwards() {
        problem(
            "rate_limit",
            format!(
                "a rate limit applies to allow and sandbox rules, not to a {} rule",
                spec.mode
            ),
        );
    }
    if spec.mode == Mode::Sandbox && signs_requests(&spec.host) {
        problem(
            "mode",
            format!(
                "{} signs every request with the caller's secret (AWS Signature V4), so sandbox cannot swap in a test credential; use capture (SES is answered as the provider would) or allow with a test account's keys",
                spec.host
            ),
        );
    }
    match (host, problems.is_empty()) {
        (Some(host), true) => {
            let pattern = host.pattern;
            let host_specificity = Specificity {
                host_class: match pattern {
                    HostPattern::Exact(_) | HostPattern::Ip(_) => 2,
                    HostPattern::Suffix(_) | HostPattern::Labels { .. } => 1,
                    HostPattern::Any => 0,
                },
                literal_labels: pattern.literal_labels(),
                bounded: !matches!(
                    pattern,
                    HostPattern::Any
                        | HostPattern::Suffix(_)
                        | HostPattern::Labels {
                            open_start: true,
                            ..
                        }
                ),
                port: host.port.is_some(),
                ..Specificity::default()
            };
            let max_specificity = Specificity {
                path_len: paths.iter().map(|p| path_weight(p)).max().unwrap_or(0),
                methods: !methods.is_empty(),
                ..host_specificity
            };
            Ok(CompiledRule {
                host_rank: host_specificity.rank(),
                max_rank: max_specificity.rank(),
                max_specificity,
                label: format!("rules[{index}] {}", spec.host.trim()).into(),
                spec: spec.clone(),
                pattern,
                ports: Ports::of(host.port, spec.mode),
                paths: paths.into(),
                methods: methods.into(),
                rate_limit,
                host_specificity,
            })
        }
        _ => Err(problems),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Rules the property test draws from: every kind of pattern, `*` with and without a
    /// port, paths and methods, and ties.
    const POOL: &[(&str, &[&str], &[&str])] = &[
        ("*", &[], &[]),
        ("*", &["/v1"], &[]),
        ("*", &[], &["POST"]),
        ("*:8443", &[], &[]),
        ("api.example.com", &[], &[]),
        ("api.example.com:443", &["/v1/users"], &[]),
        ("*.example.com", &[], &[]),
        ("*.a.example.com", &["/"], &["GET"]),
        ("*.com", &[], &[]),
        ("x.*.example.com", &[], &[]),
        ("*.b.*.com", &[], &[]),
        ("203.0.113.7", &[], &[]),
        ("[::1]:8443", &[], &[]),
    ];
    const HOSTS: &[&str] = &[
        "api.example.com",
        "API.Example.COM.",
        "a.example.com",
        "x.a.example.com",
        "deep.x.b.y.com",
        "example.com",
        "com",
        "unknown.test",
        "203.0.113.7",
        "::1",
        "[::1]",
    ];

    fn compile(picks: &[(usize, usize)]) -> Catalogue {
        let rules = picks
            .iter()
            .map(|&(pick, mode)| {
                let (host, paths, methods) = POOL[pick % POOL.len()];
                RuleSpec {
                    paths: paths.iter().map(|p| (*p).to_owned()).collect(),
                    methods: methods.iter().map(|m| (*m).to_owned()).collect(),
                    ..RuleSpec::new(host, Mode::ALL[mode % Mode::ALL.len()])
                }
            })
            .collect();
        Catalogue::compile(&EgressSpec {
            default: Some(Mode::Block),
            allow_ipv6: true,
            upstream_roots: Vec::new(),
            rules,
        })
        .unwrap()
    }

    #[test]
    fn a_shared_label_is_the_catalogues_own_not_a_copy() {
        let catalogue = compile(&[(4, 0), (6, 1)]);
        let decided = catalogue.decide_host("a.example.com", 443);
        let label = catalogue.shared_rule_label(decided.rule);
        assert_eq!(&*label, "rules[1] *.example.com");
        assert_eq!(&*label, catalogue.rule_label(decided.rule));
        assert!(Arc::ptr_eq(
            &label,
            &catalogue.shared_rule_label(decided.rule)
        ));
        let default = catalogue.shared_rule_label(None);
        assert_eq!(
            (&*default, catalogue.rule_label(None)),
            ("default", "default")
        );
        assert!(Arc::ptr_eq(&default, &catalogue.shared_rule_label(None)));
    }

    /// The winner by brute force: every rule judged on its own, the most specific first,
    /// ties to the rule written first.
    fn winner_by_judging(
        catalogue: &Catalogue,
        host: &str,
        port: u16,
        request: Option<(&str, &str)>,
    ) -> Option<RuleId> {
        let mut buf = None;
        let host = canonicalize(host, &mut buf).unwrap();
        (0..catalogue.len())
            .map(|i| RuleId(u32::try_from(i).unwrap()))
            .filter_map(|id| match catalogue.judge(id, &host, port, request) {
                Some(Ok(specificity)) => Some((specificity, id)),
                _ => None,
            })
            .min_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)))
            .map(|(_, id)| id)
    }

    proptest::proptest! {
        #[test]
        fn the_indexed_decision_agrees_with_judging_every_rule(
            picks in proptest::collection::vec((0..POOL.len(), 0..Mode::ALL.len()), 0..8),
            host in proptest::sample::select(HOSTS),
            port in proptest::sample::select(&[443u16, 8443][..]),
            method in proptest::sample::select(&["GET", "post"][..]),
            path in proptest::sample::select(&["/", "/v1", "/v1/users/42", "/other"][..]),
        ) {
            let catalogue = compile(&picks);
            let decision = catalogue.decide(&Target { method, host, port, path });
            let expected = winner_by_judging(&catalogue, host, port, Some((method, path)));
            proptest::prop_assert_eq!(decision.rule, expected);
            let decision = catalogue.decide_host(host, port);
            let whole = winner_by_judging(&catalogue, host, port, None);
            if decision.reason == Reason::Narrowed {
                // No rule takes the host whole; the one named takes some of its requests.
                proptest::prop_assert_eq!(whole, None);
                let id = decision.rule.unwrap();
                let mut buf = None;
                let canonical = canonicalize(host, &mut buf).unwrap();
                let judged = catalogue.judge(id, &canonical, port, None);
                proptest::prop_assert!(matches!(judged, Some(Err(Miss::PerRequest))), "{judged:?}");
                proptest::prop_assert!(decision.open_tls);
            } else {
                proptest::prop_assert_eq!(decision.rule, whole);
            }
        }
    }
}
