//! gRPC through interception with a real client and server (tonic's, over hyper's HTTP/2):
//! through the explicit proxy (CONNECT, then the environment CA's leaf) and the transparent
//! TLS listener. The sidecar offers the upstream HTTP/2 by ALPN and carries every call with
//! its trailers: a unary call, a server stream, a client stream, a bidirectional stream, a
//! deadline and a failing call's `grpc-status`. What the sidecar refuses (a path outside the
//! rule, a blocked host, a host it answers itself) is answered in gRPC's terms, the code in
//! `grpc-message`. A hundred concurrent calls on one client connection reach the upstream
//! over a handful of connections.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::convert::Infallible;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use af_fixtures::grpc_echo::{Raw, serve};
use af_fixtures::test_resolver::TestResolver;
use bytes::Bytes;
use common::intercept::{TestCa, client, tls_direct, tls_via_connect};
use common::*;
use futures_util::StreamExt;
use http::uri::PathAndQuery;
use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioIo};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use serde_json::Value;
use tokio::net::TcpListener;
use tokio_rustls::TlsAcceptor;
use tonic::{Code, Status};

/// Each rule that lets calls through names the server's port ([`on_port`]); the block covers
/// every port.
const EGRESS: &str = r#"  default: block
  rules:
    - host: grpc.paths.test:{port}
      mode: allow
      paths: [/af.test.Echo/]
    - host: grpc.sandbox.test:{port}
      mode: sandbox
      credential: SANDBOX_KEY
    - host: grpc.blocked.test
      mode: block
    - host: grpc.mock.test:{port}
      mode: mock
"#;

const NAMES: [&str; 4] = [
    "grpc.paths.test",
    "grpc.sandbox.test",
    "grpc.blocked.test",
    "grpc.mock.test",
];

/// What the server saw: each call's `authorization` (empty if none) and its connections.
#[derive(Clone, Default)]
struct Seen {
    auth: Arc<Mutex<Vec<String>>>,
    connections: Arc<AtomicU64>,
}

/// The test's gRPC server, `af.test.Echo`, in TLS (ALPN `h2`) on `UPSTREAM_IP` with a
/// self-signed certificate for `NAMES`: its address, certificate and what it saw.
async fn grpc_server() -> (SocketAddr, CertificateDer<'static>, Seen) {
    let names: Vec<String> = NAMES.iter().map(|n| (*n).to_owned()).collect();
    let certified = rcgen::generate_simple_self_signed(names).unwrap();
    let cert = certified.cert.der().clone();
    let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(
        certified.signing_key.serialize_der(),
    ));
    let mut config = rustls::ServerConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_no_client_auth()
    .with_single_cert(vec![cert.clone()], key)
    .unwrap();
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    let acceptor = TlsAcceptor::from(Arc::new(config));
    let listener = TcpListener::bind((upstream_ip(), 0)).await.unwrap();
    let addr = listener.local_addr().unwrap();
    let seen = Seen::default();
    let server_seen = seen.clone();
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let (acceptor, seen) = (acceptor.clone(), server_seen.clone());
            tokio::spawn(async move {
                let Ok(tls) = acceptor.accept(stream).await else {
                    return;
                };
                assert_eq!(
                    tls.get_ref().1.alpn_protocol(),
                    Some(&b"h2"[..]),
                    "the sidecar offered HTTP/2"
                );
                seen.connections.fetch_add(1, Relaxed);
                let svc = hyper::service::service_fn(move |req| echo(req, seen.clone()));
                let _ = hyper::server::conn::http2::Builder::new(TokioExecutor::new())
                    .serve_connection(TokioIo::new(tls), svc)
                    .await;
            });
        }
    });
    (addr, cert, seen)
}

/// `af.test.Echo` ([`serve`]), each call's `authorization` noted first.
async fn echo(
    req: http::Request<Incoming>,
    seen: Seen,
) -> Result<http::Response<tonic::body::Body>, Infallible> {
    let auth = req
        .headers()
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_owned();
    seen.auth.lock().unwrap().push(auth);
    Ok(serve(req).await)
}

/// A gRPC client's transport: one HTTP/2 connection, as a client library keeps it.
#[derive(Clone)]
struct H2(hyper::client::conn::http2::SendRequest<tonic::body::Body>);

impl tower_service::Service<http::Request<tonic::body::Body>> for H2 {
    type Response = http::Response<Incoming>;
    type Error = hyper::Error;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, hyper::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), hyper::Error>> {
        self.0.poll_ready(cx)
    }

    fn call(&mut self, req: http::Request<tonic::body::Body>) -> Self::Future {
        Box::pin(self.0.send_request(req))
    }
}

type Client = tonic::client::Grpc<H2>;

