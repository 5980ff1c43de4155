//! Sockets and lifetime: one TCP listener and several UDP sockets sharing the port through
//! `SO_REUSEPORT` (the kernel spreads queries over them, one receive loop each). Datagrams are
//! read by [`crate::udp`], connections accepted by [`crate::tcp`] under a connection cap; both
//! hand each query to [`crate::query`].

use std::{
    future::Future,
    io,
    net::{SocketAddr, TcpListener, UdpSocket},
    num::NonZeroU32,
    sync::Arc,
    time::Duration,
};

use socket2::{Domain, Protocol, Socket, Type};
use tokio::task::JoinSet;

use crate::{
    config::DnsConfig,
    error::DnsError,
    handler::Handler,
    metrics::Metrics,
    sightings::{QueryObserver, SightingBounds, Sightings},
    tcp::{self, TcpAdmission, TcpLimit, TcpService},
    udp::{self, UdpService},
};

/// How many times a free port is looked for when the configured port is 0.
const PORT_ATTEMPTS: usize = 16;
/// Pending-connection queue of the TCP listener.
const TCP_BACKLOG: i32 = 1024;
/// Receive buffer asked for each UDP socket: a burst of queries waits in the kernel while
/// the socket's loop answers the ones before it, instead of being dropped at the default
/// (`net.core.rmem_default`, usually 208 KiB: a few hundred datagrams).
const UDP_RECEIVE_BUFFER: usize = 1 << 20;

/// A running DNS server: serving starts when [`DnsServer::bind`] returns and stops when it is
/// shut down or dropped.
pub struct DnsServer {
    /// One receive loop per UDP socket, each ending only with the error that ended its socket;
    /// dropping the set aborts them and the queries they answer.
    udp: JoinSet<io::Error>,
    /// The DNS-over-TCP accept loop; dropping the set aborts it and its connections.
    tcp: JoinSet<()>,
    local_addr: SocketAddr,
    udp_sockets: usize,
    metrics: Metrics,
}

impl DnsServer {
    /// Validates `config`, binds every socket and starts serving; `observer` gets first sightings.
    /// DNS over TCP holds at most `tcp_max_connections` connections.
    ///
    /// Fails before anything is served if the configuration is invalid or an address is taken.
    pub async fn bind(
        config: DnsConfig,
        observer: Arc<dyn QueryObserver>,
    ) -> Result<Self, DnsError> {
        let limit = Arc::new(TcpLimit::new(config.tcp_max_connections));
        Self::bind_under(config, observer, limit).await
    }

    /// As [`DnsServer::bind`], with each DNS-over-TCP connection admitted by `admission`
    /// instead of `tcp_max_connections`: an embedding program counts them under its own cap.
    pub async fn bind_under(
        config: DnsConfig,
        observer: Arc<dyn QueryObserver>,
        admission: Arc<dyn TcpAdmission>,
    ) -> Result<Self, DnsError> {
        let checked = config.validate()?;
        let metrics = Metrics::default();
        let bounds = SightingBounds {
            seen_capacity: config.seen_capacity,
            queue: config.sighting_queue,
            per_second: NonZeroU32::new(config.sightings_per_second).unwrap_or(NonZeroU32::MIN),
        };
        let sightings = Sightings::start(observer, bounds, metrics.clone()).map_err(|error| {
            DnsError::Stopped {
                reason: format!("cannot start the sightings thread: {error}"),
            }
        })?;
        let handler = Arc::new(Handler::new(&config, &checked, sightings, metrics.clone())?);
        let (tcp_listener, udp) = bind_sockets(config.listen, checked.udp_sockets)?;
        let local_addr = tcp_listener
            .local_addr()
            .map_err(|source| bind_error(config.listen, "tcp", source))?;

        let mut udp_loops = JoinSet::new();
        for socket in udp {
            let socket = tokio::net::UdpSocket::from_std(socket)
                .map_err(|source| bind_error(local_addr, "udp", source))?;
            udp_loops.spawn(udp::serve(
                socket,
                UdpService {
                    handler: handler.clone(),
                    max_in_flight: config.udp_max_in_flight,
                    metrics: metrics.clone(),
                },
            ));
        }
        let tcp_listener = tokio::net::TcpListener::from_std(tcp_listener)
            .map_err(|source| bind_error(local_addr, "tcp", source))?;
        let mut tcp = JoinSet::new();
        tcp.spawn(tcp::accept_loop(
            tcp_listener,
            TcpService {
                handler,
                admission,
                idle: Duration::from_secs(config.tcp_idle_secs),
                metrics: metrics.clone(),
            },
        ));
        tracing::info!(%local_addr, udp_sockets = checked.udp_sockets, "DNS server listening");
        Ok(Self {
            udp: udp_loops,
            tcp,
            local_addr,
            udp_sockets: checked.udp_sockets,
            metrics,
        })
    }

