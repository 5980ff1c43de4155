//! The body of every answer a client gets: one the sidecar made, or the upstream's, which
//! closes its ticket (writes the record) when it ends.

use std::pin::Pin;
use std::task::{Context, Poll};

use af_policy::error::codes;
use bytes::Bytes;
use http_body_util::{Either, Full};
use hyper::body::{Body, Frame, Incoming, SizeHint};

use crate::answer::grpc;
use crate::decide::Ticket;
use crate::leave::forward::client::SentBytes;

/// The body of every answer the data listeners give.
pub(crate) type ProxyBody = Either<Full<Bytes>, JournaledBody>;

/// The upstream's response body; closes the ticket (writes the record) when it ends.
pub(crate) struct JournaledBody {
    inner: Incoming,
    ticket: Option<Ticket>,
    status: u16,
    up: SentBytes,
    down: u64,
}

impl JournaledBody {
    /// The upstream's `inner` body for the request `ticket` forwarded, answered with `status`
    /// after `up` bytes went up.
    pub(crate) fn new(inner: Incoming, ticket: Ticket, status: u16, up: SentBytes) -> Self {
        Self {
            inner,
            ticket: Some(ticket),
            status,
            up,
            down: 0,
        }
    }

    fn close(&mut self, error: Option<(&'static str, String)>) {
        if let Some(ticket) = self.ticket.take() {
            let up = self.up.get();
            match error {
                None => ticket.forwarded(Some(self.status), up, self.down),
                Some((reason, error)) => ticket.upstream_failed(
                    Some(self.status),
                    &codes::NET_UPSTREAM,
                    reason,
                    error,
                    up,
                    self.down,
                ),
            }
        }
    }
}

impl Body for JournaledBody {
    type Data = Bytes;
    type Error = hyper::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, hyper::Error>>> {
        let res = Pin::new(&mut self.inner).poll_frame(cx);
        match &res {
            Poll::Ready(Some(Ok(frame))) => {
                if let Some(data) = frame.data_ref() {
                    self.down += data.len() as u64;
                } else if let Some(trailers) = frame.trailers_ref()
                    && let Some(status) = grpc::status_of(trailers)
                    && let Some(ticket) = &mut self.ticket
                {
                    ticket.grpc_status(status);
                }
                if self.inner.is_end_stream() {
                    self.close(None);
                }
            }
            Poll::Ready(None) => self.close(None),
            Poll::Ready(Some(Err(e))) => {
                let msg = format!("the upstream response body failed: {e}");
                self.close(Some(("upstream", msg)));
            }
            Poll::Pending => {}
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

impl Drop for JournaledBody {
    fn drop(&mut self) {
        if self.inner.is_end_stream() {
            return self.close(None);
        }
        if let Some(ticket) = self.ticket.take_if(|t| t.is_cut()) {
            return ticket.cut(Some(self.status), self.up.get(), self.down);
        }
        self.close(Some((
            "client_gone",
            "the client went away before the response ended".to_owned(),
        )));
    }
}