/// How the client reaches the sidecar.
#[derive(Debug, Clone, Copy)]
enum Route {
    /// CONNECT through the proxy listener, then TLS inside.
    Proxy,
    /// TLS straight to the transparent listener (the environment's DNS sent it there).
    Transparent,
}

/// A gRPC client to `host` (port `port` through the proxy; the transparent listener's
/// upstream port otherwise), its TLS opened by the sidecar with the environment CA.
async fn grpc_client(sc: &Sidecar, ca: &TestCa, route: Route, host: &str, port: u16) -> Client {
    let connector = client(&[&ca.cert_der], &[b"h2"]);
    let tls = match route {
        Route::Proxy => tls_via_connect(sc.proxy(), &format!("{host}:{port}"), host, &connector)
            .await
            .unwrap(),
        Route::Transparent => tls_direct(sc.tls(), host, &connector).await.unwrap(),
    };
    assert_eq!(tls.get_ref().1.alpn_protocol(), Some(&b"h2"[..]));
    let (send, conn) =
        hyper::client::conn::http2::handshake(TokioExecutor::new(), TokioIo::new(tls))
            .await
            .unwrap();
    tokio::spawn(conn);
    let origin = match route {
        Route::Proxy => format!("https://{host}:{port}"),
        Route::Transparent => format!("https://{host}"),
    };
    tonic::client::Grpc::with_origin(H2(send), origin.parse().unwrap())
}

fn method(name: &'static str) -> PathAndQuery {
    PathAndQuery::from_static(name)
}

async fn unary(
    client: &mut Client,
    path: &'static str,
    body: &'static [u8],
) -> Result<Bytes, Status> {
    client.ready().await.unwrap();
    client
        .unary(
            tonic::Request::new(Bytes::from_static(body)),
            method(path),
            Raw,
        )
        .await
        .map(tonic::Response::into_inner)
}

/// A sidecar with the environment CA, trusting the server's certificate, its transparent TLS
/// listener forwarding to the server's port.
async fn sidecar(
    server: SocketAddr,
    cert: CertificateDer<'static>,
) -> (Sidecar, TestCa, TestResolver) {
    let table = NAMES.iter().map(|n| (*n, vec![upstream_ip()])).collect();
    let dns = resolver(table).await;
    let ca = TestCa::new();
    let mut setup = Setup::new(&on_port(EGRESS, server.port()), dns.addr);
    setup.tls_port = server.port();
    setup.extra = format!(
        "{}modes:\n  credentials:\n    SANDBOX_KEY: sk_test_sandbox_key\n",
        ca.tls_yaml(64, &[cert])
    );
    (Sidecar::start(&setup).await, ca, dns)
}

