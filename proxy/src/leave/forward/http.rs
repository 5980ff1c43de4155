//! Forwarding an allowed HTTP request through the pooled client.
//!
//! Hop-by-hop and `Proxy-*` headers are stripped both ways (but for a protocol switch's own,
//! [`super::upgrade`]), one `Via` is added, redirects are passed back (the client never
//! follows them). The record is written when the response body
//! ends, so it carries the bytes that really moved.

use af_policy::error::codes;
use http::header::{self, HeaderMap, HeaderName, HeaderValue};
use http::uri::{Authority, PathAndQuery};
use http::{Request, Response, Uri};
use http_body_util::Either;
use hyper::body::Incoming;

use super::{dial_failed, upstream_refusal};
use crate::answer::body::{JournaledBody, ProxyBody};
use crate::answer::grpc;
use crate::answer::refusal::client_body_refusal;
use crate::answer::refuse::{came_back, loop_refusal, refuse, refuse_loop};
use crate::decide::Ticket;
use crate::leave::forward::client::{CountingBody, HttpClient, SentBytes};
use crate::leave::forward::upgrade::Upgrade;
use crate::leave::guard::DialError;
use crate::leave::upstream::HttpsClients;
use crate::state::State;
use std::sync::Arc;

/// The `Via` the sidecar adds to forwarded requests.
const VIA: &str = "1.1 af-proxy";
/// How the sidecar recognises its own `Via`.
const VIA_TOKEN: &str = "af-proxy";

/// Typed names, not strings: removing by `&str` parsed every name again on every request and
/// response (about 5 % of a keep-alive request's instructions under callgrind).
const HOP_BY_HOP: [HeaderName; 9] = [
    header::CONNECTION,
    HeaderName::from_static("keep-alive"),
    HeaderName::from_static("proxy-connection"),
    header::PROXY_AUTHENTICATE,
    header::PROXY_AUTHORIZATION,
    header::TE,
    header::TRAILER,
    header::TRANSFER_ENCODING,
    header::UPGRADE,
];

/// Whether `name` never crosses a hop by itself (those `Connection` names are checked apart).
pub(crate) fn is_hop_by_hop(name: &HeaderName) -> bool {
    HOP_BY_HOP.contains(name) || name.as_str().starts_with("proxy-")
}

/// Remove hop-by-hop headers, those named in `Connection`, and every `Proxy-*` header.
pub(crate) fn strip_hop_by_hop(headers: &mut HeaderMap) {
    // Most messages carry none: one pass of comparisons instead of nine hashed removals.
    // `Connection` is itself hop-by-hop, so a message naming others is never skipped.
    if !headers.keys().any(is_hop_by_hop) {
        return;
    }
    let mut named: Vec<HeaderName> = Vec::new();
    for value in headers.get_all(header::CONNECTION) {
        if let Ok(v) = value.to_str() {
            named.extend(
                v.split(',')
                    .filter_map(|n| HeaderName::from_bytes(n.trim().as_bytes()).ok()),
            );
        }
    }
    for name in named {
        headers.remove(name);
    }
    for name in &HOP_BY_HOP {
        headers.remove(name);
    }
    let proxy: Vec<HeaderName> = headers
        .keys()
        .filter(|k| k.as_str().starts_with("proxy-"))
        .cloned()
        .collect();
    for name in proxy {
        headers.remove(name);
    }
}

/// Which pooled client a request leaves through.
#[derive(Clone, Copy)]
pub(crate) enum Upstream<'a> {
    /// Plain HTTP (the proxy's absolute-form requests, transparent HTTP).
    Http(&'a HttpClient),
    /// HTTPS with the upstream's certificate verified (requests inside an intercepted
    /// connection).
    Https(&'a HttpsClients),
}

impl Upstream<'_> {
    fn scheme(self) -> &'static str {
        match self {
            Upstream::Http(_) => "http",
            Upstream::Https(_) => "https",
        }
    }

    /// Send `req`; one switching protocols over HTTP/1.1, whatever the upstream would pick.
    async fn request(
        self,
        mut req: Request<CountingBody>,
        switching: bool,
    ) -> Result<Response<Incoming>, hyper_util::client::legacy::Error> {
        match self {
            Upstream::Http(client) => client.request(req).await,
            Upstream::Https(clients) if switching => clients.http1.request(req).await,
            Upstream::Https(clients) => {
                // A shared buffer, not a copy: the request is lent to the gate below.
                let authority = req.uri().authority().cloned();
                let authority = authority.as_ref().map_or("", Authority::as_str);
                match clients.first_dial.turn(authority, &mut req).await {
                    Some(lead) => lead.send(clients.any.request(req)).await,
                    None => clients.any.request(req).await,
                }
            }
        }
    }
}

