//! The ticket of a decided request: closed exactly once with how the request ended, which
//! writes its journal record.

use std::borrow::Cow;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Instant;

use af_policy::egress::{Decision, Mode, RuleId};
use af_policy::error::ErrorCode;

use crate::answer::refusal::Refusal;
use crate::decide::ask::Ask;
use crate::decide::tripwire;
use crate::metrics::{Outcome, Via};
use crate::record::journal::{DecisionRecord, Entry, Outcome as Ended};
use crate::state::State;

/// A decided request not yet journaled. Close it with exactly one of its methods.
pub(crate) struct Ticket {
    state: Arc<State>,
    via: Via,
    mode: Option<Mode>,
    pub(super) rule: Option<RuleId>,
    started: Instant,
    /// Not yet journaled.
    open: bool,
    pub(super) record: DecisionRecord,
}

impl Ticket {
    pub(super) fn decided(
        state: &Arc<State>,
        ask: &Ask<'_>,
        host: String,
        decision: &Decision,
        label: Arc<str>,
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

    pub(super) fn new(
        state: &Arc<State>,
        ask: &Ask<'_>,
        host: String,
        mode: Option<Mode>,
        rule: Option<Arc<str>>,
        reason: &'static str,
    ) -> Self {
        // Every record's path is redacted: no secret a URL carries reaches disk.
        let path = tripwire::redact_path(&host, ask.path).into_owned();
        Self {
            state: state.clone(),
            via: ask.via,
            mode,
            rule: None,
            started: Instant::now(),
            open: true,
            record: DecisionRecord {
                via: Cow::Borrowed(ask.via.as_str()),
                arrived: ask.arrived.map(|v| Cow::Borrowed(v.as_str())),
                client: ask.client,
                method: method_name(ask.method),
                host,
                port: ask.port,
                path,
                tls: matches!(ask.via, Via::Tls | Via::Intercept),
                mode,
                rule,
                reason: Cow::Borrowed(reason),
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

    /// The listener the request or connection arrived on.
    pub(crate) fn via(&self) -> Via {
        self.via
    }

    /// The connection was opened for interception and has closed: each request inside it was
    /// decided and journaled on its own; this records the connection itself (not a request:
    /// not counted in the request metrics). Its status is the last one the client saw (200
    /// for a CONNECT, none on the transparent listener).
    pub(crate) fn intercepted(mut self) {
        self.record.intercepted = true;
        let status = (self.record.method == "CONNECT").then_some(200);
        self.write(false, Ended::Opened, status, 0, 0);
    }

    /// The sidecar answered the request itself (mock, capture, synth): nothing left the
    /// environment. `up` is the request body read, `down` the answer's body.
    pub(crate) fn answered(mut self, status: u16, up: u64, down: u64) {
        self.finish(
            false,
            Ended::Answered,
            Some(status),
            up,
            down,
            Outcome::Answered,
        );
    }

    /// The request was refused (nothing left the environment).
    pub(crate) fn refused(self, refusal: &Refusal) {
        let status = match self.via {
            Via::Tls | Via::Smtp => None,
            _ => Some(refusal.status.as_u16()),
        };
        self.refused_with(Ended::Refused, status, refusal);
    }

    /// The connection was refused and the refusal answered inside its opened TLS (the
    /// transparent TLS listener with an environment CA): the status is the refusal's.
    pub(crate) fn refused_answering(self, refusal: &Refusal) {
        self.refused_with(Ended::Refused, Some(refusal.status.as_u16()), refusal);
    }

    /// The TLS the sidecar opened for interception failed, or its client refused the
    /// certificate: the status journaled is the last one the client saw (200 for a CONNECT,
    /// none on the transparent listener).
    pub(crate) fn handshake_failed(self, refusal: &Refusal) {
        let status = (self.record.method == "CONNECT").then_some(200);
        self.refused_with(Ended::HandshakeFailed, status, refusal);
    }

    fn refused_with(mut self, ended: Ended, status: Option<u16>, refusal: &Refusal) {
        self.record.reason = refusal.reason.clone();
        self.record.code = Some(Cow::Borrowed(refusal.code.code));
        self.record.error = Some(tripwire::redact(&refusal.statement).into_owned());
        self.finish(false, ended, status, 0, 0, Outcome::Refused);
    }

    /// The request had begun to leave when the client broke it (a malformed body): the
    /// client's error, coded as `refusal`; `up` is what was sent.
    pub(crate) fn client_failed(mut self, refusal: &Refusal, up: u64) {
        self.record.reason = refusal.reason.clone();
        self.record.code = Some(Cow::Borrowed(refusal.code.code));
        self.record.error = Some(tripwire::redact(&refusal.statement).into_owned());
        self.finish(
            true,
            Ended::Failed,
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
        self.record.reason = Cow::Borrowed("shutdown");
        self.record.error =
            Some("the sidecar stopped and its drain deadline passed before this ended".to_owned());
        let allowed = self.may_have_left();
        self.finish(allowed, Ended::Closed, status, up, down, Outcome::Shutdown);
    }

    /// Whether the request may have left before it ended (its mode forwards).
    fn may_have_left(&self) -> bool {
        matches!(self.mode, Some(Mode::Allow | Mode::Sandbox))
    }

    /// The loops this sidecar refused lately.
    pub(crate) fn loops(&self) -> &crate::decide::loops::Loops {
        &self.state.loops
    }

    /// The gRPC call ended with `status` (the server's `grpc-status`).
    pub(crate) fn grpc_status(&mut self, status: u16) {
        self.record.grpc_status = Some(status);
    }

    /// The request was forwarded and completed (any upstream status).
    pub(crate) fn forwarded(mut self, status: Option<u16>, up: u64, down: u64) {
        self.finish(true, Ended::Forwarded, status, up, down, Outcome::Forwarded);
    }

    /// The untouched tunnel was established and has closed: bytes were relayed end to end,
    /// and what happened inside (its handshake, its requests) is not known here.
    pub(crate) fn tunnelled(mut self, status: Option<u16>, up: u64, down: u64) {
        self.finish(true, Ended::Tunnel, status, up, down, Outcome::Forwarded);
    }

    /// The request was allowed but the upstream failed; `up`/`down` count what moved.
    pub(crate) fn upstream_failed(
        mut self,
        status: Option<u16>,
        code: &'static ErrorCode,
        reason: impl Into<Cow<'static, str>>,
        error: String,
        up: u64,
        down: u64,
    ) {
        self.record.reason = reason.into();
        self.record.code = Some(Cow::Borrowed(code.code));
        self.record.error = Some(error);
        self.finish(
            true,
            Ended::Failed,
            status,
            up,
            down,
            Outcome::UpstreamError,
        );
    }

    /// Count the request in the metrics (as `outcome`) and journal it (as `ended`).
    fn finish(
        &mut self,
        allowed: bool,
        ended: Ended,
        status: Option<u16>,
        up: u64,
        down: u64,
        outcome: Outcome,
    ) {
        let metrics = &self.state.metrics;
        if let Some(mode) = self.mode {
            metrics.request(self.via, mode, outcome);
        }
        metrics.bytes(up, down);
        self.write(allowed, ended, status, up, down);
    }

    /// Journal the record with how it ended.
    fn write(&mut self, allowed: bool, ended: Ended, status: Option<u16>, up: u64, down: u64) {
        self.open = false;
        let r = &mut self.record;
        r.allowed = allowed;
        r.outcome = Some(ended);
        r.status = status;
        r.bytes_up = up;
        r.bytes_down = down;
        r.duration_ms = self.started.elapsed().as_millis() as u64;
        tracing::debug!(host = %r.host, reason = %r.reason, %ended, "decision");
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
        self.record.reason = Cow::Borrowed("client_gone");
        self.record.error = Some("the client went away before the request was answered".to_owned());
        let allowed = self.may_have_left();
        self.finish(allowed, Ended::Closed, None, 0, 0, Outcome::ClientGone);
    }
}

/// The method as a record keeps it: borrowed for the standard methods, so nearly every request
/// allocates nothing for it; owned for any other.
fn method_name(method: &str) -> Cow<'static, str> {
    const STANDARD: [&str; 10] = [
        "GET", "POST", "PUT", "DELETE", "HEAD", "OPTIONS", "PATCH", "CONNECT", "TRACE", "",
    ];
    match STANDARD.iter().find(|standard| **standard == method) {
        Some(standard) => Cow::Borrowed(standard),
        None => Cow::Owned(method.to_owned()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn standard_methods_are_borrowed_and_any_other_is_kept_as_written() {
        for method in ["GET", "CONNECT", ""] {
            assert!(matches!(method_name(method), Cow::Borrowed(m) if m == method));
        }
        // Methods are case-sensitive (RFC 9110 section 9.1): `get` is not `GET`.
        for method in ["PROPFIND", "get"] {
            assert!(matches!(method_name(method), Cow::Owned(m) if m == method));
        }
    }
}
