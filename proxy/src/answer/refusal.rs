//! Answers the sidecar makes itself: refusals with a coded text body and `X-Af-*` headers.

use std::borrow::Cow;
use std::error::Error;

use af_policy::error::{ErrorCode, codes};
use bytes::Bytes;
use http::{HeaderValue, Response, StatusCode, header};
use http_body_util::Full;

use crate::decide::tripwire::Hit;

/// Header naming the sidecar's verdict on answers it makes itself.
pub(crate) const DECISION: &str = "x-af-decision";
/// Header naming the rule that decided (`rules[N] host` or `default`).
pub(crate) const RULE: &str = "x-af-rule";
/// Header carrying the product error code.
pub(crate) const CODE: &str = "x-af-code";

/// A refusal, as the client and the journal see it.
#[derive(Debug, Clone)]
pub(crate) struct Refusal {
    /// HTTP status for HTTP clients.
    pub status: StatusCode,
    /// The product error code.
    pub code: &'static ErrorCode,
    /// `block` (the catalogue said so) or `refuse` (anything else).
    pub decision: &'static str,
    /// The deciding rule's label, when the catalogue was asked.
    pub rule: Option<String>,
    /// Journal reason.
    pub reason: Cow<'static, str>,
    /// One sentence.
    pub statement: String,
    /// What to do next.
    pub next: String,
    /// Seconds until a retry can succeed (`Retry-After`), for a rate limit.
    pub retry_after_secs: Option<u64>,
}

impl Refusal {
    /// A refusal with the code's own `Next:` line.
    pub(crate) fn new(
        status: StatusCode,
        code: &'static ErrorCode,
        reason: impl Into<Cow<'static, str>>,
        statement: impl Into<String>,
    ) -> Self {
        Self {
            status,
            code,
            decision: "refuse",
            rule: None,
            reason: reason.into(),
            statement: statement.into(),
            next: code.next.to_owned(),
            retry_after_secs: None,
        }
    }

    /// Replace the `Next:` line.
    pub(crate) fn with_next(mut self, next: impl Into<String>) -> Self {
        self.next = next.into();
        self
    }

    /// The text body: `CODE statement` and `  Next: ...`.
    pub(crate) fn body(&self) -> String {
        format!(
            "{} {}\n  Next: {}\n",
            self.code.code, self.statement, self.next
        )
    }

    /// The HTTP response.
    pub(crate) fn response(&self) -> Response<Full<Bytes>> {
        let mut resp = Response::new(Full::new(Bytes::from(self.body())));
        *resp.status_mut() = self.status;
        let h = resp.headers_mut();
        h.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("text/plain; charset=utf-8"),
        );
        h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
        h.insert(DECISION, HeaderValue::from_static(self.decision));
        h.insert(CODE, HeaderValue::from_static(self.code.code));
        if let Some(rule) = &self.rule
            && let Ok(v) = HeaderValue::from_str(rule)
        {
            h.insert(RULE, v);
        }
        if let Some(secs) = self.retry_after_secs {
            h.insert(header::RETRY_AFTER, HeaderValue::from(secs));
        }
        if self.status.is_client_error()
            && !matches!(
                self.status,
                StatusCode::FORBIDDEN | StatusCode::TOO_MANY_REQUESTS
            )
        {
            h.insert(header::CONNECTION, HeaderValue::from_static("close"));
        }
        resp
    }

    /// A complete HTTP/1.1 response written without hyper, closing the connection: at the
    /// connection limit (the request is never read), and in place of hyper's own empty answer
    /// to a head it could not read (`listener/gate.rs`).
    pub(crate) fn raw_close_response(&self) -> Vec<u8> {
        let body = self.body();
        format!(
            "HTTP/1.1 {} {}\r\ncontent-type: text/plain; charset=utf-8\r\n{DECISION}: {}\r\n{CODE}: {}\r\nconnection: close\r\ncontent-length: {}\r\n\r\n{body}",
            self.status.as_u16(),
            self.status.canonical_reason().unwrap_or(""),
            self.decision,
            self.code.code,
            body.len()
        )
        .into_bytes()
    }
}

/// When forwarding failed because the client's own request body could not be read (a
/// malformed chunk, or the client gone in the middle of it): the client's error, `400`, not
/// the upstream's. The request was allowed, and had begun to leave.
pub(crate) fn client_body_refusal(error: &(dyn Error + 'static)) -> Option<Refusal> {
    // hyper reports a failed request body as a user error ("error from user's Body stream")
    // whose source is the error reading it from the client.
    let mut cur = Some(error);
    let body_error = loop {
        let err = cur?;
        if let Some(e) = err.downcast_ref::<hyper::Error>()
            && e.is_user()
            && let Some(source) = e.source().and_then(|s| s.downcast_ref::<hyper::Error>())
        {
            break source;
        }
        cur = err.source();
    };
    let mut why = body_error.to_string();
    let mut cause = body_error.source();
    while let Some(e) = cause {
        why = format!("{why}: {e}");
        cause = e.source();
    }
    Some(Refusal {
        decision: "allow",
        ..Refusal::new(
            StatusCode::BAD_REQUEST,
            &codes::NET_BAD_REQUEST,
            "bad_body",
            format!(
                "The request body from the client could not be read ({why}), so the upstream got it cut short"
            ),
        )
        .with_next("Send a well-formed body (valid chunked encoding, or exactly Content-Length bytes).")
    })
}

/// The refusal for a live-looking secret (the secret itself is not in it).
pub(crate) fn live_credential(hit: &Hit) -> Refusal {
    Refusal::new(
        StatusCode::FORBIDDEN,
        &codes::NET_LIVE_CREDENTIAL,
        "live_credential",
        hit.statement(),
    )
}
