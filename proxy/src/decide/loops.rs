//! Requests that came back to this sidecar.
//!
//! The guard never dials the sidecar's own addresses, but a listener bound to another one
//! (loopback, in tests and benchmarks) can still be reached. A request arriving with this
//! sidecar's own `Via` is refused `508` where it arrives; the hop of this sidecar that sent it
//! must record it as refused too, not as an allowed request its upstream answered `508`. The
//! arriving hop remembers the connection the request came on (its client address is the
//! sending hop's local address); the sending hop finds its own upstream connection here.
//! Only this sidecar's own sockets have such addresses, so no upstream and no service can
//! make a request that left look refused.

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::Mutex;

/// Loops refused most recently that the sending hop has not seen yet; a loop is answered at
/// once, so a few suffice, and a flood of made-up ones only pushes out entries of its own.
const KEPT: usize = 64;

/// The client addresses of the loops refused lately.
#[derive(Debug, Default)]
pub(crate) struct Loops(Mutex<VecDeque<SocketAddr>>);

impl Loops {
    /// A loop was refused on a connection from `client`.
    pub(crate) fn remember(&self, client: SocketAddr) {
        if let Ok(mut recent) = self.0.lock() {
            if recent.len() == KEPT {
                recent.pop_front();
            }
            recent.push_back(client);
        }
    }

    /// Whether a loop was refused on a connection from `local` (forgotten once asked).
    pub(crate) fn take(&self, local: SocketAddr) -> bool {
        let Ok(mut recent) = self.0.lock() else {
            return false;
        };
        match recent.iter().position(|a| *a == local) {
            Some(i) => {
                recent.remove(i);
                true
            }
            None => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_remembered_loop_is_found_once_and_the_list_is_bounded() {
        let loops = Loops::default();
        let addr = |port| SocketAddr::from(([127, 0, 0, 1], port));
        loops.remember(addr(1));
        assert!(!loops.take(addr(2)));
        assert!(loops.take(addr(1)));
        assert!(!loops.take(addr(1)));
        for port in 0..=KEPT as u16 {
            loops.remember(addr(port + 10));
        }
        assert!(!loops.take(addr(10)), "the oldest was pushed out");
        assert!(loops.take(addr(11)));
    }
}
