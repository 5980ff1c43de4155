//! WebSocket through the sidecar with a real client and server (tokio-tungstenite): in the
//! clear on the transparent HTTP listener, and inside a TLS connection the sidecar opened
//! (CONNECT, then the environment CA's leaf), opened over HTTP/1.1 or over HTTP/2 (RFC 8441).
//! The upgrade is decided like any request (its rule's paths), forwarded with its headers, and
//! then text, binary, ping and close frames cross both ways; its one record comes at the
//! close, with the bytes that moved.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::net::SocketAddr;
use std::sync::Arc;

use af_fixtures::test_resolver::TestResolver;
use bytes::Bytes;
use common::intercept::{TestCa, client, h2, tls_via_connect};
use common::*;
use futures_util::{SinkExt, StreamExt};
use http_body_util::Full;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use tokio::net::TcpListener;
use tokio_rustls::TlsAcceptor;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;

/// Each rule that lets upgrades through names the echo server's port ([`on_port`]); the block
/// covers every port.
const EGRESS: &str = r#"  default: block
  rules:
    - host: ws.paths.test:{port}
      mode: allow
      paths: [/socket]
    - host: ws.blocked.test
      mode: block
    - host: ws.mock.test:{port}
      mode: mock
    - host: ws.sandbox.test:{port}
      mode: sandbox
      credential: SANDBOX_KEY
"#;

const NAMES: [&str; 4] = [
    "ws.paths.test",
    "ws.blocked.test",
    "ws.mock.test",
    "ws.sandbox.test",
];

/// What the echo server saw of each upgrade: its `Authorization` header (empty if none).
type SeenAuth = Arc<std::sync::Mutex<Vec<String>>>;

/// A WebSocket echo server on `UPSTREAM_IP`, in TLS with a self-signed certificate for
/// `NAMES` when `tls`; its address and certificate.
async fn echo_server(tls: bool) -> (SocketAddr, Option<CertificateDer<'static>>) {
    let (addr, cert, _) = echo_server_seeing(tls).await;
    (addr, cert)
}

/// The same, with what it saw of each upgrade's `Authorization`.
#[allow(
    clippy::result_large_err,
    reason = "the handshake callback's type is tungstenite's"
)]
async fn echo_server_seeing(tls: bool) -> (SocketAddr, Option<CertificateDer<'static>>, SeenAuth) {
    let seen = SeenAuth::default();
    let seen_by_server = seen.clone();
    let listener = TcpListener::bind((upstream_ip(), 0)).await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (acceptor, cert) = if tls {
        let names: Vec<String> = NAMES.iter().map(|n| (*n).to_owned()).collect();
        let certified = rcgen::generate_simple_self_signed(names).unwrap();
        let cert = certified.cert.der().clone();
        let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(
            certified.signing_key.serialize_der(),
        ));
        let config = rustls::ServerConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(vec![cert.clone()], key)
        .unwrap();
        (Some(TlsAcceptor::from(Arc::new(config))), Some(cert))
    } else {
        (None, None)
    };
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let acceptor = acceptor.clone();
            let seen = seen_by_server.clone();
            let note = move |req: &tokio_tungstenite::tungstenite::handshake::server::Request,
                             resp| {
                let auth = req
                    .headers()
                    .get("authorization")
                    .and_then(|v| v.to_str().ok())
                    .unwrap_or("");
                seen.lock().unwrap().push(auth.to_owned());
                Ok(resp)
            };
            tokio::spawn(async move {
                match acceptor {
                    Some(acceptor) => {
                        if let Ok(tls) = acceptor.accept(stream).await {
                            echo(tokio_tungstenite::accept_hdr_async(tls, note).await).await;
                        }
                    }
                    None => echo(tokio_tungstenite::accept_hdr_async(stream, note).await).await,
                }
            });
        }
    });
    (addr, cert, seen)
}

/// Echo every text and binary frame, answer pings (tungstenite does), close on close.
async fn echo<S>(
    ws: Result<tokio_tungstenite::WebSocketStream<S>, tokio_tungstenite::tungstenite::Error>,
) where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
{
    let Ok(mut ws) = ws else { return };
    while let Some(Ok(msg)) = ws.next().await {
        let echoed = match msg {
            Message::Text(_) | Message::Binary(_) => ws.send(msg).await,
            Message::Close(_) => return,
            _ => Ok(()),
        };
        if echoed.is_err() {
            return;
        }
    }
}

/// A sidecar with the environment CA, trusting the echo server's certificate `cert`, its rules
/// naming the server's port `port`.
async fn intercepting(port: u16, cert: CertificateDer<'static>) -> (Sidecar, TestCa, TestResolver) {
    let table = NAMES.iter().map(|n| (*n, vec![upstream_ip()])).collect();
    let dns = resolver(table).await;
    let ca = TestCa::new();
    let mut setup = Setup::new(&on_port(EGRESS, port), dns.addr);
    setup.extra = ca.tls_yaml(64, &[cert]);
    (Sidecar::start(&setup).await, ca, dns)
}

