//! The containment listeners: the report listener, where watchers post
//! `POST /v1/report` with the containment token, and the two layer witnesses, which accept a
//! connection, count it and close it (a watcher that connects has lost that layer).

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use af_policy::error::{Report, codes};
use af_sidecar_api::containment::WatchReport;
use http::{HeaderValue, Method, Request, Response, StatusCode, header};
use http_body_util::{BodyExt, Empty};
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::TcpListener;
use tokio::sync::Semaphore;

use super::containment::Watchers;
use super::{AdminBody, bearer, error};
use crate::drain::Drain;
use crate::metrics::{Metrics, Witness};

/// Largest report body.
const MAX_REPORT_BYTES: usize = 64 * 1024;
/// Report connections open at once: one per watcher is plenty, each lasts a moment.
const MAX_CONNECTIONS: usize = 256;

/// What the report listener serves from.
pub(crate) struct Reports {
    /// Where reports are kept.
    pub watchers: Arc<Watchers>,
    /// `Bearer <containment token>`.
    pub expected_auth: Vec<u8>,
    /// Counters.
    pub metrics: Arc<Metrics>,
}

/// Accept report connections until `drain` stops.
pub(crate) async fn accept_loop(listener: TcpListener, reports: Arc<Reports>, drain: Drain) {
    let open = Arc::new(Semaphore::new(MAX_CONNECTIONS));
    let stopping = drain.stopping();
    tokio::pin!(stopping);
    loop {
        let accepted = tokio::select! {
            accepted = listener.accept() => accepted,
            () = &mut stopping => return,
        };
        let Ok((stream, _)) = accepted else {
            tokio::time::sleep(Duration::from_millis(50)).await;
            continue;
        };
        let Ok(place) = open.clone().try_acquire_owned() else {
            continue;
        };
        let reports = reports.clone();
        drain.spawn(async move {
            let _place = place;
            let svc = service_fn(move |req| {
                let reports = reports.clone();
                async move { Ok::<_, Infallible>(route(&reports, req).await) }
            });
            let _ = http1::Builder::new()
                .timer(TokioTimer::new())
                .header_read_timeout(Duration::from_secs(5))
                .serve_connection(TokioIo::new(stream), svc)
                .await;
        });
    }
}

async fn route(reports: &Reports, req: Request<Incoming>) -> Response<AdminBody> {
    if !bearer(&reports.expected_auth, req.headers()) {
        reports.metrics.containment_report_refused();
        let report = Report::new(
            &codes::NET_UNAUTHORIZED,
            "A containment report needs the environment's containment token as a Bearer token.",
        );
        let mut resp = error(StatusCode::UNAUTHORIZED, &report);
        resp.headers_mut()
            .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
        return resp;
    }
    if req.method() != Method::POST || req.uri().path() != "/v1/report" {
        let report = Report::new(
            &codes::NET_ADMIN_BAD_REQUEST,
            format!(
                "{} {} is not served on the report listener.",
                req.method(),
                req.uri().path()
            ),
        )
        .with_next("POST /v1/report.");
        return error(StatusCode::NOT_FOUND, &report);
    }
    match read(req).await {
        Ok(report) => {
            reports.watchers.report(report);
            let mut resp = Response::new(Empty::new().boxed_unsync());
            *resp.status_mut() = StatusCode::NO_CONTENT;
            resp
        }
        Err(why) => {
            reports.metrics.containment_report_refused();
            let report = Report::new(
                &codes::NET_ADMIN_BAD_REQUEST,
                format!("The containment report is not of the documented shape: {why}."),
            )
            .with_next("Send {\"pod\", \"breaches\": [{\"route\", \"what\"}]}.");
            error(StatusCode::BAD_REQUEST, &report)
        }
    }
}

async fn read(req: Request<Incoming>) -> Result<WatchReport, String> {
    let body = http_body_util::Limited::new(req.into_body(), MAX_REPORT_BYTES)
        .collect()
        .await
        .map_err(|e| e.to_string())?
        .to_bytes();
    let report: WatchReport = serde_json::from_slice(&body).map_err(|e| e.to_string())?;
    match report.invalid() {
        Some(why) => Err(why),
        None => Ok(report),
    }
}

/// Accept on a layer's witness, count, close: reaching it is the whole message.
pub(crate) async fn witness_loop(
    listener: TcpListener,
    witness: Witness,
    metrics: Arc<Metrics>,
    drain: Drain,
) {
    let stopping = drain.stopping();
    tokio::pin!(stopping);
    loop {
        let accepted = tokio::select! {
            accepted = listener.accept() => accepted,
            () = &mut stopping => return,
        };
        match accepted {
            Ok((stream, peer)) => {
                metrics.witness_reached(witness);
                tracing::warn!(%peer, ?witness, "a layer's witness was reached");
                drop(stream);
            }
            Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
        }
    }
}
