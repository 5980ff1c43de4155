//! The sidecar's admin API, as the harness reads it: pages of journal records and the metrics.

use std::net::SocketAddr;

use af_sidecar_api::admin::Page;
use af_sidecar_api::journal::Record;
use bytes::Bytes;
use http_body_util::{BodyExt, Empty};
use hyper::Request;
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;

use crate::error::{BenchError, Result};
use crate::systems::ADMIN_TOKEN;

/// Records per page (the API's largest).
const PAGE: usize = 1000;

/// The admin API at `addr`, with the harness's token.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Admin {
    addr: SocketAddr,
}

impl Admin {
    /// The API at `addr`.
    pub(crate) fn new(addr: SocketAddr) -> Self {
        Self { addr }
    }

    /// The records after `since`, at most one page (`/v1/decisions`).
    pub(crate) async fn page(&self, since: u64) -> Result<Page> {
        let body = self
            .get(&format!("/v1/decisions?since={since}&limit={PAGE}"))
            .await?;
        serde_json::from_slice(&body).map_err(|e| BenchError::Protocol(format!("admin page: {e}")))
    }

    /// Every record after `since`, page by page.
    pub(crate) async fn all(&self, mut since: u64) -> Result<Vec<Record>> {
        let mut out = Vec::new();
        loop {
            let page = self.page(since).await?;
            if page.records.is_empty() {
                return Ok(out);
            }
            since = page.next_since;
            out.extend(page.records);
        }
    }

    /// One counter of `/metrics` (the sum of its series).
    pub(crate) async fn metric(&self, name: &str) -> Result<f64> {
        Ok(self.metric_if_shown(name).await?.unwrap_or(0.0))
    }

    /// One counter of `/metrics`, or `None` when the sidecar does not show it (a counter only
    /// some builds have, like `af_proxy_allocations_total`).
    pub(crate) async fn metric_if_shown(&self, name: &str) -> Result<Option<f64>> {
        let text = String::from_utf8_lossy(&self.get("/metrics").await?).into_owned();
        Ok(metric_sum(&text, name))
    }

    async fn get(&self, path: &str) -> Result<Bytes> {
        let stream = TcpStream::connect(self.addr)
            .await
            .map_err(|e| BenchError::io(format!("connect admin {}", self.addr), e))?;
        let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
            .await
            .map_err(|e| BenchError::Protocol(format!("admin handshake: {e}")))?;
        tokio::spawn(conn);
        let request = Request::get(path)
            .header("host", self.addr.to_string())
            .header("authorization", format!("Bearer {ADMIN_TOKEN}"))
            .body(Empty::<Bytes>::new())
            .map_err(|e| BenchError::Protocol(format!("admin request: {e}")))?;
        let response = sender
            .send_request(request)
            .await
            .map_err(|e| BenchError::Protocol(format!("admin {path}: {e}")))?;
        let status = response.status();
        let body = response
            .into_body()
            .collect()
            .await
            .map_err(|e| BenchError::Protocol(format!("admin {path} body: {e}")))?
            .to_bytes();
        if !status.is_success() {
            return Err(BenchError::Protocol(format!(
                "admin {path}: {status} {}",
                String::from_utf8_lossy(&body)
            )));
        }
        Ok(body)
    }
}

/// The sum of every series of `name` in Prometheus text, `None` when it has none.
fn metric_sum(text: &str, name: &str) -> Option<f64> {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| {
            let (series, value) = l.rsplit_once(' ')?;
            let metric = series.split('{').next()?;
            (metric == name).then(|| value.parse::<f64>().ok())?
        })
        .reduce(|a, b| a + b)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_metric_sums_its_series_and_an_absent_one_is_none() {
        let text = "# HELP af_proxy_requests_total x\n\
                    af_proxy_requests_total{via=\"proxy\"} 3\n\
                    af_proxy_requests_total{via=\"tls\"} 4\n\
                    af_proxy_requests_total_other 100\n";
        assert_eq!(metric_sum(text, "af_proxy_requests_total"), Some(7.0));
        assert_eq!(metric_sum(text, "af_proxy_missing"), None);
    }
}
