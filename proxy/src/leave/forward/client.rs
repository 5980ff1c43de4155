//! The pooled upstream HTTP client, every dial through the guard, and the request body it
//! sends (counted as it goes).

use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use hyper::body::{Body, Frame, Incoming, SizeHint};
use hyper_util::client::legacy::Client;
use hyper_util::rt::{TokioExecutor, TokioTimer};

use crate::leave::forward::connector::GuardedConnector;
use crate::leave::guard::Guard;

/// The pooled upstream client.
pub(crate) type HttpClient = Client<GuardedConnector, CountingBody>;

/// Build the pooled client over the guard.
pub(crate) fn client(guard: Arc<Guard>, max_idle_per_host: usize) -> HttpClient {
    Client::builder(TokioExecutor::new())
        .timer(TokioTimer::new())
        .pool_timer(TokioTimer::new())
        .pool_idle_timeout(Duration::from_secs(90))
        .pool_max_idle_per_host(max_idle_per_host)
        .set_host(false)
        .build(GuardedConnector::new(guard))
}

/// The client's request body, counted as it goes upstream.
pub(crate) struct CountingBody {
    inner: Incoming,
    count: Arc<AtomicU64>,
}

impl CountingBody {
    /// Count `inner`'s bytes into `count`.
    pub(crate) fn new(inner: Incoming, count: Arc<AtomicU64>) -> Self {
        Self { inner, count }
    }
}

impl Body for CountingBody {
    type Data = Bytes;
    type Error = hyper::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, hyper::Error>>> {
        let res = Pin::new(&mut self.inner).poll_frame(cx);
        if let Poll::Ready(Some(Ok(frame))) = &res
            && let Some(data) = frame.data_ref()
        {
            self.count.fetch_add(data.len() as u64, Relaxed);
        }
        res
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}
