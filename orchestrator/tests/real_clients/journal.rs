//! What the journal holds for each request of the matrix: the request inside the opened TLS
//! connection (`via: intercept`, with the listener it `arrived` on), then, when the connection
//! closes, the record of the connection itself (`intercepted: true`, outcome `opened`): a
//! CONNECT through the proxy, or a TLS connection on the transparent listener.

use af_policy::egress::Mode;
use af_sidecar_api::journal::{DecisionRecord, Outcome};

use super::{Request, Route};

/// One decision record the journal must hold, field by field.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Expected {
    pub via: &'static str,
    pub arrived: &'static str,
    pub intercepted: bool,
    pub method: &'static str,
    pub host: &'static str,
    pub port: u16,
    pub path: String,
    pub mode: Mode,
    pub rule: &'static str,
    pub reason: &'static str,
    pub outcome: Outcome,
    pub status: Option<u16>,
}

/// The records one request leaves, in order: the request, answered here (mock, capture,
/// synth: nothing left), then its connection, opened for interception on the route's listener.
pub(crate) fn expected_records(request: &Request, route: Route) -> Vec<Expected> {
    let (listener, method, status) = match route {
        Route::Proxy => ("proxy", "CONNECT", Some(200)),
        Route::Transparent => ("tls", "", None),
    };
    let request_record = Expected {
        via: "intercept",
        arrived: listener,
        intercepted: false,
        method: request.method,
        host: request.api.host,
        port: 443,
        path: request.path.clone(),
        mode: request.api.mode,
        rule: request.api.rule,
        reason: "rule",
        outcome: Outcome::Answered,
        status: Some(request.status),
    };
    let connection = Expected {
        via: listener,
        arrived: "",
        intercepted: true,
        method,
        path: String::new(),
        outcome: Outcome::Opened,
        status,
        ..request_record.clone()
    };
    vec![request_record, connection]
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
        check(
            "arrived",
            d.arrived.as_deref().unwrap_or_default().to_owned(),
            self.arrived.to_owned(),
        );
        check(
            "intercepted",
            d.intercepted.to_string(),
            self.intercepted.to_string(),
        );
        check("method", d.method.to_string(), self.method.to_owned());
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
        check("reason", d.reason.to_string(), self.reason.to_owned());
        check("outcome", d.outcome().to_string(), self.outcome.to_string());
        check(
            "status",
            format!("{:?}", d.status),
            format!("{:?}", self.status),
        );
        out
    }
}
