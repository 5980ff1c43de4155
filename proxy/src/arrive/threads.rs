//! The data threads: each runs its own current-thread runtime with its own socket on every
//! data listener's port (SO_REUSEPORT: the kernel spreads new connections over them), and
//! serves every connection it accepts to the end on itself, so no request is handed to
//! another thread. Only the user the sidecar runs as can join a port's group of sockets.

use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::thread::JoinHandle;

use futures_util::future::join_all;
use socket2::{Domain, Protocol, Socket, Type};

use crate::arrive::accept;
use crate::metrics::Via;
use crate::state::State;

/// Pending connections each socket holds (tokio's own default).
const BACKLOG: i32 = 1024;

/// How many data threads `configured` asks for: itself, or for 0 the cores this process may
/// use.
pub(crate) fn count(configured: usize) -> usize {
    match configured {
        0 => std::thread::available_parallelism().map_or(1, usize::from),
        n => n,
    }
}

/// `threads` listening sockets on `addr`, one per thread, in one SO_REUSEPORT group: the first
/// takes the port when `addr` asks for any, the rest join it.
pub(crate) fn bind(addr: SocketAddr, threads: usize) -> io::Result<Vec<std::net::TcpListener>> {
    let mut sockets = Vec::with_capacity(threads);
    let mut at = addr;
    for _ in 0..threads.max(1) {
        let socket = Socket::new(Domain::for_address(at), Type::STREAM, Some(Protocol::TCP))?;
        socket.set_reuse_address(true)?;
        socket.set_reuse_port(true)?;
        socket.set_nonblocking(true)?;
        socket.bind(&at.into())?;
        socket.listen(BACKLOG)?;
        let listener = std::net::TcpListener::from(socket);
        at = listener.local_addr()?;
        sockets.push(listener);
    }
    Ok(sockets)
}

/// The running data threads.
pub(crate) struct DataThreads {
    threads: Vec<JoinHandle<()>>,
}

impl DataThreads {
    /// One thread per entry of `sockets`, each accepting on its sockets (one per data listener,
    /// with what it listens as) until the sidecar stops, then serving what it holds until the
    /// data path has drained.
    pub(crate) fn start(
        sockets: Vec<Vec<(std::net::TcpListener, Via)>>,
        state: &Arc<State>,
    ) -> io::Result<Self> {
        let mut threads = Vec::with_capacity(sockets.len());
        for (n, own) in sockets.into_iter().enumerate() {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()?;
            let state = state.clone();
            let thread = std::thread::Builder::new()
                .name(format!("af-data-{n}"))
                .spawn(move || runtime.block_on(serve(own, state)))?;
            threads.push(thread);
        }
        Ok(Self { threads })
    }

    /// Wait until every thread has ended (after the data path has drained).
    pub(crate) fn join(self) {
        for thread in self.threads {
            if thread.join().is_err() {
                tracing::error!("a data thread panicked");
            }
        }
    }
}

/// One thread's work: accept on each of `sockets` until stopping, then run until the data
/// path's every task (on any thread) has ended, so this thread's own finish here.
async fn serve(sockets: Vec<(std::net::TcpListener, Via)>, state: Arc<State>) {
    let loops = sockets.into_iter().filter_map(|(socket, via)| {
        match tokio::net::TcpListener::from_std(socket) {
            Ok(listener) => Some(accept::accept_loop(listener, state.clone(), via)),
            Err(e) => {
                tracing::error!(error = %e, listener = via.as_str(), "a data thread could not listen");
                None
            }
        }
    });
    join_all(loops).await;
    state.drain.finished().await;
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn every_socket_of_a_group_listens_on_the_port_the_first_took() {
        let sockets = bind("127.0.0.1:0".parse().unwrap(), 3).unwrap();
        assert_eq!(sockets.len(), 3);
        let port = sockets[0].local_addr().unwrap().port();
        assert_ne!(port, 0);
        assert!(
            sockets
                .iter()
                .all(|s| s.local_addr().unwrap().port() == port)
        );
        // Each accepts a connection made to the port: the kernel spreads them by hash, so
        // connect until every socket has had one.
        let mut seen = [false; 3];
        for _ in 0..200 {
            let _client = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
            for (n, socket) in sockets.iter().enumerate() {
                if socket.accept().is_ok() {
                    seen[n] = true;
                }
            }
            if seen.iter().all(|s| *s) {
                break;
            }
        }
        assert_eq!(
            seen, [true; 3],
            "every socket of the group was given connections"
        );
    }

    #[test]
    fn a_port_held_outside_the_group_is_refused() {
        let held = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let refused = bind(held.local_addr().unwrap(), 2).unwrap_err();
        assert_eq!(refused.kind(), io::ErrorKind::AddrInUse);
    }

    #[test]
    fn no_count_means_the_cores_this_process_may_use() {
        assert_eq!(count(3), 3);
        assert_eq!(
            count(0),
            usize::from(std::thread::available_parallelism().unwrap())
        );
    }
}
