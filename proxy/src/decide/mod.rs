//! The one place a request becomes a verdict and a journal record.
//!
//! Every listener describes what it saw as an [`Ask`]; [`decide_tunnel`] (a connection, on its
//! host) or [`decide_request`] (an HTTP request) asks the catalogue and returns what to do and a
//! [`Ticket`] that the caller closes exactly once with how the request ended. Closing the ticket
//! writes the record. A tunnel whose host needs TLS opened is refused with AF-NET-012 when the
//! sidecar has no environment CA: it is never allowed instead.

mod ask;
pub(crate) mod loops;
mod path_secrets;
pub(crate) mod rate;
mod ticket;
pub(crate) mod tripwire;

pub(crate) use ask::{Ask, HostPort, explain_command, normalize_host, request_url};
pub(crate) use ticket::Ticket;

use std::sync::Arc;

use af_policy::error::codes;
use http::StatusCode;

use crate::answer::refusal::Refusal;
use crate::arrive::intercept::Interception;
use crate::state::State;
use af_policy::egress::{Mode, Reason, Target};

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
    let label = state.catalogue.shared_rule_label(decision.rule);
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
    let label = state.catalogue.shared_rule_label(decision.rule);
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
        Reason::Rule | Reason::Default | Reason::Narrowed => format!("by {label}"),
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

#[cfg(test)]
mod tests {
    use std::net::SocketAddr;

    use super::*;
    use crate::metrics::Via;

    fn ask(via: Via, method: &'static str, port: u16, path: &'static str) -> Ask<'static> {
        Ask {
            via,
            arrived: None,
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
