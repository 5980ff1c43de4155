//! The one place a request becomes a verdict and a journal record.
//!
//! Every listener describes what it saw as an [`Ask`]; [`decide_tunnel`] (a connection, on its
//! host) or [`decide_request`] (an HTTP request) asks the catalogue and returns what to do and a
//! [`Ticket`] that the caller closes exactly once with how the request ended. Closing the ticket
//! writes the record. A tunnel whose host needs TLS opened is refused with AF-NET-012 when the
//! sidecar has no environment CA: it is never allowed instead.

pub(crate) mod loops;
pub(crate) mod rate;
pub(crate) mod tripwire;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Instant;

use af_policy::error::{ErrorCode, codes};
use http::StatusCode;

use crate::answer::refusal::Refusal;
use crate::arrive::intercept::Interception;
use crate::metrics::{Outcome, Via};
use crate::record::journal::{DecisionRecord, Entry};
use crate::state::State;
use af_policy::egress::{Decision, Mode, Reason, RuleId, Target};

/// What a listener saw.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Ask<'a> {
    /// Which listener.
    pub via: Via,
    /// The client.
    pub client: SocketAddr,
    /// Method (`CONNECT` for a proxy tunnel, empty for a TLS connection).
    pub method: &'a str,
    /// Host as received; normalised here.
    pub host: &'a str,
    /// Port, from the listener or the CONNECT authority.
    pub port: u16,
    /// Path with query (empty for tunnels).
    pub path: &'a str,
    /// Whether this is a tunnel (CONNECT or TLS) decided on the host alone.
    pub tunnel: bool,
}

impl Ask<'_> {
    /// The scheme the client used: `https` inside an intercepted connection.
    pub(crate) fn scheme(&self) -> &'static str {
        if self.via == Via::Intercept {
            "https"
        } else {
            "http"
        }
    }
}

/// The host as the catalogue compares it (lower-case, no trailing dot, IDN in punycode, no
/// IPv6 brackets); a host the catalogue cannot read is kept lower-cased for the record.
pub(crate) fn normalize_host(host: &str) -> String {
    let bare = host.trim_start_matches('[').trim_end_matches(']');
    match af_policy::egress::normalize_host(bare) {
        Ok(h) => h.into_owned(),
        Err(_) => bare.trim_end_matches('.').to_lowercase(),
    }
}

/// `host:port` as a reader writes it: an IPv6 host in brackets (`[::1]:443`).
#[derive(Debug, Clone, Copy)]
pub(crate) struct HostPort<'a>(pub &'a str, pub u16);

impl std::fmt::Display for HostPort<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let HostPort(host, port) = *self;
        if host.contains(':') {
            write!(f, "[{host}]:{port}")
        } else {
            write!(f, "{host}:{port}")
        }
    }
}

/// The URL a request was for: `scheme://host[:port]path`, the port shown unless it is the
/// scheme's default, the path redacted. A tunnel is `https://host[:port]/`.
pub(crate) fn request_url(ask: &Ask<'_>, host: &str) -> String {
    let (scheme, default_port, path) = if ask.tunnel {
        ("https", 443, "/".into())
    } else {
        let default_port = if ask.via == Via::Intercept { 443 } else { 80 };
        (ask.scheme(), default_port, tripwire::redact_path(ask.path))
    };
    let authority = HostPort(host, ask.port).to_string();
    let authority = if ask.port == default_port {
        authority
            .rsplit_once(':')
            .map_or(authority.as_str(), |(h, _)| h)
    } else {
        authority.as_str()
    };
    format!("{scheme}://{authority}{path}")
}

/// The `af net explain` command line for a request.
pub(crate) fn explain_command(ask: &Ask<'_>, host: &str) -> String {
    let method = if ask.method.is_empty() || ask.tunnel {
        "GET"
    } else {
        ask.method
    };
    format!("af net explain {method} {}", request_url(ask, host))
}