/// One conversation on `ws`: a text and a binary frame echoed, a ping answered, a close.
async fn converse<S>(mut ws: tokio_tungstenite::WebSocketStream<S>)
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
{
    ws.send(Message::text("hello through af")).await.unwrap();
    assert_eq!(
        ws.next().await.unwrap().unwrap(),
        Message::text("hello through af")
    );
    let binary = vec![0u8, 1, 2, 254, 255];
    ws.send(Message::binary(binary.clone())).await.unwrap();
    assert_eq!(ws.next().await.unwrap().unwrap(), Message::binary(binary));
    ws.send(Message::Ping(vec![7u8; 4].into())).await.unwrap();
    assert_eq!(
        ws.next().await.unwrap().unwrap(),
        Message::Pong(vec![7u8; 4].into())
    );
    ws.close(None).await.unwrap();
    while let Some(Ok(_)) = ws.next().await {}
}

#[tokio::test]
async fn a_websocket_in_the_clear_is_decided_then_relayed_both_ways() {
    let (up, _) = echo_server(false).await;
    let table = NAMES.iter().map(|n| (*n, vec![upstream_ip()])).collect();
    let dns = resolver(table).await;
    let mut setup = Setup::new(&on_port(EGRESS, up.port()), dns.addr);
    setup.http_port = up.port();
    let sc = Sidecar::start(&setup).await;

    let stream = tokio::net::TcpStream::connect(sc.http()).await.unwrap();
    let request = format!("ws://ws.paths.test:{}/socket", up.port())
        .into_client_request()
        .unwrap();
    let (ws, answer) = tokio_tungstenite::client_async(request, stream)
        .await
        .unwrap_or_else(|e| panic!("the upgrade through the sidecar failed: {e}"));
    assert_eq!(answer.status(), 101);
    converse(ws).await;
    let record = sc
        .admin()
        .wait_path_record("ws.paths.test", "/socket")
        .await;
    assert_eq!(record["status"], 101, "{record}");
    assert_eq!(record["mode"], "allow", "{record}");
    assert!(record["bytes_up"].as_u64().unwrap() > 0, "{record}");
    assert!(record["bytes_down"].as_u64().unwrap() > 0, "{record}");

    // A path the rule does not allow is refused before anything reaches the server.
    let stream = tokio::net::TcpStream::connect(sc.http()).await.unwrap();
    let request = format!("ws://ws.paths.test:{}/other", up.port())
        .into_client_request()
        .unwrap();
    let refused = tokio_tungstenite::client_async(request, stream).await;
    match refused {
        Err(tokio_tungstenite::tungstenite::Error::Http(resp)) => {
            assert_eq!(resp.status(), 403);
        }
        other => panic!("an upgrade outside the rule's paths was not refused: {other:?}"),
    }

    // A host the sidecar answers itself (mock) answers no switched protocol: a coded refusal.
    let stream = tokio::net::TcpStream::connect(sc.http()).await.unwrap();
    let request = format!("ws://ws.mock.test:{}/socket", up.port())
        .into_client_request()
        .unwrap();
    match tokio_tungstenite::client_async(request, stream).await {
        Err(tokio_tungstenite::tungstenite::Error::Http(resp)) => {
            assert_eq!(resp.status(), 501);
            assert_eq!(
                resp.headers()
                    .get("x-af-code")
                    .and_then(|v| v.to_str().ok()),
                Some("AF-NET-049")
            );
        }
        other => panic!("a mock host switched protocols: {other:?}"),
    }
    let refused = sc.admin().wait_path_record("ws.mock.test", "/socket").await;
    assert_eq!(refused["code"], "AF-NET-049", "{refused}");
}

#[tokio::test]
async fn a_websocket_inside_an_intercepted_connection_is_relayed_and_a_blocked_one_refused() {
    let (up, cert) = echo_server(true).await;
    let (sc, ca, _dns) = intercepting(up.port(), cert.unwrap()).await;
    let connector = client(&[&ca.cert_der], &[b"http/1.1"]);

    let authority = format!("ws.paths.test:{}", up.port());
    let tls = tls_via_connect(sc.proxy(), &authority, "ws.paths.test", &connector)
        .await
        .unwrap();
    let request = format!("wss://{authority}/socket")
        .into_client_request()
        .unwrap();
    let (ws, answer) = tokio_tungstenite::client_async(request, tls)
        .await
        .unwrap_or_else(|e| panic!("the upgrade inside the opened TLS failed: {e}"));
    assert_eq!(answer.status(), 101);
    converse(ws).await;
    let record = sc
        .admin()
        .wait_path_record("ws.paths.test", "/socket")
        .await;
    assert_eq!(record["via"], "intercept", "{record}");
    assert_eq!(record["status"], 101, "{record}");
    assert!(record["bytes_down"].as_u64().unwrap() > 0, "{record}");

    // Blocked: CONNECT itself is refused; nothing is relayed.
    let (head, _) = connect_tunnel(sc.proxy(), &format!("ws.blocked.test:{}", up.port())).await;
    assert!(head.starts_with("HTTP/1.1 403"), "{head}");
}

