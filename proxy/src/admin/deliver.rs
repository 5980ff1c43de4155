//! `POST /v1/deliver`: the sidecar, which sits on the environment's internal network, makes one
//! HTTP request to one of the environment's own services for the orchestrator (`af webhook
//! trigger`). Only the environment's service names are delivered to, resolved by the
//! runtime's inside resolver, and only to addresses inside the environment's subnets.

use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use af_policy::error::{Report, codes};
use af_sidecar_api::admin::{Delivered, Delivery};
use bytes::Bytes;
use hickory_resolver::TokioResolver;
use http::{HeaderName, HeaderValue, Method, Request};
use http_body_util::{BodyExt, Full, Limited};
use hyper_util::rt::TokioIo;
use ipnet::IpNet;
use tokio::net::TcpStream;

/// Largest response body returned to the caller.
const MAX_RESPONSE_BYTES: usize = 1024 * 1024;
/// Time for the whole delivery (resolve, connect, answer); the orchestrator waits longer.
const TIMEOUT: Duration = Duration::from_secs(30);
/// How long a refused connection is tried again: a service that was just started or restarted
/// may not listen yet, and a cluster's Service refuses until its data path knows the new pod
/// (kube-proxy programs it a moment after the pod is Ready). A provider retries a refused
/// webhook too; after this the refusal is the answer.
const REFUSED_RETRY: Duration = Duration::from_secs(10);
/// The first wait after a refusal; each next one doubles, up to [`MAX_BACKOFF`].
const FIRST_BACKOFF: Duration = Duration::from_millis(50);
/// The longest wait between two tries.
const MAX_BACKOFF: Duration = Duration::from_secs(1);

/// Where deliveries may go.
pub(crate) struct Inside {
    /// The environment's service names, asked of `resolver`.
    pub names: Vec<String>,
    /// The environment's names with their addresses (a cluster's Services), never asked.
    pub hosts: BTreeMap<String, Vec<IpAddr>>,
    /// The environment's subnets; a name must resolve into one of them.
    pub subnets: Vec<IpNet>,
    /// The runtime's resolver for inside names (absent when DNS is off: nothing is delivered).
    pub resolver: Option<TokioResolver>,
}

fn refuse(statement: String) -> Report {
    Report::new(&codes::NET_DELIVERY, statement)
}

impl Inside {
    fn inside(&self, ip: &IpAddr) -> bool {
        self.subnets.iter().any(|net| net.contains(ip))
    }

    /// Deliver `d`, or say why not.
    pub(crate) async fn deliver(&self, d: Delivery) -> Result<Delivered, Report> {
        let known = |n: &String| n.eq_ignore_ascii_case(&d.service);
        if !self.names.iter().any(known) && !self.hosts.keys().any(known) {
            let all: Vec<&str> = self
                .names
                .iter()
                .chain(self.hosts.keys())
                .map(String::as_str)
                .collect();
            return Err(refuse(format!(
                "{:?} is not a service of this environment ({}).",
                d.service,
                all.join(", ")
            )));
        }
        if !d.path.starts_with('/') {
            return Err(refuse(format!(
                "The path {:?} does not start with /.",
                d.path
            )));
        }
        let service = d.service.clone();
        let delivery = async {
            let addr = self.resolve(&d.service, d.port).await?;
            send(addr, d).await
        };
        tokio::time::timeout(TIMEOUT, delivery).await.map_err(|_| {
            refuse(format!(
                "The service {service} did not answer within {} s.",
                TIMEOUT.as_secs()
            ))
        })?
    }

    async fn resolve(&self, service: &str, port: u16) -> Result<SocketAddr, Report> {
        if let Some(ip) = self
            .hosts
            .iter()
            .find(|(name, _)| name.eq_ignore_ascii_case(service))
            .and_then(|(_, addrs)| addrs.iter().find(|ip| self.inside(ip)))
        {
            return Ok(SocketAddr::new(*ip, port));
        }
        let Some(resolver) = &self.resolver else {
            return Err(refuse(
                "The sidecar has no inside resolver (its DNS listener is off), so services cannot be found.".into(),
            ));
        };
        let lookup = resolver
            .lookup_ip(format!("{service}."))
            .await
            .map_err(|e| refuse(format!("The service {service} could not be resolved: {e}.")))?;
        lookup
            .iter()
            .find(|ip| self.inside(ip))
            .map(|ip| SocketAddr::new(ip, port))
            .ok_or_else(|| {
                refuse(format!(
                    "The service {service} resolved outside the environment's subnets, so nothing was sent."
                ))
            })
    }
}

/// Connect to `addr`, trying again while it refuses, for at most [`REFUSED_RETRY`].
async fn connect(addr: SocketAddr) -> Result<TcpStream, Report> {
    let give_up = tokio::time::Instant::now() + REFUSED_RETRY;
    let mut backoff = FIRST_BACKOFF;
    loop {
        let e = match TcpStream::connect(addr).await {
            Ok(stream) => return Ok(stream),
            Err(e) => e,
        };
        if e.kind() != std::io::ErrorKind::ConnectionRefused {
            return Err(refuse(format!("{addr} could not be reached: {e}.")));
        }
        if tokio::time::Instant::now() + backoff >= give_up {
            return Err(refuse(format!(
                "{addr} refused every connection for {} s: {e}.",
                REFUSED_RETRY.as_secs()
            )));
        }
        tokio::time::sleep(backoff).await;
        backoff = (backoff * 2).min(MAX_BACKOFF);
    }
}

async fn send(addr: SocketAddr, d: Delivery) -> Result<Delivered, Report> {
    let method = Method::from_bytes(d.method.as_bytes())
        .map_err(|_| refuse(format!("{:?} is not an HTTP method.", d.method)))?;
    let mut req = Request::builder()
        .method(method)
        .uri(&d.path)
        .body(Full::new(Bytes::from(d.body)))
        .map_err(|e| refuse(format!("The request could not be built: {e}.")))?;
    let host = HeaderValue::from_str(&format!("{}:{}", d.service, d.port))
        .map_err(|_| refuse("The service name cannot be a Host header.".into()))?;
    req.headers_mut().insert(http::header::HOST, host);
    for (name, value) in &d.headers {
        let name = HeaderName::from_bytes(name.as_bytes())
            .map_err(|_| refuse(format!("{name:?} is not a header name.")))?;
        let value = HeaderValue::from_str(value)
            .map_err(|_| refuse(format!("The value of {name} cannot be sent in a header.")))?;
        req.headers_mut().insert(name, value);
    }
    let stream = connect(addr).await?;
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .map_err(|e| refuse(format!("{addr} did not speak HTTP/1.1: {e}.")))?;
    tokio::spawn(conn);
    let resp = sender
        .send_request(req)
        .await
        .map_err(|e| refuse(format!("{addr} failed the request: {e}.")))?;
    let status = resp.status().as_u16();
    let headers = resp
        .headers()
        .iter()
        .map(|(k, v)| {
            (
                k.to_string(),
                String::from_utf8_lossy(v.as_bytes()).into_owned(),
            )
        })
        .collect();
    let body = Limited::new(resp.into_body(), MAX_RESPONSE_BYTES)
        .collect()
        .await
        .map_err(|e| refuse(format!("The answer from {addr} could not be read: {e}.")))?
        .to_bytes();
    Ok(Delivered {
        status,
        headers,
        body: String::from_utf8_lossy(&body).into_owned(),
    })
}
