//! Sockets and lifetime: one TCP listener and several UDP sockets sharing the port through
//! `SO_REUSEPORT` (one UDP socket is hickory-server's ceiling; the kernel spreads queries over
//! several), all handed to hickory-server.

use std::{
    future::Future,
    io,
    net::{SocketAddr, TcpListener, UdpSocket},
    num::NonZeroU32,
    sync::Arc,
    time::Duration,
};

use hickory_server::Server;
use socket2::{Domain, Protocol, Socket, Type};

use crate::{
    config::DnsConfig,
    error::DnsError,
    handler::Handler,
    metrics::Metrics,
    sightings::{QueryObserver, SightingBounds, Sightings},
};

/// How many times a free port is looked for when the configured port is 0.
const PORT_ATTEMPTS: usize = 16;
/// Per-connection buffer of responses waiting to be written on DNS-over-TCP.
const TCP_RESPONSE_BUFFER: usize = 32;
/// Pending-connection queue of the TCP listener.
const TCP_BACKLOG: i32 = 1024;

/// A running DNS server: serving starts when [`DnsServer::bind`] returns and stops when it is
/// shut down or dropped.
///
/// hickory-server logs two `info` lines per query under the `hickory_server` target: the
/// embedding program should filter that target to `warn` so logging stays off the query path.
pub struct DnsServer {
    server: Server<Handler>,
    local_addr: SocketAddr,
    udp_sockets: usize,
    metrics: Metrics,
}

impl DnsServer {
    /// Validates `config`, binds every socket and starts serving; `observer` gets first sightings.
    ///
    /// Fails before anything is served if the configuration is invalid or an address is taken.
    pub async fn bind(
        config: DnsConfig,
        observer: Arc<dyn QueryObserver>,
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
        let handler = Handler::new(&config, &checked, sightings, metrics.clone())?;
        let (tcp, udp) = bind_sockets(config.listen, checked.udp_sockets)?;
        let local_addr = tcp
            .local_addr()
            .map_err(|source| bind_error(config.listen, "tcp", source))?;

        let mut server = Server::new(handler);
        for socket in udp {
            let socket = tokio::net::UdpSocket::from_std(socket)
                .map_err(|source| bind_error(local_addr, "udp", source))?;
            server.register_socket(socket);
        }
        let tcp = tokio::net::TcpListener::from_std(tcp)
            .map_err(|source| bind_error(local_addr, "tcp", source))?;
        server.register_listener(
            tcp,
            Duration::from_secs(config.tcp_idle_secs),
            TCP_RESPONSE_BUFFER,
        );
        tracing::info!(%local_addr, udp_sockets = checked.udp_sockets, "DNS server listening");
        Ok(Self {
            server,
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

    /// Serves until `shutdown` completes (then stops gracefully) or a listener fails.
    pub async fn serve_until(mut self, shutdown: impl Future<Output = ()>) -> Result<(), DnsError> {
        let finished = tokio::select! {
            result = self.server.block_until_done() => Some(result),
            () = shutdown => None,
        };
        let result = match finished {
            Some(result) => result,
            None => self.server.shutdown_gracefully().await,
        };
        result.map_err(|error| DnsError::Stopped {
            reason: error.to_string(),
        })
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