/// Forward `req` to `scheme://host:port` + its path, `host` the one `ticket` decided, with
/// `authority` as its only `Host` header: the upstream is always asked for the host that was
/// decided. A request that switches protocols is relayed once the upstream switched
/// ([`Upgrade`]).
pub(crate) async fn forward(
    state: &Arc<State>,
    upstream: Upstream<'_>,
    mut req: Request<Incoming>,
    port: u16,
    authority: &str,
    ticket: Ticket,
) -> Response<ProxyBody> {
    let upgrade = Upgrade::take(&mut req);
    let (mut parts, body) = req.into_parts();
    // Our own Via on an incoming request means it came back to us (e.g. an inside address of
    // the sidecar): refuse rather than loop until the connection cap.
    let looped = parts
        .headers
        .get_all(header::VIA)
        .iter()
        .any(|v| v.to_str().is_ok_and(|v| v.contains(VIA_TOKEN)));
    if looped {
        return refuse_loop(ticket, port);
    }
    let uri = match upstream_uri(upstream.scheme(), ticket.host(), port, &parts.uri) {
        Ok(uri) => uri,
        Err(e) => {
            let refusal = upstream_refusal(
                "bad_request",
                &format!("the upstream URL could not be built: {e}"),
            );
            let resp = refusal.response().map(Either::Left);
            ticket.refused(&refusal);
            return resp;
        }
    };
    parts.uri = uri;
    if parts.version == http::Version::HTTP_2 {
        join_cookies(&mut parts.headers);
    }
    parts.version = http::Version::HTTP_11;
    let trailers = accepts_trailers(&parts.headers);
    strip_hop_by_hop(&mut parts.headers);
    if trailers {
        // The sidecar relays trailers both ways, so it asks for them as the client did (gRPC
        // servers require it).
        parts
            .headers
            .insert(header::TE, HeaderValue::from_static("trailers"));
    }
    if let Some(upgrade) = &upgrade {
        upgrade.ask(&mut parts.headers);
    }
    set_host(&mut parts.headers, authority);
    parts
        .headers
        .append(header::VIA, HeaderValue::from_static(VIA));
    let up = SentBytes::for_body(&body);
    let req = Request::from_parts(parts, CountingBody::new(body, up.clone()));
    match upstream.request(req, upgrade.is_some()).await {
        Ok(resp) if came_back(&ticket, &resp) => {
            let refusal = loop_refusal(ticket.host(), port);
            refuse(ticket, &refusal)
        }
        Ok(mut resp) => {
            if let Some(upgrade) = upgrade.filter(|u| u.switched(&resp)) {
                return upgrade.switch(&mut resp, ticket, &up, state);
            }
            let (mut parts, body) = resp.into_parts();
            strip_hop_by_hop(&mut parts.headers);
            let status = parts.status.as_u16();
            let mut ticket = ticket;
            // A gRPC call the server answered at once (Trailers-Only) ends in its head.
            if let Some(grpc) = grpc::status_of(&parts.headers) {
                ticket.grpc_status(grpc);
            }
            Response::from_parts(
                parts,
                Either::Right(JournaledBody::new(body, ticket, status, up)),
            )
        }
        Err(e) => {
            if let Some(dial) = find_dial_error(&e) {
                return dial_failed(dial, ticket, true).response().map(Either::Left);
            }
            if let Some(refusal) = client_body_refusal(&e) {
                let resp = refusal.response().map(Either::Left);
                ticket.client_failed(&refusal, up.get());
                return resp;
            }
            let host = ticket.host();
            let error = format!("the upstream {host}:{port} failed: {}", error_chain(&e));
            let refusal = upstream_refusal("upstream", &error);
            let resp = refusal.response().map(Either::Left);
            let sent = up.get();
            ticket.upstream_failed(Some(502), &codes::NET_UPSTREAM, "upstream", error, sent, 0);
            resp
        }
    }
}

/// Whether the client's `TE` accepts trailers (`TE: trailers`, as gRPC sends it).
fn accepts_trailers(headers: &HeaderMap) -> bool {
    headers.get_all(header::TE).iter().any(|v| {
        v.to_str().is_ok_and(|v| {
            v.split(',').any(|t| {
                t.split(';')
                    .next()
                    .is_some_and(|t| t.trim().eq_ignore_ascii_case("trailers"))
            })
        })
    })
}