    /// The address served (UDP and TCP share it); useful when the configured port was 0.
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// How many UDP sockets share the port.
    pub fn udp_sockets(&self) -> usize {
        self.udp_sockets
    }

    /// A handle on the counters, valid after the server is moved or stopped.
    pub fn metrics(&self) -> Metrics {
        self.metrics.clone()
    }

    /// Serves until `shutdown` completes or a UDP socket fails for good; then every socket
    /// closes and the queries still being answered are dropped (their clients ask again).
    pub async fn serve_until(mut self, shutdown: impl Future<Output = ()>) -> Result<(), DnsError> {
        let failed = tokio::select! {
            Some(ended) = self.udp.join_next() => Some(ended),
            () = shutdown => None,
        };
        self.udp.shutdown().await;
        self.tcp.shutdown().await;
        match failed {
            None => Ok(()),
            Some(Ok(error)) => Err(DnsError::Stopped {
                reason: format!("a UDP socket failed: {error}"),
            }),
            Some(Err(panicked)) => Err(DnsError::Stopped {
                reason: format!("a UDP receive loop ended: {panicked}"),
            }),
        }
    }

    /// Stops accepting queries and waits for the listeners to close.
    pub async fn shutdown(self) -> Result<(), DnsError> {
        self.serve_until(async {}).await
    }
}

/// Binds the TCP listener and `count` UDP sockets on one port.
///
/// A plain UDP socket probes the port first: `SO_REUSEPORT` would otherwise silently share the
/// port with another program's sockets (same user) instead of failing.
fn bind_sockets(
    listen: SocketAddr,
    count: usize,
) -> Result<(TcpListener, Vec<UdpSocket>), DnsError> {
    let attempts = if listen.port() == 0 { PORT_ATTEMPTS } else { 1 };
    let mut last_error = None;
    for _ in 0..attempts {
        let tcp = tcp_listener(listen).map_err(|source| bind_error(listen, "tcp", source))?;
        let addr = tcp
            .local_addr()
            .map_err(|source| bind_error(listen, "tcp", source))?;
        match UdpSocket::bind(addr) {
            Ok(probe) => drop(probe),
            Err(source) => {
                last_error = Some(bind_error(addr, "udp", source));
                continue;
            }
        }
        let udp = (0..count)
            .map(|_| udp_socket(addr))
            .collect::<io::Result<Vec<_>>>()
            .map_err(|source| bind_error(addr, "udp", source))?;
        return Ok((tcp, udp));
    }
    Err(last_error
        .unwrap_or_else(|| bind_error(listen, "udp", io::Error::from(io::ErrorKind::AddrInUse))))
}

fn tcp_listener(addr: SocketAddr) -> io::Result<TcpListener> {
    let socket = Socket::new(Domain::for_address(addr), Type::STREAM, Some(Protocol::TCP))?;
    socket.set_reuse_address(true)?;
    socket.set_nonblocking(true)?;
    socket.bind(&addr.into())?;
    socket.listen(TCP_BACKLOG)?;
    Ok(socket.into())
}

fn udp_socket(addr: SocketAddr) -> io::Result<UdpSocket> {
    let socket = Socket::new(Domain::for_address(addr), Type::DGRAM, Some(Protocol::UDP))?;
    socket.set_reuse_port(true)?;
    // The kernel caps it at `net.core.rmem_max` (and doubles it for its bookkeeping).
    socket.set_recv_buffer_size(UDP_RECEIVE_BUFFER)?;
    socket.set_nonblocking(true)?;
    socket.bind(&addr.into())?;
    Ok(socket.into())
}

fn bind_error(addr: SocketAddr, transport: &'static str, source: io::Error) -> DnsError {
    DnsError::Bind {
        addr,
        transport,
        source,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_udp_socket_gets_more_receive_buffer_than_the_default() {
        let default: usize = std::fs::read_to_string("/proc/sys/net/core/rmem_default")
            .expect("rmem_default")
            .trim()
            .parse()
            .expect("a number");
        let socket = udp_socket(SocketAddr::from(([127, 0, 0, 1], 0))).expect("bound");
        let size = socket2::SockRef::from(&socket)
            .recv_buffer_size()
            .expect("SO_RCVBUF");
        assert!(size > default, "{size} bytes, the default is {default}");
    }
}