/// What to do with a connection decided on its host (a CONNECT authority or a TLS SNI).
pub(crate) enum TunnelVerdict {
    /// Refuse it with this answer.
    Refuse(Refusal),
    /// Dial and copy bytes untouched.
    Tunnel,
    /// Open its TLS with this interception and decide each request inside.
    Intercept(Arc<Interception>),
}

/// How to serve an HTTP request the catalogue did not block.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Serve {
    /// Forward it (allow).
    Forward,
    /// Forward it with the rule's test credential (sandbox).
    Sandbox,
    /// Answer it in the sidecar (mock, capture or synth).
    Locally(Mode),
}

/// Decide a connection on its host: the ticket to close, and what to do.
pub(crate) fn decide_tunnel(state: &Arc<State>, ask: &Ask<'_>) -> (Ticket, TunnelVerdict) {
    let host = normalize_host(ask.host);
    let decision = state.catalogue.decide_host(&host, ask.port);
    let label = state.catalogue.rule_label(decision.rule).to_owned();
    // A tunnel whose host needs TLS opened is intercepted even when the host's own verdict is
    // block: a path or method rule may allow some requests inside it.
    let verdict = if decision.open_tls {
        match &state.intercept {
            Some(interception) => TunnelVerdict::Intercept(interception.clone()),
            None => TunnelVerdict::Refuse(unserved(ask, &host, &label, decision.mode)),
        }
    } else if decision.mode == Mode::Block {
        TunnelVerdict::Refuse(blocked(ask, &host, &label, decision.reason))
    } else {
        TunnelVerdict::Tunnel
    };
    let ticket = Ticket::decided(state, ask, host, &decision, label);
    // A tunnel takes its rule's rate-limit place when it is about to be dialled.
    let verdict = match verdict {
        TunnelVerdict::Tunnel => match within_rate_limit(state, &ticket) {
            Ok(()) => TunnelVerdict::Tunnel,
            Err(refusal) => TunnelVerdict::Refuse(*refusal),
        },
        other => other,
    };
    (ticket, verdict)
}

/// Decide an HTTP request on its host, port, method and path: the ticket to close, and how to
/// serve it or the refusal.
pub(crate) fn decide_request(
    state: &Arc<State>,
    ask: &Ask<'_>,
) -> (Ticket, Result<Serve, Refusal>) {
    let host = normalize_host(ask.host);
    let decision = state.catalogue.decide(&Target {
        method: ask.method,
        host: &host,
        port: ask.port,
        path: ask.path,
    });
    let label = state.catalogue.rule_label(decision.rule).to_owned();
    let verdict = match decision.mode {
        Mode::Block => Err(blocked(ask, &host, &label, decision.reason)),
        Mode::Allow => Ok(Serve::Forward),
        Mode::Sandbox => Ok(Serve::Sandbox),
        mode => Ok(Serve::Locally(mode)),
    };
    (Ticket::decided(state, ask, host, &decision, label), verdict)
}

/// Take a place under the ticket's rule's `rate_limit` for a request (or tunnel) about to be
/// forwarded, or the refusal when the limit is reached. Called last, once nothing else can
/// refuse it, so a request that never leaves takes no place.
pub(crate) fn within_rate_limit(state: &State, ticket: &Ticket) -> Result<(), Box<Refusal>> {
    let Err(wait) = state.rates.admit(ticket.rule) else {
        return Ok(());
    };
    let label = ticket.rule_label().unwrap_or("default");
    let limit = ticket
        .rule
        .and_then(|id| state.catalogue.rate_limit(id))
        .map_or_else(String::new, |rate| format!(" of {rate}"));
    let secs = (wait.as_secs_f64().ceil() as u64).max(1);
    Err(Box::new(Refusal {
        rule: Some(label.to_owned()),
        retry_after_secs: Some(secs),
        ..Refusal::new(
            StatusCode::TOO_MANY_REQUESTS,
            &codes::NET_RATE_LIMITED,
            "rate_limited",
            format!(
                "A request to {} went past the rate limit{limit} of {label} and was not forwarded",
                HostPort(ticket.host(), ticket.record.port)
            ),
        )
        .with_next(format!(
            "Retry in {secs} s, or raise rate_limit on {label} in the manifest."
        ))
    }))
}