/// Make `authority` the request's only `Host`. A client's single `Host` that already says it is
/// kept as it is (the common case: one allocation fewer per request); any other is replaced.
fn set_host(headers: &mut HeaderMap, authority: &str) {
    let mut sent = headers.get_all(header::HOST).iter();
    if sent.next().is_some_and(|v| v == authority) && sent.next().is_none() {
        return;
    }
    match HeaderValue::from_str(authority) {
        // `insert` replaces every Host the client sent.
        Ok(v) => {
            headers.insert(header::HOST, v);
        }
        Err(_) => {
            headers.remove(header::HOST);
        }
    }
}

/// `scheme://host:port` with the path and query of `asked`, taken as they are (a shared
/// buffer, not parsed again).
fn upstream_uri(scheme: &str, host: &str, port: u16, asked: &Uri) -> Result<Uri, http::Error> {
    let path = asked
        .path_and_query()
        .cloned()
        .unwrap_or_else(|| PathAndQuery::from_static("/"));
    let authority = match asked.authority() {
        // The client's absolute-form URL spelled it exactly so: share its bytes (two
        // allocations fewer per request than building it, and the same pool key).
        Some(asked) if spells_host_port(asked.as_str(), host, port) => asked.clone(),
        _ => host_port_authority(host, port)?,
    };
    Uri::builder()
        .scheme(scheme)
        .authority(authority)
        .path_and_query(path)
        .build()
}

/// Whether `text` is exactly `host:port` as [`host_port_authority`] writes it. An IPv6 host,
/// which it writes in brackets, is always written anew.
fn spells_host_port(text: &str, host: &str, port: u16) -> bool {
    !host.contains(':')
        && text
            .strip_prefix(host)
            .and_then(|rest| rest.strip_prefix(':'))
            .is_some_and(|digits| digits == itoa::Buffer::new().format(port))
}

/// `host:port`, an IPv6 host in brackets.
fn host_port_authority(host: &str, port: u16) -> Result<Authority, http::Error> {
    // Pushed, not `format!`ed: the formatting machinery was 2 % of a keep-alive request's
    // instructions under callgrind.
    let mut authority = String::with_capacity(host.len() + 8);
    let ipv6 = host.contains(':');
    if ipv6 {
        authority.push('[');
    }
    authority.push_str(host);
    if ipv6 {
        authority.push(']');
    }
    authority.push(':');
    authority.push_str(itoa::Buffer::new().format(port));
    Ok(Authority::try_from(authority)?)
}

/// HTTP/2 may split `Cookie` into one field per pair; HTTP/1.1 needs one line joined with
/// `"; "` (RFC 9113 section 8.2.3).
fn join_cookies(headers: &mut HeaderMap) {
    if headers.get_all(header::COOKIE).iter().nth(1).is_none() {
        return;
    }
    let joined: Vec<u8> = headers
        .get_all(header::COOKIE)
        .iter()
        .map(HeaderValue::as_bytes)
        .collect::<Vec<_>>()
        .join(&b"; "[..]);
    if let Ok(value) = HeaderValue::from_bytes(&joined) {
        headers.insert(header::COOKIE, value);
    }
}

fn find_dial_error<'a>(e: &'a (dyn std::error::Error + 'static)) -> Option<&'a DialError> {
    let mut cur: Option<&'a (dyn std::error::Error + 'static)> = Some(e);
    while let Some(err) = cur {
        if let Some(d) = err.downcast_ref::<DialError>() {
            return Some(d);
        }
        cur = err.source();
    }
    None
}

