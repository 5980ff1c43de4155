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

/// The bytes of a request's body sent upstream so far, shared by the body going up and the
/// answer's body, which journals them. A request without a body has nothing to count and
/// allocates nothing.
#[derive(Clone, Default)]
pub(crate) struct SentBytes(Option<Arc<AtomicU64>>);

impl SentBytes {
    /// A count for `body`'s bytes.
    pub(crate) fn for_body(body: &Incoming) -> Self {
        Self((!body.is_end_stream()).then(Arc::default))
    }

    /// Bytes sent so far.
    pub(crate) fn get(&self) -> u64 {
        self.0.as_ref().map_or(0, |n| n.load(Relaxed))
    }

    fn add(&self, n: usize) {
        if let Some(sent) = &self.0 {
            sent.fetch_add(n as u64, Relaxed);
        }
    }
}

/// The client's request body, counted as it goes upstream.
pub(crate) struct CountingBody {
    inner: Incoming,
    count: SentBytes,
}

impl CountingBody {
    /// Count `inner`'s bytes into `count`.
    pub(crate) fn new(inner: Incoming, count: SentBytes) -> Self {
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
            self.count.add(data.len());
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
