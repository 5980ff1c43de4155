//! A pod's port as an address on this machine: a listener on 127.0.0.1 whose every connection
//! is carried through the API server's port-forward. The kubelet enters the pod's network
//! namespace, so a port bound to the pod's own loopback (the sidecar's admin API) is reached,
//! and nothing else in the cluster reaches it.
//!
//! Each connection is its own forward, to the pod last found; when a forward to it cannot be
//! opened or breaks, the pod is found again by its labels, so a restarted or replaced sidecar
//! is reached by the next connection without a new endpoint.

use std::net::{Ipv4Addr, SocketAddr};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, ListParams, Portforwarder};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::{AbortHandle, JoinSet};

use super::selection::{Need, choose};
use crate::runtime::RuntimeError;

/// How long the listener waits after a failed accept.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(50);

/// The pods a forward goes to: the newest Running, Ready one of `selector`, at `port`.
pub struct Target {
    pods: Api<Pod>,
    selector: String,
    container: String,
    port: u16,
    /// The pod last found, until a forward to it fails.
    pod: Mutex<Option<String>>,
}

impl Target {
    /// Forward to `port` of the pods of `selector` whose `container` is ready, starting with
    /// `pod` (already found by the caller).
    pub fn new(pods: Api<Pod>, selector: String, container: &str, port: u16, pod: String) -> Self {
        Self {
            pods,
            selector,
            container: container.to_owned(),
            port,
            pod: Mutex::new(Some(pod)),
        }
    }

    fn remembered(&self) -> Option<String> {
        self.pod.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    fn remember(&self, pod: Option<String>) {
        *self.pod.lock().unwrap_or_else(|e| e.into_inner()) = pod;
    }

    /// The newest usable pod now, asked of the API server.
    async fn find(&self) -> Option<String> {
        let listed = self
            .pods
            .list(&ListParams::default().labels(&self.selector))
            .await
            .ok()?;
        choose(&listed.items, &self.container, Need::Ready).map(str::to_owned)
    }

    /// A forward to the pod last found, else to the one found now.
    async fn forward(&self) -> Option<(String, Portforwarder)> {
        if let Some(pod) = self.remembered()
            && let Ok(forward) = self.pods.portforward(&pod, &[self.port]).await
        {
            return Some((pod, forward));
        }
        let found = self.find().await;
        self.remember(found.clone());
        let pod = found?;
        let forward = self.pods.portforward(&pod, &[self.port]).await.ok()?;
        Some((pod, forward))
    }

    /// Carry one connection; closed at once when no forward can be opened (the caller then
    /// reads the admin API as unreachable).
    async fn carry(&self, mut conn: TcpStream) {
        let Some((pod, forward)) = self.forward().await else {
            return;
        };
        let mut forward = Stopped(forward);
        let Some(mut stream) = forward.0.take_stream(self.port) else {
            return;
        };
        let failed = forward.0.take_error(self.port);
        let failed = async move {
            match failed {
                Some(failed) => failed.await,
                None => None,
            }
        };
        tokio::select! {
            _ = tokio::io::copy_bidirectional(&mut conn, &mut stream) => {}
            // The kubelet could not reach the port (the pod's container restarting): find
            // the pod again for the next connection.
            Some(_) = failed => {
                if self.remembered().as_deref() == Some(pod.as_str()) {
                    self.remember(None);
                }
            }
        }
    }
}

/// A forward's task, stopped with it.
struct Stopped(Portforwarder);

impl Drop for Stopped {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Listen on 127.0.0.1 (a port of the system's choosing) and carry every connection to
/// `target`; the listener and its connections stop when the returned handle is aborted.
pub async fn open(target: Target) -> Result<(SocketAddr, AbortHandle), RuntimeError> {
    let unreachable = |e: std::io::Error| {
        RuntimeError::AdminUnreachable(format!(
            "no port on 127.0.0.1 could be had for the port-forward: {e}"
        ))
    };
    let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
        .await
        .map_err(unreachable)?;
    let addr = listener.local_addr().map_err(unreachable)?;
    let target = Arc::new(target);
    let task = tokio::spawn(async move {
        // Dropped with the task, which aborts every connection still carried.
        let mut carried = JoinSet::new();
        loop {
            tokio::select! {
                accepted = listener.accept() => match accepted {
                    Ok((conn, _)) => {
                        let target = Arc::clone(&target);
                        carried.spawn(async move { target.carry(conn).await });
                    }
                    // Out of descriptors, most likely: let some connections end first.
                    Err(_) => tokio::time::sleep(ACCEPT_BACKOFF).await,
                },
                Some(_) = carried.join_next() => {}
            }
        }
    });
    Ok((addr, task.abort_handle()))
}
