//! The pooled client's connector: every new upstream connection is a guard dial.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use http::Uri;
use hyper_util::rt::TokioIo;

use crate::leave::guard::{DialError, Guard};
use crate::limits::UpstreamConn;

/// A connector that resolves, checks and dials through the [`Guard`].
#[derive(Clone)]
pub(crate) struct GuardedConnector {
    guard: Arc<Guard>,
}

impl GuardedConnector {
    /// A connector over `guard`.
    pub(crate) fn new(guard: Arc<Guard>) -> Self {
        Self { guard }
    }
}

impl tower_service::Service<Uri> for GuardedConnector {
    type Response = TokioIo<UpstreamConn>;
    type Error = DialError;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, DialError>> + Send>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), DialError>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, uri: Uri) -> Self::Future {
        let guard = self.guard.clone();
        Box::pin(async move {
            let host = uri.host().unwrap_or_default();
            let port = uri.port_u16().unwrap_or(80);
            guard.dial(host, port).await.map(TokioIo::new)
        })
    }
}