/// Every kind of call on `host` by `route`, each with its outcome and its record.
async fn every_kind_of_call(
    sc: &Sidecar,
    ca: &TestCa,
    route: Route,
    host: &str,
    port: u16,
    mode: &str,
) {
    let mut c = grpc_client(sc, ca, route, host, port).await;

    let echoed = unary(&mut c, "/af.test.Echo/Unary", b"hello through af").await;
    assert_eq!(echoed.unwrap(), "hello through af", "{route:?} {host}");

    c.ready().await.unwrap();
    let counted = c
        .server_streaming(
            tonic::Request::new(Bytes::from_static(&[5])),
            method("/af.test.Echo/Count"),
            Raw,
        )
        .await
        .unwrap()
        .into_inner();
    let counted: Vec<Bytes> = counted.map(Result::unwrap).collect().await;
    assert_eq!(
        counted,
        (0..5u8).map(|i| Bytes::from(vec![i])).collect::<Vec<_>>()
    );

    c.ready().await.unwrap();
    let parts =
        tokio_stream::iter(["one ", "two ", "three"].map(|p| Bytes::from_static(p.as_bytes())));
    let joined = c
        .client_streaming(
            tonic::Request::new(parts),
            method("/af.test.Echo/Join"),
            Raw,
        )
        .await
        .unwrap()
        .into_inner();
    assert_eq!(joined, "one two three");

    // Bidirectional: each answer arrives before the next message is sent.
    c.ready().await.unwrap();
    let (tx, rx) = tokio::sync::mpsc::channel::<Bytes>(1);
    let outbound = tokio_stream::wrappers::ReceiverStream::new(rx);
    let mut answers = c
        .streaming(
            tonic::Request::new(outbound),
            method("/af.test.Echo/Shout"),
            Raw,
        )
        .await
        .unwrap()
        .into_inner();
    for word in ["ping", "pong", "done"] {
        tx.send(Bytes::from_static(word.as_bytes())).await.unwrap();
        let answer = answers.message().await.unwrap().expect("an answer");
        assert_eq!(answer, word.to_ascii_uppercase());
    }
    drop(tx);
    assert!(
        answers.message().await.unwrap().is_none(),
        "the stream ends with OK"
    );
    drop(answers);

    // The deadline reaches the server as the client set it, and its status comes back.
    c.ready().await.unwrap();
    let mut slow = tonic::Request::new(Bytes::from_static(b"take your time"));
    slow.set_timeout(Duration::from_millis(300));
    let late = c
        .unary(slow, method("/af.test.Echo/Slow"), Raw)
        .await
        .unwrap_err();
    assert_eq!(late.code(), Code::DeadlineExceeded, "{late:?}");
    assert_eq!(late.message(), "the deadline of 300 ms passed");

    // A failing call's status and message come back from the server's trailers.
    let failed = unary(&mut c, "/af.test.Echo/Fail", b"order 7")
        .await
        .unwrap_err();
    assert_eq!(
        (failed.code(), failed.message()),
        (Code::NotFound, "no such order")
    );

    // Each call's record: its rule's verdict, the HTTP status and the call's own gRPC status.
    for (path, grpc_status, answered) in [
        ("/af.test.Echo/Unary", 0, true),
        ("/af.test.Echo/Count", 0, true),
        ("/af.test.Echo/Join", 0, true),
        ("/af.test.Echo/Shout", 0, true),
        ("/af.test.Echo/Slow", Code::DeadlineExceeded as u64, false),
        ("/af.test.Echo/Fail", Code::NotFound as u64, false),
    ] {
        let record = sc.admin().wait_path_record(host, path).await;
        assert_eq!(record["via"], "intercept", "{record}");
        assert_eq!(record["mode"], mode, "{record}");
        assert_eq!(
            record["rule"],
            format!("rules[0] {host}:{port}"),
            "{record}"
        );
        assert_eq!(record["status"], 200, "{record}");
        assert_eq!(record["grpc_status"], grpc_status, "{record}");
        assert_eq!(record["outcome"], "forwarded", "{record}");
        let down = record["bytes_down"].as_u64().unwrap();
        assert_eq!(down > 0, answered, "{record}");
    }
    let bytes_up = |r: Value| r["bytes_up"].as_u64().unwrap();
    assert!(
        bytes_up(
            sc.admin()
                .wait_path_record(host, "/af.test.Echo/Join")
                .await
        ) >= 13 + 3 * 5
    );

    // The connection's own record, at its close, names the host's rule (whose paths opened
    // it), not the default that takes the requests outside them.
    drop(c);
    let opened = sc
        .admin()
        .wait_record(host, "connection", |r| r["intercepted"] == true)
        .await;
    assert_eq!(opened["outcome"], "opened", "{opened}");
    assert_eq!(
        opened["rule"],
        format!("rules[0] {host}:{port}"),
        "{opened}"
    );
    assert_eq!(
        (opened["mode"].as_str(), opened["reason"].as_str()),
        (Some(mode), Some("narrowed")),
        "{opened}"
    );
}

#[tokio::test]
async fn every_kind_of_grpc_call_passes_interception_with_its_trailers() {
    let (server, cert, _) = grpc_server().await;
    let (sc, ca, _dns) = sidecar(server, cert).await;
    every_kind_of_call(
        &sc,
        &ca,
        Route::Proxy,
        "grpc.paths.test",
        server.port(),
        "allow",
    )
    .await;
}

#[tokio::test]
async fn grpc_through_the_transparent_listener_is_intercepted_the_same() {
    let (server, cert, _) = grpc_server().await;
    let (sc, ca, _dns) = sidecar(server, cert).await;
    every_kind_of_call(
        &sc,
        &ca,
        Route::Transparent,
        "grpc.paths.test",
        server.port(),
        "allow",
    )
    .await;
}

#[tokio::test]
async fn a_sandboxed_grpc_call_carries_the_test_credential_only() {
    let (server, cert, seen) = grpc_server().await;
    let (sc, ca, _dns) = sidecar(server, cert).await;
    let mut c = grpc_client(&sc, &ca, Route::Proxy, "grpc.sandbox.test", server.port()).await;
    c.ready().await.unwrap();
    let mut req = tonic::Request::new(Bytes::from_static(b"charge"));
    req.metadata_mut().insert(
        "authorization",
        "Bearer the-services-own-key".parse().unwrap(),
    );
    let echoed = c
        .unary(req, method("/af.test.Echo/Unary"), Raw)
        .await
        .unwrap();
    assert_eq!(echoed.into_inner(), "charge");
    assert_eq!(*seen.auth.lock().unwrap(), ["Bearer sk_test_sandbox_key"]);
    let record = sc
        .admin()
        .wait_path_record("grpc.sandbox.test", "/af.test.Echo/Unary")
        .await;
    assert_eq!(
        (record["mode"].as_str(), record["status"].as_u64()),
        (Some("sandbox"), Some(200))
    );
}

