//! The one place a request becomes a verdict and a journal record.
//!
//! Every listener describes what it saw as an [`Ask`]; [`decide`] asks the catalogue, applies
//! what this sidecar can serve (allow and block only: interception is the next issue, so a mode
//! that needs it is refused with AF-NET-012, never allowed), and returns a [`Ticket`] that the
//! caller closes exactly once with how the request ended. Closing the ticket writes the record.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Instant;

use af_policy::error::{ErrorCode, codes};
use http::StatusCode;

use crate::answer::Refusal;
use crate::journal::{DecisionRecord, Entry};
use crate::metrics::{Outcome, Via};
use crate::state::State;
use af_policy::egress::{Mode, Reason, Target};

/// What a listener saw.
#[derive(Debug, Clone, Copy)]
pub struct Ask<'a> {
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

/// The host as the catalogue compares it (lower-case, no trailing dot, IDN in punycode, no
/// IPv6 brackets); a host the catalogue cannot read is kept lower-cased for the record.
pub fn normalize_host(host: &str) -> String {
    let bare = host.trim_start_matches('[').trim_end_matches(']');
    match af_policy::egress::normalize_host(bare) {
        Ok(h) => h.into_owned(),
        Err(_) => bare.trim_end_matches('.').to_lowercase(),
    }
}

/// The `af net explain` command line for a request.
pub fn explain_command(ask: &Ask<'_>, host: &str) -> String {
    let host = if host.contains(':') {
        format!("[{host}]")
    } else {
        host.to_owned()
    };
    if ask.tunnel {
        let port = if ask.port == 443 {
            String::new()
        } else {
            format!(":{}", ask.port)
        };
        format!("af net explain GET https://{host}{port}/")
    } else {
        let port = if ask.port == 80 {
            String::new()
        } else {
            format!(":{}", ask.port)
        };
        let method = if ask.method.is_empty() {
            "GET"
        } else {
            ask.method
        };
        format!("af net explain {method} http://{host}{port}{}", ask.path)
    }
}

/// Decide a request: the ticket to close, and the refusal to answer with if it is refused.
pub fn decide(state: &Arc<State>, ask: &Ask<'_>) -> (Ticket, Option<Refusal>) {
    let host = normalize_host(ask.host);
    let cat = &state.catalogue;
    let decision = if ask.tunnel {
        cat.decide_host(&host, ask.port)
    } else {
        cat.decide(&Target {
            method: ask.method,
            host: &host,
            port: ask.port,
            path: ask.path,
        })
    };
    let label = cat.rule_label(decision.rule).to_owned();
    let reason = decision.reason.as_str();
    // A plain HTTP request is decided with its method and path, so only the mode matters; a
    // tunnel decided on the host alone would need TLS opened to honour paths or methods.
    let unserved =
        !matches!(decision.mode, Mode::Allow | Mode::Block) || (ask.tunnel && decision.open_tls);
    let refusal = if unserved {
        let why = if decision.mode.needs_interception() {
            format!("its mode is {}", decision.mode)
        } else {
            "its rule limits paths or methods, which needs TLS interception".to_owned()
        };
        Some(Refusal {
            rule: Some(label.clone()),
            ..Refusal::new(
                StatusCode::FORBIDDEN,
                &codes::NET_MODE_UNSERVED,
                "mode_unserved",
                format!(
                    "{host}:{} was refused by {label} because {why}, which this sidecar does not serve yet",
                    ask.port
                ),
            )
        })
    } else if decision.mode == Mode::Block {
        let explain = explain_command(ask, &host);
        let what = if ask.tunnel {
            format!("A connection to {host}:{}", ask.port)
        } else {
            format!("{} http://{host}{}", ask.method, ask.path)
        };
        let by = match decision.reason {
            Reason::InvalidHost => "because its host is not a valid host name".to_owned(),
            Reason::NonCanonicalPath => {
                "because its path has dot segments or needless escapes where a path rule applies"
                    .to_owned()
            }
            Reason::Rule | Reason::Default => format!("by {label}"),
        };
        Some(Refusal {
            decision: "block",
            rule: Some(label.clone()),
            ..Refusal::new(
                StatusCode::FORBIDDEN,
                &codes::NET_BLOCKED,
                reason,
                format!("{what} was refused {by}."),
            )
            .with_next(format!(
                "Run `{explain}` to see which rule decided, and add a rule to allow it."
            ))
        })
    } else {
        None
    };
    let ticket = Ticket::new(state, ask, host, Some(decision.mode), Some(label), reason);
    (ticket, refusal)
}

/// Journal a request refused before the catalogue was asked (bad request, no SNI, limits).
pub fn refuse_undecided(state: &Arc<State>, ask: &Ask<'_>, refusal: &Refusal) {
    state.metrics.unclassified_refusal();
    let ticket = Ticket::new(state, ask, normalize_host(ask.host), None, None, "");
    ticket.refused(refusal);
}

/// A decided request not yet journaled. Close it with exactly one of its methods.
pub struct Ticket {
    state: Arc<State>,
    via: Via,
    mode: Option<Mode>,
    started: Instant,
    record: DecisionRecord,
}

impl Ticket {
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
            started: Instant::now(),
            record: DecisionRecord {
                via: ask.via.as_str(),
                client: ask.client,
                method: ask.method.to_owned(),
                host,
                port: ask.port,
                path: ask.path.to_owned(),
                tls: ask.via == Via::Tls,
                mode: mode.map(Mode::as_str),
                rule,
                reason: reason.to_owned(),
                allowed: false,
                status: None,
                bytes_up: 0,
                bytes_down: 0,
                duration_ms: 0,
                code: None,
                error: None,
            },
        }
    }

    /// The host decided on.
    pub fn host(&self) -> &str {
        &self.record.host
    }

    /// The request was refused (nothing left the environment).
    pub fn refused(mut self, refusal: &Refusal) {
        let status = match self.via {
            Via::Tls => None,
            _ => Some(refusal.status.as_u16()),
        };
        self.record.reason.clone_from(&refusal.reason);
        self.record.code = Some(refusal.code.code);
        self.record.error = Some(refusal.statement.clone());
        self.finish(false, status, 0, 0, Outcome::Refused);
    }

    /// The request was forwarded and completed (any upstream status).
    pub fn forwarded(self, status: Option<u16>, up: u64, down: u64) {
        self.finish(true, status, up, down, Outcome::Forwarded);
    }

    /// The request was allowed but the upstream failed; `up`/`down` count what moved.
    pub fn upstream_failed(
        mut self,
        status: Option<u16>,
        code: &'static ErrorCode,
        reason: &str,
        error: String,
        up: u64,
        down: u64,
    ) {
        reason.clone_into(&mut self.record.reason);
        self.record.code = Some(code.code);
        self.record.error = Some(error);
        self.finish(true, status, up, down, Outcome::UpstreamError);
    }

    fn finish(mut self, allowed: bool, status: Option<u16>, up: u64, down: u64, outcome: Outcome) {
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
        self.state.journal.record(Entry::Decision(self.record));
    }
}
