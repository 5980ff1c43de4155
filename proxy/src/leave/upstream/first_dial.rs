//! The first connection to an HTTPS upstream, dialled once.
//!
//! The pooled client learns only from ALPN, once a connection is made, that an upstream speaks
//! HTTP/2 and can carry every request on one connection. Until then each request in a burst
//! dials its own (a client's 100 streams became about 100 upstream connections). So while the
//! first connection to an upstream is being made, the other requests for it wait for that one;
//! then they check out the HTTP/2 connection it made, or dial their own if the upstream
//! turned out to speak HTTP/1.1, which is remembered so that its requests never wait again.
//!
//! What is remembered is bounded ([`FirstDial::new`]'s `capacity`) and only a hint: an
//! upstream not seen for a while is led again, as the pool may have closed its connection.

use std::collections::HashMap;
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use http::Request;
use hyper_util::client::legacy::connect::{CaptureConnection, capture_connection};
use tokio::sync::watch;

/// What is known of an upstream's connections.
enum Seen {
    /// Its first connection is being made; the receiver closes when it is.
    Dialing(watch::Receiver<()>),
    /// It spoke HTTP/2 at this time: its pooled connection carries every request.
    Http2(Instant),
    /// It speaks HTTP/1.1: a request in flight needs a connection of its own.
    Http1,
}

/// The gate before an HTTPS upstream's first connection.
pub(crate) struct FirstDial {
    seen: Mutex<HashMap<Box<str>, Seen>>,
    capacity: usize,
    /// How long a waiting request waits for the first connection before dialling its own.
    wait: Duration,
    /// How long an HTTP/2 upstream's pooled connection is trusted to stay open while unused.
    fresh: Duration,
}

/// The turn of a request: the one that makes the first connection, and settles the gate.
pub(crate) struct Lead {
    gate: Arc<FirstDial>,
    authority: Box<str>,
    capture: CaptureConnection,
    /// Wakes every waiter when the first connection is made ([`Lead::settle`]), or when
    /// dropped.
    done: watch::Sender<()>,
}

impl FirstDial {
    /// A gate remembering at most `capacity` upstreams, whose waiters wait at most `wait`, and
    /// which trusts an HTTP/2 upstream's pooled connection for `fresh` after its last use.
    pub(crate) fn new(capacity: usize, wait: Duration, fresh: Duration) -> Arc<Self> {
        Arc::new(Self {
            seen: Mutex::new(HashMap::new()),
            capacity: capacity.max(1),
            wait,
            fresh,
        })
    }

    /// Wait for the turn of `req` to `authority`: `Some` when it makes the first connection
    /// (pass it to [`Lead::send`]), `None` when it just goes.
    pub(crate) async fn turn<B>(
        self: &Arc<Self>,
        authority: &str,
        req: &mut Request<B>,
    ) -> Option<Lead> {
        let mut waiting = {
            let mut seen = self.seen.lock().unwrap_or_else(|e| e.into_inner());
            match seen.get_mut(authority) {
                Some(Seen::Http1) => return None,
                Some(Seen::Http2(at)) if at.elapsed() < self.fresh => {
                    *at = Instant::now();
                    return None;
                }
                Some(Seen::Dialing(rx)) => rx.clone(),
                _ => return Some(self.lead(&mut seen, authority, req)),
            }
        };
        // Whatever the first connection turned out to be (or after `wait`), go: the pool has
        // it, or it is HTTP/1.1, or it failed and this request tries on its own.
        let _ = tokio::time::timeout(self.wait, waiting.changed()).await;
        None
    }

    fn lead<B>(
        self: &Arc<Self>,
        seen: &mut HashMap<Box<str>, Seen>,
        authority: &str,
        req: &mut Request<B>,
    ) -> Lead {
        if seen.len() >= self.capacity {
            // Hints only: drop what is settled, keep the dials in progress.
            seen.retain(|_, s| matches!(s, Seen::Dialing(_)));
        }
        let (done, waiting) = watch::channel(());
        seen.insert(authority.into(), Seen::Dialing(waiting));
        Lead {
            gate: self.clone(),
            authority: authority.into(),
            capture: capture_connection(req),
            done,
        }
    }

    /// Replace the dial in progress to `authority` with what it `learnt` (or forget it). An
    /// entry dropped meanwhile to keep the bound stays dropped.
    fn settle(&self, authority: &str, learnt: Option<Seen>) {
        let mut seen = self.seen.lock().unwrap_or_else(|e| e.into_inner());
        match learnt {
            Some(s) => {
                if let Some(entry) = seen.get_mut(authority) {
                    *entry = s;
                }
            }
            None => {
                seen.remove(authority);
            }
        }
    }

    /// How many upstreams are remembered (for tests).
    #[cfg(test)]
    fn len(&self) -> usize {
        self.seen.lock().map_or(0, |s| s.len())
    }
}