#[tokio::test]
async fn what_the_sidecar_refuses_a_grpc_client_reads_in_grpc_terms() {
    let (server, cert, seen) = grpc_server().await;
    let (sc, ca, _dns) = sidecar(server, cert).await;

    // Positive control on the same host and connection: the rule's own path is served.
    let mut c = grpc_client(&sc, &ca, Route::Proxy, "grpc.paths.test", server.port()).await;
    assert_eq!(
        unary(&mut c, "/af.test.Echo/Unary", b"in").await.unwrap(),
        "in"
    );
    let outside = unary(&mut c, "/af.test.Other/Call", b"out")
        .await
        .unwrap_err();
    assert_eq!(outside.code(), Code::PermissionDenied, "{outside:?}");
    assert!(outside.message().starts_with("AF-NET-"), "{outside:?}");
    assert!(outside.message().contains("Next:"), "{outside:?}");
    let code = outside
        .metadata()
        .get("x-af-code")
        .unwrap()
        .to_str()
        .unwrap()
        .to_owned();
    assert!(outside.message().starts_with(&code), "{outside:?}");
    let record = sc
        .admin()
        .wait_path_record("grpc.paths.test", "/af.test.Other/Call")
        .await;
    assert_eq!(record["code"], code.as_str(), "{record}");
    assert_eq!(record["allowed"], false, "{record}");

    // A host the sidecar answers itself: no pack describes gRPC.
    let mut mock = grpc_client(&sc, &ca, Route::Proxy, "grpc.mock.test", server.port()).await;
    let unanswered = unary(&mut mock, "/af.test.Echo/Unary", b"x")
        .await
        .unwrap_err();
    assert_eq!(unanswered.code(), Code::Unimplemented, "{unanswered:?}");
    assert!(
        unanswered.message().starts_with("AF-NET-050 "),
        "{unanswered:?}"
    );
    let record = sc
        .admin()
        .wait_path_record("grpc.mock.test", "/af.test.Echo/Unary")
        .await;
    assert_eq!(record["code"], "AF-NET-050", "{record}");

    // A blocked host through the transparent listener: the TLS is opened to answer the call.
    let mut blocked = grpc_client(&sc, &ca, Route::Transparent, "grpc.blocked.test", 0).await;
    let refused = unary(&mut blocked, "/af.test.Echo/Unary", b"x")
        .await
        .unwrap_err();
    assert_eq!(refused.code(), Code::PermissionDenied, "{refused:?}");
    assert!(refused.message().starts_with("AF-NET-010 "), "{refused:?}");
    // Through the proxy the CONNECT itself is refused.
    let (head, _) =
        connect_tunnel(sc.proxy(), &format!("grpc.blocked.test:{}", server.port())).await;
    assert!(head.starts_with("HTTP/1.1 403"), "{head}");

    assert_eq!(
        seen.auth.lock().unwrap().len(),
        1,
        "only the positive control reached the server"
    );
}

#[tokio::test]
async fn a_hundred_concurrent_calls_on_one_connection_share_a_handful_of_upstream_connections() {
    let (server, cert, seen) = grpc_server().await;
    let (sc, ca, _dns) = sidecar(server, cert).await;
    let c = grpc_client(&sc, &ca, Route::Proxy, "grpc.paths.test", server.port()).await;
    let dials_before = sc.admin().metric("af_proxy_upstream_dials_total").await;
    let calls = (0..100u8).map(|n| {
        let mut c = c.clone();
        tokio::spawn(async move {
            c.ready().await.unwrap();
            let answer = c
                .unary(
                    tonic::Request::new(Bytes::from(vec![n])),
                    method("/af.test.Echo/Unary"),
                    Raw,
                )
                .await
                .unwrap();
            assert_eq!(answer.into_inner(), Bytes::from(vec![n]));
        })
    });
    for call in futures_util::future::join_all(calls).await {
        call.unwrap();
    }
    let dials = sc.admin().metric("af_proxy_upstream_dials_total").await - dials_before;
    let connections = seen.connections.load(Relaxed);
    assert!(dials <= 4, "{dials} upstream dials for 100 calls");
    assert!(
        connections <= 4,
        "{connections} upstream connections for 100 calls"
    );
    assert_eq!(
        seen.auth.lock().unwrap().len(),
        100,
        "every call reached the server"
    );
    let records = sc.admin().wait_records("host=grpc.paths.test", 100).await;
    let answered = records.iter().filter(|r| r["status"] == 200).count();
    assert!(answered >= 100, "{answered} calls recorded answered");
}
