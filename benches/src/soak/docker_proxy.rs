//! A Unix socket of the harness's own that passes every connection on to the Docker daemon's,
//! and can be cut: `af up` pointed at it (`DOCKER_HOST`) loses its daemon mid-way while the
//! real daemon, which other people use, keeps running.

use std::path::{Path, PathBuf};

use tokio::net::{UnixListener, UnixStream};
use tokio::task::JoinSet;

use crate::error::{BenchError, Result};

/// The daemon's socket: `DOCKER_HOST` when it names a Unix socket, else the default.
pub(crate) fn daemon_socket() -> PathBuf {
    std::env::var("DOCKER_HOST")
        .ok()
        .and_then(|h| h.strip_prefix("unix://").map(PathBuf::from))
        .unwrap_or_else(|| PathBuf::from("/var/run/docker.sock"))
}

/// A client of the daemon itself (never of a proxy of it).
pub(crate) fn connect_daemon() -> Result<bollard::Docker> {
    bollard::Docker::connect_with_unix(
        &daemon_socket().to_string_lossy(),
        120,
        bollard::API_DEFAULT_VERSION,
    )
    .map_err(|e| BenchError::Protocol(format!("docker: {e}")))
}

/// The proxy: listening at `path` until cut.
pub(super) struct DockerProxy {
    path: PathBuf,
    daemon: PathBuf,
    /// The accept loop and every connection it passed on.
    tasks: Option<JoinSet<()>>,
}

impl DockerProxy {
    /// Listens at `path`, passing connections on to `daemon`.
    pub(super) fn start(path: &Path, daemon: &Path) -> Result<Self> {
        let mut proxy = Self {
            path: path.to_owned(),
            daemon: daemon.to_owned(),
            tasks: None,
        };
        proxy.restore()?;
        Ok(proxy)
    }

    /// `DOCKER_HOST` for a client of the proxy.
    pub(super) fn docker_host(&self) -> String {
        format!("unix://{}", self.path.display())
    }

    /// The daemon goes away: the socket is removed and every open connection dropped.
    pub(super) fn cut(&mut self) {
        if let Some(mut tasks) = self.tasks.take() {
            tasks.abort_all();
        }
        let _ = std::fs::remove_file(&self.path);
    }

    /// The daemon is back at the same socket.
    pub(super) fn restore(&mut self) -> Result<()> {
        self.cut();
        let listener = UnixListener::bind(&self.path)
            .map_err(|e| BenchError::io(format!("bind {}", self.path.display()), e))?;
        let daemon = self.daemon.clone();
        let mut tasks = JoinSet::new();
        // The connections belong to the accept loop: aborting it drops them all.
        tasks.spawn(async move {
            let mut conns = JoinSet::new();
            while let Ok((client, _)) = listener.accept().await {
                while conns.try_join_next().is_some() {}
                conns.spawn(pass_on(client, daemon.clone()));
            }
        });
        self.tasks = Some(tasks);
        Ok(())
    }
}

impl Drop for DockerProxy {
    fn drop(&mut self) {
        self.cut();
    }
}

/// Copies both ways between `client` and a new connection to `daemon`.
async fn pass_on(mut client: UnixStream, daemon: PathBuf) {
    if let Ok(mut upstream) = UnixStream::connect(&daemon).await {
        let _ = tokio::io::copy_bidirectional(&mut client, &mut upstream).await;
    }
}

#[cfg(test)]
mod tests {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    use super::*;

    #[tokio::test]
    async fn bytes_pass_until_the_cut_and_after_the_restore() {
        let dir = tempfile::tempdir().expect("dir");
        let daemon = dir.path().join("daemon.sock");
        let echo = UnixListener::bind(&daemon).expect("daemon");
        tokio::spawn(async move {
            while let Ok((mut s, _)) = echo.accept().await {
                tokio::spawn(async move {
                    let mut buf = [0u8; 64];
                    while let Ok(n @ 1..) = s.read(&mut buf).await {
                        let _ = s.write_all(&buf[..n]).await;
                    }
                });
            }
        });
        let path = dir.path().join("proxy.sock");
        let mut proxy = DockerProxy::start(&path, &daemon).expect("proxy");
        let mut held = UnixStream::connect(&path).await.expect("through");
        held.write_all(b"ping").await.expect("write");
        let mut buf = [0u8; 4];
        held.read_exact(&mut buf).await.expect("echo");
        assert_eq!(&buf, b"ping");

        proxy.cut();
        assert!(
            UnixStream::connect(&path).await.is_err(),
            "no new connection"
        );
        let mut rest = Vec::new();
        let n = held.read_to_end(&mut rest).await.unwrap_or(0);
        assert_eq!(n, 0, "an open connection ends at the cut");

        proxy.restore().expect("restore");
        let mut again = UnixStream::connect(&path).await.expect("back");
        again.write_all(b"pong").await.expect("write");
        again.read_exact(&mut buf).await.expect("echo");
        assert_eq!(&buf, b"pong");
    }
}
