//! The pooled upstream clients, one set per thread that asks: each data thread keeps its own
//! upstream connections (and their tasks on its own runtime), so a request never takes a
//! connection, or wakes a task, on another thread (HTTP/2's first-dial gate is per pool, so per
//! thread too). What bounds them all stays shared: the guard's count of upstream connections.

use std::sync::Arc;
use std::time::Duration;

use rustls::ClientConfig;
use thread_local::ThreadLocal;

use crate::leave::forward::client::{self, HttpClient};
use crate::leave::guard::Guard;
use crate::leave::upstream::HttpsClients;

/// One thread's clients.
pub(crate) struct Clients {
    /// Plain HTTP upstreams.
    pub http: HttpClient,
    /// Intercepted requests' HTTPS upstreams.
    pub https: HttpsClients,
}

/// The clients of every thread, each made the first time its thread asks.
pub(crate) struct Pools {
    guard: Arc<Guard>,
    tls: ClientConfig,
    max_idle_per_host: usize,
    dial_timeout: Duration,
    per_thread: ThreadLocal<Clients>,
}

impl Pools {
    /// Pools over `guard`, HTTPS verified with `tls`, at most `max_idle_per_host` idle
    /// connections per host per thread; a request waits at most `dial_timeout` for another's
    /// first connection to its upstream.
    pub(crate) fn new(
        guard: Arc<Guard>,
        tls: ClientConfig,
        max_idle_per_host: usize,
        dial_timeout: Duration,
    ) -> Self {
        Self {
            guard,
            tls,
            max_idle_per_host,
            dial_timeout,
            per_thread: ThreadLocal::new(),
        }
    }

    /// The calling thread's clients.
    pub(crate) fn here(&self) -> &Clients {
        self.per_thread.get_or(|| Clients {
            http: client::client(self.guard.clone(), self.max_idle_per_host),
            https: HttpsClients::new(
                self.guard.clone(),
                self.tls.clone(),
                self.max_idle_per_host,
                self.dial_timeout,
            ),
        })
    }
}