/// The refusal of a tunnel that needs TLS opened when the sidecar has no environment CA.
fn unserved(ask: &Ask<'_>, host: &str, label: &str, mode: Mode) -> Refusal {
    let why = if mode.needs_interception() {
        format!("its mode is {mode}")
    } else {
        "its rule limits paths or methods".to_owned()
    };
    Refusal {
        rule: Some(label.to_owned()),
        ..Refusal::new(
            StatusCode::FORBIDDEN,
            &codes::NET_MODE_UNSERVED,
            "mode_unserved",
            format!(
                "{} was refused by {label} because {why}, which needs TLS interception, and this sidecar has no environment CA",
                HostPort(host, ask.port)
            ),
        )
        .with_next("Give the sidecar a tls: section (af up does), or set the host to allow.")
    }
}

/// The refusal of a request or connection the catalogue blocks.
fn blocked(ask: &Ask<'_>, host: &str, label: &str, reason: Reason) -> Refusal {
    let explain = explain_command(ask, host);
    let what = if ask.tunnel {
        format!("A connection to {}", HostPort(host, ask.port))
    } else {
        format!("{} {}", ask.method, request_url(ask, host))
    };
    let by = match reason {
        Reason::InvalidHost => "because its host is not a valid host name".to_owned(),
        Reason::NonCanonicalPath => {
            "because its path has dot segments or needless escapes where a path rule applies"
                .to_owned()
        }
        Reason::Rule | Reason::Default => format!("by {label}"),
    };
    Refusal {
        decision: "block",
        rule: Some(label.to_owned()),
        ..Refusal::new(
            StatusCode::FORBIDDEN,
            &codes::NET_BLOCKED,
            reason.as_str(),
            format!("{what} was refused {by}."),
        )
        .with_next(format!(
            "Run `{explain}` to see which rule decided, and add a rule to allow it."
        ))
    }
}

/// Journal a request refused before the catalogue was asked (bad request, no SNI, limits),
/// within `journal.undecided_per_second`: these can be made up at will, and past the budget
/// they are only counted, so that a flood of them cannot push decisions out of the journal.
pub(crate) fn refuse_undecided(state: &Arc<State>, ask: &Ask<'_>, refusal: &Refusal) {
    state.metrics.unclassified_refusal();
    if state.undecided_budget.check().is_err() {
        state.metrics.undecided_over_budget();
        return;
    }
    let ticket = Ticket::new(state, ask, normalize_host(ask.host), None, None, "");
    ticket.refused(refusal);
}

/// A decided request not yet journaled. Close it with exactly one of its methods.
pub(crate) struct Ticket {
    state: Arc<State>,
    via: Via,
    mode: Option<Mode>,
    rule: Option<RuleId>,
    started: Instant,
    /// Not yet journaled.
    open: bool,
    record: DecisionRecord,
}

impl Ticket {
    fn decided(
        state: &Arc<State>,
        ask: &Ask<'_>,
        host: String,
        decision: &Decision,
        label: String,
    ) -> Self {
        let mut ticket = Self::new(
            state,
            ask,
            host,
            Some(decision.mode),
            Some(label),
            decision.reason.as_str(),
        );
        ticket.rule = decision.rule;
        ticket
    }

    fn new(
        state: &Arc<State>,
        ask: &Ask<'_>,
        host: String,
        mode: Option<Mode>,
        rule: Option<String>,
        reason: &str,
    ) -> Self {
        Self {
            state: state.clone(),
            via: ask.via,
            mode,
            rule: None,
            started: Instant::now(),
            open: true,
            record: DecisionRecord {
                via: ask.via.as_str().to_owned(),
                client: ask.client,
                method: ask.method.to_owned(),
                host,
                port: ask.port,
                // Every record's path is redacted: no secret a URL carries reaches disk.
                path: tripwire::redact_path(ask.path).into_owned(),
                tls: matches!(ask.via, Via::Tls | Via::Intercept),
                mode,
                rule,
                reason: reason.to_owned(),
                ..DecisionRecord::default()
            },
        }
    }

