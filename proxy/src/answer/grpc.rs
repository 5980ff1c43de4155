//! gRPC in its own terms. A gRPC client reads a call's outcome from `grpc-status`, not from
//! the HTTP status: a `403` with a text body reaches it as `UNKNOWN` or `UNAVAILABLE` with
//! nothing of why. So a refusal the sidecar makes to a gRPC call is answered as gRPC's
//! Trailers-Only response: `200`, `content-type: application/grpc`, a `grpc-status` chosen
//! from the refusal's HTTP status ([`status_for`]) and a `grpc-message` carrying the refusal's
//! code, statement and `Next:` line. The `X-Af-*` headers stay, as metadata.
//!
//! Answers from the upstream pass as they came, `grpc-status` in their trailers.

use bytes::Bytes;
use http::header::{self, HeaderName, HeaderValue};
use http::{Request, Response, StatusCode};
use http_body_util::{BodyExt, Either, Full};
use percent_encoding::{AsciiSet, CONTROLS, utf8_percent_encode};

use crate::answer::body::ProxyBody;
use crate::answer::refusal::CODE;

/// gRPC status codes the sidecar answers with (grpc/doc/statuscodes.md).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub(crate) enum GrpcStatus {
    Unknown = 2,
    InvalidArgument = 3,
    PermissionDenied = 7,
    ResourceExhausted = 8,
    FailedPrecondition = 9,
    Unimplemented = 12,
    Unavailable = 14,
}

/// The header (or trailer) a gRPC call's outcome is in; typed, as it is looked for in every
/// forwarded answer.
const GRPC_STATUS: HeaderName = HeaderName::from_static("grpc-status");
/// Why, in words.
const GRPC_MESSAGE: HeaderName = HeaderName::from_static("grpc-message");

/// `grpc-message` is percent-encoded: every byte outside printable ASCII, and `%` itself.
const MESSAGE: &AsciiSet = &CONTROLS.add(b'%');

/// Whether `req` is a gRPC call (`application/grpc`, `application/grpc+proto`, ...; not
/// gRPC-Web, which carries its trailers in the body).
pub(crate) fn asked<B>(req: &Request<B>) -> bool {
    const GRPC: &[u8] = b"application/grpc";
    req.headers().get(header::CONTENT_TYPE).is_some_and(|v| {
        let v = v.as_bytes();
        v.get(..GRPC.len())
            .is_some_and(|p| p.eq_ignore_ascii_case(GRPC))
            && matches!(v.get(GRPC.len()), None | Some(b'+' | b';'))
    })
}

/// The gRPC status for a refusal answered over HTTP with `status`.
pub(crate) fn status_for(status: StatusCode) -> GrpcStatus {
    match status {
        StatusCode::FORBIDDEN => GrpcStatus::PermissionDenied,
        StatusCode::TOO_MANY_REQUESTS => GrpcStatus::ResourceExhausted,
        StatusCode::NOT_IMPLEMENTED => GrpcStatus::Unimplemented,
        StatusCode::BAD_GATEWAY | StatusCode::SERVICE_UNAVAILABLE | StatusCode::GATEWAY_TIMEOUT => {
            GrpcStatus::Unavailable
        }
        StatusCode::BAD_REQUEST => GrpcStatus::InvalidArgument,
        StatusCode::LOOP_DETECTED => GrpcStatus::FailedPrecondition,
        _ => GrpcStatus::Unknown,
    }
}