#[tokio::test]
async fn a_sandboxed_websocket_reaches_the_server_with_the_test_credential_only() {
    let (up, _, seen) = echo_server_seeing(false).await;
    let table = NAMES.iter().map(|n| (*n, vec![upstream_ip()])).collect();
    let dns = resolver(table).await;
    let mut setup = Setup::new(&on_port(EGRESS, up.port()), dns.addr);
    setup.http_port = up.port();
    setup.extra = "modes:\n  credentials:\n    SANDBOX_KEY: sk_test_sandbox_key\n".to_owned();
    let sc = Sidecar::start(&setup).await;

    let stream = tokio::net::TcpStream::connect(sc.http()).await.unwrap();
    let mut request = format!("ws://ws.sandbox.test:{}/socket", up.port())
        .into_client_request()
        .unwrap();
    request.headers_mut().insert(
        "authorization",
        "Bearer the-services-own-key".parse().unwrap(),
    );
    let (ws, answer) = tokio_tungstenite::client_async(request, stream)
        .await
        .unwrap_or_else(|e| panic!("the sandboxed upgrade failed: {e}"));
    assert_eq!(answer.status(), 101);
    converse(ws).await;
    assert_eq!(
        *seen.lock().unwrap(),
        ["Bearer sk_test_sandbox_key"],
        "the server saw the rule's test credential and never the service's own"
    );
    let record = sc
        .admin()
        .wait_path_record("ws.sandbox.test", "/socket")
        .await;
    assert_eq!(
        (record["mode"].as_str(), record["status"].as_u64()),
        (Some("sandbox"), Some(101))
    );
}

/// An HTTP/2 connection through the proxy's CONNECT to `authority`, opened by the sidecar.
async fn h2_via_connect(
    sc: &Sidecar,
    ca: &TestCa,
    authority: &str,
    name: &str,
) -> hyper::client::conn::http2::SendRequest<Full<Bytes>> {
    let connector = client(&[&ca.cert_der], &[b"h2"]);
    let tls = tls_via_connect(sc.proxy(), authority, name, &connector)
        .await
        .unwrap();
    assert_eq!(tls.get_ref().1.alpn_protocol(), Some(&b"h2"[..]));
    h2(tls).await
}

/// RFC 8441's opening of a WebSocket on `url`: `CONNECT` with `:protocol: websocket`.
fn extended_connect(url: &str) -> http::Request<Full<Bytes>> {
    let mut req = http::Request::builder()
        .method(http::Method::CONNECT)
        .uri(url)
        .header("sec-websocket-version", "13")
        .body(Full::new(Bytes::new()))
        .unwrap();
    req.extensions_mut()
        .insert(hyper::ext::Protocol::from_static("websocket"));
    req
}

#[tokio::test]
async fn a_websocket_over_http2_is_decided_as_its_upgrade_and_relayed_to_an_http1_server() {
    let (up, cert) = echo_server(true).await;
    let (sc, ca, _dns) = intercepting(up.port(), cert.unwrap()).await;
    let authority = format!("ws.paths.test:{}", up.port());
    let mut h2 = h2_via_connect(&sc, &ca, &authority, "ws.paths.test").await;

    h2.ready().await.unwrap();
    let resp = h2
        .send_request(extended_connect(&format!("https://{authority}/socket")))
        .await
        .unwrap_or_else(|e| panic!("the extended CONNECT failed: {e}"));
    assert_eq!(resp.status(), 200, "{resp:?}");
    assert!(
        !resp.headers().contains_key("sec-websocket-accept"),
        "no proof of a key the client never sent"
    );
    let stream = hyper::upgrade::on(resp).await.unwrap();
    let ws = tokio_tungstenite::WebSocketStream::from_raw_socket(
        hyper_util::rt::TokioIo::new(stream),
        tokio_tungstenite::tungstenite::protocol::Role::Client,
        None,
    )
    .await;
    converse(ws).await;
    let record = sc
        .admin()
        .wait_path_record("ws.paths.test", "/socket")
        .await;
    assert_eq!(record["via"], "intercept", "{record}");
    assert_eq!(
        record["method"], "GET",
        "decided as the upgrade it is: {record}"
    );
    assert_eq!(record["status"], 200, "{record}");
    assert!(record["bytes_up"].as_u64().unwrap() > 0, "{record}");
    assert!(record["bytes_down"].as_u64().unwrap() > 0, "{record}");

    // On the same connection, a path outside the rule is refused as the upgrade would be.
    h2.ready().await.unwrap();
    let refused = h2
        .send_request(extended_connect(&format!("https://{authority}/other")))
        .await
        .unwrap();
    assert_eq!(refused.status(), 403);

    // A host answered locally: the coded refusal of a switch.
    let mock = format!("ws.mock.test:{}", up.port());
    let mut h2 = h2_via_connect(&sc, &ca, &mock, "ws.mock.test").await;
    h2.ready().await.unwrap();
    let unanswered = h2
        .send_request(extended_connect(&format!("https://{mock}/socket")))
        .await
        .unwrap();
    assert_eq!(unanswered.status(), 501);
    assert_eq!(unanswered.headers()["x-af-code"], "AF-NET-049");
}