    /// The host decided on.
    pub(crate) fn host(&self) -> &str {
        &self.record.host
    }

    /// The client's address.
    pub(crate) fn client(&self) -> SocketAddr {
        self.record.client
    }

    /// The rule that decided, if one did (not the default).
    pub(crate) fn rule(&self) -> Option<RuleId> {
        self.rule
    }

    /// The label of the rule that decided (`rules[N] host` or `default`).
    pub(crate) fn rule_label(&self) -> Option<&str> {
        self.record.rule.as_deref()
    }

    /// A record for a request the sidecar itself sends on this one's behalf (synth asking its
    /// model): this request's listener, client, mode and rule; the caller fills in the rest.
    pub(crate) fn on_behalf(&self) -> DecisionRecord {
        let r = &self.record;
        DecisionRecord {
            via: r.via.clone(),
            client: r.client,
            mode: r.mode,
            rule: r.rule.clone(),
            ..DecisionRecord::default()
        }
    }

    /// The connection was opened for interception: each request inside it is decided and
    /// journaled on its own, so the connection itself leaves no record.
    pub(crate) fn superseded(mut self) {
        self.open = false;
    }

    /// The sidecar answered the request itself (mock, capture, synth): nothing left the
    /// environment. `up` is the request body read, `down` the answer's body.
    pub(crate) fn answered(mut self, status: u16, up: u64, down: u64) {
        self.finish(false, Some(status), up, down, Outcome::Answered);
    }

    /// The request was refused (nothing left the environment).
    pub(crate) fn refused(self, refusal: &Refusal) {
        let status = match self.via {
            Via::Tls | Via::Smtp => None,
            _ => Some(refusal.status.as_u16()),
        };
        self.refused_with(status, refusal);
    }

    /// The connection was refused inside TLS, after it was accepted: the status journaled is
    /// the last one the client saw (200 for a CONNECT, none on the transparent listener).
    pub(crate) fn refused_in_tls(self, refusal: &Refusal) {
        let status = (self.record.method == "CONNECT").then_some(200);
        self.refused_with(status, refusal);
    }

    fn refused_with(mut self, status: Option<u16>, refusal: &Refusal) {
        self.record.reason.clone_from(&refusal.reason);
        self.record.code = Some(refusal.code.code.to_owned());
        self.record.error = Some(tripwire::redact(&refusal.statement).into_owned());
        self.finish(false, status, 0, 0, Outcome::Refused);
    }

    /// The request had begun to leave when the client broke it (a malformed body): the
    /// client's error, coded as `refusal`; `up` is what was sent.
    pub(crate) fn client_failed(mut self, refusal: &Refusal, up: u64) {
        self.record.reason.clone_from(&refusal.reason);
        self.record.code = Some(refusal.code.code.to_owned());
        self.record.error = Some(tripwire::redact(&refusal.statement).into_owned());
        self.finish(
            true,
            Some(refusal.status.as_u16()),
            up,
            0,
            Outcome::ClientError,
        );
    }

    /// Whether the sidecar is stopping and its drain deadline has passed: what is still open
    /// is being closed.
    pub(crate) fn is_cut(&self) -> bool {
        self.state.drain.is_cut()
    }

    /// Still open when the drain deadline passed, and closed by the sidecar: `status` is what
    /// the client was answered, `up`/`down` what moved.
    pub(crate) fn cut(mut self, status: Option<u16>, up: u64, down: u64) {
        self.close_cut(status, up, down);
    }

    fn close_cut(&mut self, status: Option<u16>, up: u64, down: u64) {
        "shutdown".clone_into(&mut self.record.reason);
        self.record.error =
            Some("the sidecar stopped and its drain deadline passed before this ended".to_owned());
        let allowed = self.may_have_left();
        self.finish(allowed, status, up, down, Outcome::Shutdown);
    }