impl Lead {
    /// Drive `sending` (the request this lead was taken for) and settle the gate as soon as its
    /// connection is made: the waiters go while the first request is still being answered.
    pub(crate) async fn send<F: Future>(mut self, sending: F) -> F::Output {
        let mut sending = std::pin::pin!(sending);
        tokio::select! {
            biased;
            out = &mut sending => {
                self.settle();
                out
            }
            () = async { self.capture.wait_for_connection_metadata().await; } => {
                self.settle();
                sending.await
            }
        }
    }

    /// Record what the first connection spoke, and let the waiters go: they need not wait for
    /// this request's answer, only for its connection.
    fn settle(&self) {
        let learnt = self.capture.connection_metadata().as_ref().map(|c| {
            if c.is_negotiated_h2() {
                Seen::Http2(Instant::now())
            } else {
                Seen::Http1
            }
        });
        self.gate.settle(&self.authority, learnt);
        self.done.send_replace(());
    }
}

impl Drop for Lead {
    fn drop(&mut self) {
        // A lead dropped unsettled (its request cancelled) must not leave a dial in progress
        // behind it: the next request leads.
        let mut seen = self.gate.seen.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(Seen::Dialing(_)) = seen.get(&*self.authority) {
            seen.remove(&*self.authority);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req() -> Request<()> {
        Request::new(())
    }

    /// Make `authority`'s first dial and settle it as `learnt`.
    async fn remember(gate: &Arc<FirstDial>, authority: &str, learnt: Seen) {
        let lead = gate.turn(authority, &mut req()).await.expect("leads");
        gate.settle(authority, Some(learnt));
        drop(lead);
    }

    #[tokio::test]
    async fn the_first_request_leads_and_the_others_wait_for_it() {
        let gate = FirstDial::new(8, Duration::from_secs(5), Duration::from_secs(60));
        let lead = gate.turn("a.test:443", &mut req()).await.expect("leads");
        let waiter = {
            let gate = gate.clone();
            tokio::spawn(async move { gate.turn("a.test:443", &mut req()).await.is_none() })
        };
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(
            !waiter.is_finished(),
            "it waits while the first dial is made"
        );
        // Another upstream has its own first dial.
        assert!(gate.turn("b.test:443", &mut req()).await.is_some());
        drop(lead);
        assert!(
            waiter.await.expect("joined"),
            "it goes once the lead is done"
        );
    }

    #[tokio::test]
    async fn what_the_first_connection_spoke_decides_who_waits_next() {
        let gate = FirstDial::new(8, Duration::from_secs(5), Duration::from_secs(60));
        remember(&gate, "h1.test:443", Seen::Http1).await;
        remember(&gate, "h2.test:443", Seen::Http2(Instant::now())).await;
        assert!(gate.turn("h1.test:443", &mut req()).await.is_none());
        assert!(gate.turn("h2.test:443", &mut req()).await.is_none());
        let stale = FirstDial::new(8, Duration::from_secs(5), Duration::ZERO);
        remember(&stale, "h2.test:443", Seen::Http2(Instant::now())).await;
        assert!(
            stale.turn("h2.test:443", &mut req()).await.is_some(),
            "an HTTP/2 upstream not used lately is led again"
        );
    }

    #[tokio::test]
    async fn the_waiters_go_once_the_first_connection_is_made_not_when_its_answer_comes() {
        let gate = FirstDial::new(8, Duration::from_secs(60), Duration::from_secs(60));
        let lead = gate.turn("a.test:443", &mut req()).await.expect("leads");
        let waiter = {
            let gate = gate.clone();
            tokio::spawn(async move { gate.turn("a.test:443", &mut req()).await.is_none() })
        };
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(
            !waiter.is_finished(),
            "it waits while the first dial is made"
        );
        // Settled (no connection was captured here: the entry is forgotten), lead still held.
        lead.settle();
        let went = tokio::time::timeout(Duration::from_secs(5), waiter).await;
        assert!(
            went.expect("it went before the lead was dropped")
                .expect("joined")
        );
        drop(lead);
    }

    #[tokio::test]
    async fn a_waiter_goes_after_the_wait_even_if_the_lead_hangs() {
        let gate = FirstDial::new(8, Duration::from_millis(50), Duration::from_secs(60));
        let _lead = gate.turn("slow.test:443", &mut req()).await.expect("leads");
        assert!(gate.turn("slow.test:443", &mut req()).await.is_none());
    }

    #[tokio::test]
    async fn what_is_remembered_is_bounded() {
        let gate = FirstDial::new(4, Duration::from_secs(5), Duration::from_secs(60));
        for n in 0..100 {
            remember(&gate, &format!("h{n}.test:443"), Seen::Http1).await;
        }
        assert!(gate.len() <= 4, "{} remembered", gate.len());
    }
}