/// `resp` in gRPC's terms when it is one of the sidecar's own refusals; any other answer as
/// it is.
pub(crate) async fn answer(resp: Response<ProxyBody>) -> Response<ProxyBody> {
    if !resp.headers().contains_key(CODE) || is_grpc(&resp) {
        return resp;
    }
    let (mut parts, body) = resp.into_parts();
    let Either::Left(text) = body else {
        return Response::from_parts(parts, body);
    };
    // The sidecar's own body is whole already: collecting it does not wait.
    let text = text
        .collect()
        .await
        .map(|c| c.to_bytes())
        .unwrap_or_default();
    let grpc = status_for(parts.status);
    parts.status = StatusCode::OK;
    let h = &mut parts.headers;
    h.remove(header::CONTENT_LENGTH);
    h.remove(header::CONNECTION);
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/grpc"),
    );
    h.insert(GRPC_STATUS, HeaderValue::from(grpc as u16));
    if let Ok(message) = HeaderValue::from_str(&message(&text)) {
        h.insert(GRPC_MESSAGE, message);
    }
    // Empty, so the head ends the stream: Trailers-Only.
    Response::from_parts(parts, Either::Left(Full::new(Bytes::new())))
}

/// The `grpc-status` in `headers` (a call's trailers, or the head of a Trailers-Only answer).
pub(crate) fn status_of(headers: &http::HeaderMap) -> Option<u16> {
    headers.get(GRPC_STATUS)?.to_str().ok()?.parse().ok()
}

fn is_grpc<B>(resp: &Response<B>) -> bool {
    resp.headers()
        .get(header::CONTENT_TYPE)
        .is_some_and(|v| v.as_bytes().starts_with(b"application/grpc"))
}

/// The refusal's text on one line, percent-encoded for `grpc-message`.
fn message(text: &[u8]) -> String {
    let text = String::from_utf8_lossy(text);
    let one_line = text.split_whitespace().collect::<Vec<_>>().join(" ");
    utf8_percent_encode(&one_line, MESSAGE).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::answer::refusal::Refusal;
    use af_policy::error::codes;
    use hyper::body::Body;

    fn call(content_type: &str) -> Request<()> {
        Request::builder()
            .header(header::CONTENT_TYPE, content_type)
            .body(())
            .expect("request")
    }

    #[test]
    fn a_grpc_call_is_told_by_its_content_type() {
        for yes in [
            "application/grpc",
            "application/grpc+proto",
            "Application/GRPC;x=y",
        ] {
            assert!(asked(&call(yes)), "{yes}");
        }
        for no in [
            "application/grpc-web",
            "application/grpcx",
            "application/json",
            "text/plain",
        ] {
            assert!(!asked(&call(no)), "{no}");
        }
        assert!(!asked(&Request::new(())));
    }

    #[tokio::test]
    async fn a_refusal_becomes_trailers_only_with_the_code_in_its_message() {
        let refusal = Refusal::new(
            StatusCode::FORBIDDEN,
            &codes::NET_BLOCKED,
            "path",
            "100% of /x.Y/Z is refused",
        );
        let resp = answer(refusal.response().map(Either::Left)).await;
        assert_eq!(resp.status(), StatusCode::OK);
        let h = resp.headers();
        assert_eq!(h["content-type"], "application/grpc");
        assert_eq!(h["grpc-status"], "7");
        assert_eq!(h[CODE], codes::NET_BLOCKED.code);
        let message = h["grpc-message"].to_str().expect("ascii");
        assert!(
            message.starts_with(&format!(
                "{} 100%25 of /x.Y/Z is refused",
                codes::NET_BLOCKED.code
            )),
            "{message}"
        );
        assert!(message.contains("Next:"), "{message}");
        assert!(resp.body().is_end_stream(), "the head ends the stream");
    }

    #[test]
    fn each_refusal_status_has_the_grpc_status_a_client_acts_on() {
        assert_eq!(
            status_for(StatusCode::FORBIDDEN),
            GrpcStatus::PermissionDenied
        );
        assert_eq!(
            status_for(StatusCode::TOO_MANY_REQUESTS),
            GrpcStatus::ResourceExhausted
        );
        assert_eq!(
            status_for(StatusCode::NOT_IMPLEMENTED),
            GrpcStatus::Unimplemented
        );
        assert_eq!(
            status_for(StatusCode::GATEWAY_TIMEOUT),
            GrpcStatus::Unavailable
        );
        assert_eq!(status_for(StatusCode::IM_A_TEAPOT), GrpcStatus::Unknown);
    }
}
