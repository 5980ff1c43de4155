//! What the journal holds for each request of the matrix, as the sidecar records it today.
//! [`expected_records`] is the one place that changes when the journal's semantics do (an
//! outer CONNECT of an intercepted host getting its own record, intercepted requests saying
//! how they arrived, `allowed` split into forwarded and answered).

use af_policy::egress::Mode;
use af_sidecar_api::journal::DecisionRecord;

use super::{Request, Route};

/// One decision record the journal must hold, field by field.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Expected {
    pub via: &'static str,
    pub method: &'static str,
    pub host: &'static str,
    pub port: u16,
    pub path: String,
    pub mode: Mode,
    pub rule: &'static str,
    pub reason: &'static str,
    pub allowed: bool,
    pub status: u16,
}

/// The records one request leaves today, in order. Through the proxy and through the
/// transparent listener alike: the request inside the opened TLS connection, `via:
/// intercept`, and no record of the CONNECT or of the handshake around it; an answer made
/// here (mock, capture, synth) is `allowed: false` (it did not leave).
pub(crate) fn expected_records(request: &Request, _route: Route) -> Vec<Expected> {
    vec![Expected {
        via: "intercept",
        method: request.method,
        host: request.api.host,
        port: 443,
        path: request.path.clone(),
        mode: request.api.mode,
        rule: request.api.rule,
        reason: "rule",
        allowed: false,
        status: request.status,
    }]
}

impl Expected {
    /// The fields in which `d` differs from what is expected, as `field: got X, want Y`.
    pub(crate) fn differences(&self, d: &DecisionRecord) -> Vec<String> {
        let mut out = Vec::new();
        let mut check = |field: &str, got: String, want: String| {
            if got != want {
                out.push(format!("{field}: got {got}, want {want}"));
            }
        };
        check("via", d.via.to_string(), self.via.to_owned());
        check("method", d.method.clone(), self.method.to_owned());
        check("host", d.host.clone(), self.host.to_owned());
        check("port", d.port.to_string(), self.port.to_string());
        check("path", d.path.clone(), self.path.clone());
        check(
            "mode",
            format!("{:?}", d.mode),
            format!("{:?}", Some(self.mode)),
        );
        check(
            "rule",
            format!("{:?}", d.rule),
            format!("{:?}", Some(self.rule)),
        );
        check("reason", d.reason.clone(), self.reason.to_owned());
        check("allowed", d.allowed.to_string(), self.allowed.to_string());
        check(
            "status",
            format!("{:?}", d.status),
            format!("{:?}", Some(self.status)),
        );
        out
    }
}
