//! `af-forward`: the forwarder that publishes one web service on the host, and the readiness
//! check the orchestrator runs inside the sidecar. Shipped in the sidecar image.
//!
//! - `af-forward --listen 0.0.0.0:8080 --to 10.213.4.130:8080` relays every connection to that
//!   one address and dials nothing else, so the forwarder is never a route out.
//! - `af-forward check 10.213.4.130:8080 [/healthz]` exits 0 when the port accepts (and, with a
//!   path, when it gives any HTTP answer), 1 otherwise.

use std::net::SocketAddr;
use std::process::ExitCode;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

const CHECK_TIMEOUT: Duration = Duration::from_secs(2);
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("af-forward: no runtime: {e}");
            return ExitCode::from(2);
        }
    };
    match args.first().map(String::as_str) {
        Some("check") => {
            let Some(addr) = args.get(1).and_then(|a| a.parse::<SocketAddr>().ok()) else {
                eprintln!("usage: af-forward check ADDR:PORT [PATH]");
                return ExitCode::from(2);
            };
            if runtime.block_on(check(addr, args.get(2).map(String::as_str))) {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(1)
            }
        }
        _ => {
            let flag = |name: &str| {
                args.iter()
                    .position(|a| a == name)
                    .and_then(|i| args.get(i + 1))
                    .and_then(|v| v.parse::<SocketAddr>().ok())
            };
            let (Some(listen), Some(to)) = (flag("--listen"), flag("--to")) else {
                eprintln!(
                    "usage: af-forward --listen ADDR:PORT --to ADDR:PORT | af-forward check ADDR:PORT [PATH]"
                );
                return ExitCode::from(2);
            };
            match runtime.block_on(relay(listen, to)) {
                Ok(()) => ExitCode::SUCCESS,
                Err(e) => {
                    eprintln!("af-forward: {e}");
                    ExitCode::from(1)
                }
            }
        }
    }
}

async fn relay(listen: SocketAddr, to: SocketAddr) -> std::io::Result<()> {
    let listener = TcpListener::bind(listen).await?;
    eprintln!("af-forward: {listen} -> {to}");
    loop {
        let (mut client, peer) = listener.accept().await?;
        tokio::spawn(async move {
            let upstream = tokio::time::timeout(CONNECT_TIMEOUT, TcpStream::connect(to)).await;
            match upstream {
                Ok(Ok(mut upstream)) => {
                    let _ = tokio::io::copy_bidirectional(&mut client, &mut upstream).await;
                }
                Ok(Err(e)) => eprintln!("af-forward: {peer}: {to}: {e}"),
                Err(_) => eprintln!("af-forward: {peer}: {to}: connect timed out"),
            }
        });
    }
}

async fn check(addr: SocketAddr, path: Option<&str>) -> bool {
    let attempt = async {
        let mut stream = TcpStream::connect(addr).await.ok()?;
        let Some(path) = path else {
            return Some(());
        };
        let request = format!(
            "GET {path} HTTP/1.1\r\nHost: {addr}\r\nUser-Agent: af-readiness\r\nConnection: close\r\n\r\n"
        );
        stream.write_all(request.as_bytes()).await.ok()?;
        let mut head = [0u8; 5];
        stream.read_exact(&mut head).await.ok()?;
        (&head == b"HTTP/").then_some(())
    };
    matches!(
        tokio::time::timeout(CHECK_TIMEOUT, attempt).await,
        Ok(Some(()))
    )
}