    /// Whether the request may have left before it ended (its mode forwards).
    fn may_have_left(&self) -> bool {
        matches!(self.mode, Some(Mode::Allow | Mode::Sandbox))
    }

    /// The loops this sidecar refused lately.
    pub(crate) fn loops(&self) -> &crate::decide::loops::Loops {
        &self.state.loops
    }

    /// The request was forwarded and completed (any upstream status).
    pub(crate) fn forwarded(mut self, status: Option<u16>, up: u64, down: u64) {
        self.finish(true, status, up, down, Outcome::Forwarded);
    }

    /// The request was allowed but the upstream failed; `up`/`down` count what moved.
    pub(crate) fn upstream_failed(
        mut self,
        status: Option<u16>,
        code: &'static ErrorCode,
        reason: &str,
        error: String,
        up: u64,
        down: u64,
    ) {
        reason.clone_into(&mut self.record.reason);
        self.record.code = Some(code.code.to_owned());
        self.record.error = Some(error);
        self.finish(true, status, up, down, Outcome::UpstreamError);
    }

    fn finish(&mut self, allowed: bool, status: Option<u16>, up: u64, down: u64, outcome: Outcome) {
        self.open = false;
        let r = &mut self.record;
        r.allowed = allowed;
        r.status = status;
        r.bytes_up = up;
        r.bytes_down = down;
        r.duration_ms = self.started.elapsed().as_millis() as u64;
        let metrics = &self.state.metrics;
        if let Some(mode) = self.mode {
            metrics.request(self.via, mode, outcome);
        }
        metrics.bytes(up, down);
        tracing::debug!(host = %r.host, reason = %r.reason, allowed, "decision");
        let record = std::mem::take(&mut self.record);
        self.state.journal.record(Entry::Decision(record));
    }
}

impl Drop for Ticket {
    /// A ticket dropped unclosed is a request whose task was cancelled before it was answered
    /// (an HTTP/2 stream reset, the idle watchdog closing the connection, the sidecar's drain
    /// deadline): it is journaled rather than lost, since an allowed request may already have
    /// left.
    fn drop(&mut self) {
        if !self.open {
            return;
        }
        if self.is_cut() {
            return self.close_cut(None, 0, 0);
        }
        self.record.reason = "client_gone".to_owned();
        self.record.error = Some("the client went away before the request was answered".to_owned());
        let allowed = self.may_have_left();
        self.finish(allowed, None, 0, 0, Outcome::ClientGone);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ask(via: Via, method: &'static str, port: u16, path: &'static str) -> Ask<'static> {
        Ask {
            via,
            client: SocketAddr::from(([127, 0, 0, 1], 5000)),
            method,
            host: "",
            port,
            path,
            tunnel: method == "CONNECT" || via == Via::Tls,
        }
    }

    #[test]
    fn a_url_keeps_a_port_that_is_not_the_default_and_brackets_ipv6() {
        assert_eq!(HostPort("::1", 443).to_string(), "[::1]:443");
        assert_eq!(HostPort("x.test", 80).to_string(), "x.test:80");
        let get = ask(Via::Proxy, "GET", 8080, "/p?q=1");
        assert_eq!(request_url(&get, "x.test"), "http://x.test:8080/p?q=1");
        assert_eq!(request_url(&get, "::1"), "http://[::1]:8080/p?q=1");
        let default = ask(Via::Transparent, "GET", 80, "/");
        assert_eq!(request_url(&default, "::1"), "http://[::1]/");
        let inside = ask(Via::Intercept, "POST", 443, "/v1");
        assert_eq!(request_url(&inside, "x.test"), "https://x.test/v1");
        let tunnel = ask(Via::Proxy, "CONNECT", 8443, "");
        assert_eq!(
            explain_command(&tunnel, "2001:db8::1"),
            "af net explain GET https://[2001:db8::1]:8443/"
        );
    }
}
