//! Zero-copy tunnels between two TCP sockets (Linux): splice(2) moves each direction's bytes
//! from one socket into a pipe and from the pipe into the other socket, so the kernel hands
//! pages along and no byte is copied through the sidecar's memory. A bulk tunnel then costs a
//! few system calls per pipe's worth of bytes (issue 14).
//!
//! Readiness comes from tokio: a splice that would block clears the socket's readiness and
//! waits for the next. Each direction empties its pipe before it reads again, so a pipe is
//! never full when a socket is read: `EAGAIN` there always means the socket has nothing.

use std::io;
use std::net::Shutdown;
use std::os::fd::OwnedFd;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

use rustix::pipe::{PipeFlags, SpliceFlags, fcntl_getpipe_size, fcntl_setpipe_size, pipe_with};
use socket2::SockRef;
use tokio::io::Interest;
use tokio::net::TcpStream;

use super::sides::{Finished, Side};
use crate::limits::Activity;

/// Never block in the kernel (the sockets are non-blocking too); move pages, do not copy.
const FLAGS: SpliceFlags = SpliceFlags::NONBLOCK.union(SpliceFlags::MOVE);

/// One direction's pipe: what was read from one socket and not yet written to the other.
struct Pipe {
    read: OwnedFd,
    write: OwnedFd,
    /// Its capacity: the most one splice from the socket takes.
    capacity: usize,
}

impl Pipe {
    /// A non-blocking pipe of `size` bytes, or of the kernel's size when a larger one is refused
    /// (past `fs.pipe-max-size`, or the user's pipe pages): smaller pipes only mean more calls.
    fn new(size: usize) -> io::Result<Self> {
        let (read, write) = pipe_with(PipeFlags::CLOEXEC | PipeFlags::NONBLOCK)?;
        let capacity = match fcntl_setpipe_size(&write, size) {
            Ok(capacity) => capacity,
            Err(_) => fcntl_getpipe_size(&write)?,
        };
        Ok(Self {
            read,
            write,
            capacity,
        })
    }
}

/// A tunnel's two pipes, made before the tunnel starts so that failing to make them (out of
/// file descriptors) leaves the buffered copy to carry it.
pub(crate) struct Pipes {
    up: Pipe,
    down: Pipe,
}

impl Pipes {
    /// Two pipes of `size` bytes each (`limits.tunnel_buffer_bytes`).
    pub(crate) fn new(size: usize) -> io::Result<Self> {
        Ok(Self {
            up: Pipe::new(size)?,
            down: Pipe::new(size)?,
        })
    }
}

/// Bytes written to each side so far. Kept outside the pump because the idle watchdog and the
/// drain cut drop the pump mid-way, and the journal still needs the counts.
#[derive(Debug, Default)]
pub(crate) struct Moved {
    /// Client to upstream, written to the upstream.
    pub up: AtomicU64,
    /// Upstream to client, written to the client.
    pub down: AtomicU64,
}

/// Move bytes both ways until each direction has seen its end, or either fails. The end of
/// one direction shuts the write side of the other socket and the other direction goes on,
/// as `tokio::io::copy_bidirectional` does. Every byte moved touches `activity`.
pub(crate) async fn pump(
    client: &TcpStream,
    upstream: &TcpStream,
    pipes: &Pipes,
    moved: &Moved,
    finished: &Finished,
    activity: &Activity,
) -> io::Result<()> {
    let up = Way {
        from: (client, Side::Client),
        to: (upstream, Side::Upstream),
    };
    let down = Way {
        from: (upstream, Side::Upstream),
        to: (client, Side::Client),
    };
    tokio::try_join!(
        one_way(up, &pipes.up, &moved.up, finished, activity),
        one_way(down, &pipes.down, &moved.down, finished, activity),
    )?;
    Ok(())
}

/// One direction of a tunnel: the socket read and the socket written, each with its side.
struct Way<'a> {
    from: (&'a TcpStream, Side),
    to: (&'a TcpStream, Side),
}

/// `from` → pipe → `to` until `from` ends (noted in `finished`), then shut `to`'s write side.
/// An error is tagged with the side whose socket made it.
async fn one_way(
    way: Way<'_>,
    pipe: &Pipe,
    moved: &AtomicU64,
    finished: &Finished,
    activity: &Activity,
) -> io::Result<()> {
    let ((from, from_side), (to, to_side)) = (way.from, way.to);
    loop {
        let filled = when_ready(from, Interest::READABLE, || {
            rustix::pipe::splice(from, None, &pipe.write, None, pipe.capacity, FLAGS)
        })
        .await
        .map_err(|e| from_side.tag(e))?;
        if filled == 0 {
            finished.set(from_side);
            return end_writes(to).map_err(|e| to_side.tag(e));
        }
        activity.touch();
        let mut left = filled;
        while left > 0 {
            let n = when_ready(to, Interest::WRITABLE, || {
                rustix::pipe::splice(&pipe.read, None, to, None, left, FLAGS)
            })
            .await
            .map_err(|e| to_side.tag(e))?;
            if n == 0 {
                return Err(to_side.tag(io::ErrorKind::WriteZero.into()));
            }
            left -= n;
            moved.fetch_add(n as u64, Relaxed);
            activity.touch();
        }
    }
}

/// Shut `socket`'s write side. A peer already gone (`ENOTCONN`: it closed, or reset) has
/// nothing left to be told: that ends the direction as well as a shutdown does.
fn end_writes(socket: &TcpStream) -> io::Result<()> {
    match SockRef::from(socket).shutdown(Shutdown::Write) {
        Err(e) if e.kind() == io::ErrorKind::NotConnected => Ok(()),
        done => done,
    }
}

/// Run `splice` once `socket` is ready for `interest`, again after each time it would block.
async fn when_ready(
    socket: &TcpStream,
    interest: Interest,
    mut splice: impl FnMut() -> rustix::io::Result<usize>,
) -> io::Result<usize> {
    loop {
        socket.ready(interest).await?;
        match socket.try_io(interest, || splice().map_err(io::Error::from)) {
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted
                ) => {}
            done => return done,
        }
    }
}