fn error_chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut out = e.to_string();
    let mut cur = e.source();
    while let Some(err) = cur {
        out.push_str(": ");
        out.push_str(&err.to_string());
        cur = err.source();
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_upstream_uri_keeps_the_path_and_query_and_brackets_ipv6() {
        let asked: Uri = "/a/b?c=d%20e".parse().expect("uri");
        let uri = upstream_uri("http", "api.test", 8080, &asked).expect("built");
        assert_eq!(uri, "http://api.test:8080/a/b?c=d%20e");
        let uri = upstream_uri("https", "2001:db8::1", 443, &"/x".parse().expect("uri"));
        assert_eq!(uri.expect("built"), "https://[2001:db8::1]:443/x");
        let bare: Uri = "http://api.test".parse().expect("uri");
        let uri = upstream_uri("http", "api.test", 80, &bare).expect("built");
        assert_eq!(uri, "http://api.test:80/");
    }

    #[test]
    fn the_clients_authority_is_shared_only_when_it_spells_the_decided_host_and_port() {
        let asked: Uri = "http://api.test:8080/x".parse().expect("uri");
        let uri = upstream_uri("http", "api.test", 8080, &asked).expect("built");
        assert_eq!(uri, "http://api.test:8080/x");
        let text = |u: &Uri| u.authority().expect("authority").as_str().as_ptr();
        assert!(std::ptr::eq(text(&uri), text(&asked)), "the same bytes");
        // Any other spelling is built again from what was decided.
        for other in [
            "http://API.test:8080/x",
            "http://api.test:08080/x",
            "http://u@api.test:8080/x",
            "http://api.test.evil:8080/x",
            "http://api.test/x",
        ] {
            let asked: Uri = other.parse().expect("uri");
            let uri = upstream_uri("http", "api.test", 8080, &asked).expect("built");
            assert_eq!(uri, "http://api.test:8080/x", "{other}");
            assert!(!std::ptr::eq(text(&uri), text(&asked)), "{other}");
        }
    }

    #[test]
    fn a_single_host_that_says_the_authority_is_kept_and_any_other_replaced() {
        let mut h = HeaderMap::new();
        h.insert(header::HOST, HeaderValue::from_static("api.test:8080"));
        let kept = h.get(header::HOST).expect("host").as_bytes().as_ptr();
        set_host(&mut h, "api.test:8080");
        assert!(std::ptr::eq(
            h.get(header::HOST).expect("host").as_bytes().as_ptr(),
            kept
        ));
        h.append(header::HOST, HeaderValue::from_static("api.test:8080"));
        set_host(&mut h, "api.test:8080");
        assert_eq!(h.get_all(header::HOST).iter().count(), 1, "two became one");
        h.insert(header::HOST, HeaderValue::from_static("other.test"));
        set_host(&mut h, "api.test:8080");
        assert_eq!(
            h.get_all(header::HOST).iter().collect::<Vec<_>>(),
            ["api.test:8080"]
        );
        set_host(&mut h, "bad\nhost");
        assert!(
            h.get(header::HOST).is_none(),
            "no Host rather than a wrong one"
        );
    }

    #[test]
    fn trailers_are_asked_for_only_where_the_client_accepts_them() {
        let te = |v: &'static str| {
            let mut h = HeaderMap::new();
            h.insert(header::TE, HeaderValue::from_static(v));
            accepts_trailers(&h)
        };
        assert!(te("trailers"));
        assert!(te("gzip, Trailers"));
        assert!(te("deflate;q=0.5, trailers"));
        assert!(!te("gzip"));
        assert!(!te("trailersx"));
        assert!(!accepts_trailers(&HeaderMap::new()));
    }

    #[test]
    fn split_http2_cookies_are_joined_for_http1() {
        let mut h = HeaderMap::new();
        h.append(header::COOKIE, HeaderValue::from_static("a=1"));
        h.append(header::COOKIE, HeaderValue::from_static("b=2"));
        join_cookies(&mut h);
        let all: Vec<_> = h.get_all(header::COOKIE).iter().collect();
        assert_eq!(all, ["a=1; b=2"]);
    }

    #[test]
    fn hop_by_hop_and_proxy_headers_are_stripped() {
        let mut h = HeaderMap::new();
        for (k, v) in [
            ("connection", "keep-alive, x-secret"),
            ("x-secret", "1"),
            ("keep-alive", "timeout=5"),
            ("proxy-authorization", "Basic x"),
            ("proxy-foo", "y"),
            ("te", "trailers"),
            ("upgrade", "websocket"),
            ("accept", "*/*"),
        ] {
            h.insert(HeaderName::from_static(k), HeaderValue::from_static(v));
        }
        strip_hop_by_hop(&mut h);
        let left: Vec<&str> = h.keys().map(|k| k.as_str()).collect();
        assert_eq!(left, ["accept"]);
    }

    #[test]
    fn end_to_end_headers_are_left_as_they_are_and_a_lone_proxy_header_goes() {
        let mut h = HeaderMap::new();
        h.append(header::ACCEPT, HeaderValue::from_static("*/*"));
        h.append(header::COOKIE, HeaderValue::from_static("a=1"));
        h.append(header::COOKIE, HeaderValue::from_static("b=2"));
        let before = h.clone();
        strip_hop_by_hop(&mut h);
        assert_eq!(h, before);
        h.insert(
            HeaderName::from_static("proxy-secret"),
            HeaderValue::from_static("x"),
        );
        strip_hop_by_hop(&mut h);
        assert_eq!(h, before);
    }
}
