//! Out of file descriptors, the TCP accept loop pauses instead of spinning, and serves the
//! waiting connection once descriptors are free again.
//!
//! Alone in its own test binary: it lowers this process's open-files limit.

#![allow(
    clippy::expect_used,
    reason = "test helpers fail the test by panicking, like #[test] functions"
)]

mod common;

use std::{fs::File, os::unix::fs::FileExt, time::Duration};

use common::{start, tcp_answered};
use rlimit::{Resource, getrlimit, setrlimit};
use socket2::{Domain, Socket, Type};

/// Opens `/dev/null` until the process is out of file descriptors; the files hold them.
fn exhaust_descriptors() -> Vec<File> {
    let mut held = Vec::new();
    loop {
        match File::open("/dev/null") {
            Ok(file) => held.push(file),
            Err(error) if error.raw_os_error() == Some(24) => return held, // EMFILE
            Err(error) => panic!("unexpected error while exhausting descriptors: {error}"),
        }
    }
}

/// CPU time this process has used, in clock ticks (user and system, `/proc/self/stat`), read
/// through a file opened beforehand (none can be opened once descriptors are exhausted).
fn cpu_ticks(stat: &File) -> u64 {
    let mut buf = [0u8; 1024];
    let len = stat.read_at(&mut buf, 0).expect("read /proc/self/stat");
    let text = std::str::from_utf8(&buf[..len]).expect("text");
    // Fields 14 and 15 (utime, stime); the name before them, in parentheses, may hold spaces.
    let after_name = &text[text.rfind(')').expect("stat format") + 1..];
    let fields: Vec<&str> = after_name.split_whitespace().collect();
    fields[11].parse::<u64>().expect("utime") + fields[12].parse::<u64>().expect("stime")
}

fn open_descriptors() -> u64 {
    std::fs::read_dir("/proc/self/fd")
        .expect("/proc/self/fd")
        .count() as u64
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn out_of_file_descriptors_tcp_accepts_pause_and_the_waiting_connection_is_served_after() {
    let env = start(|_| {}).await;
    let (soft, hard) = getrlimit(Resource::NOFILE).expect("read the open-files limit");
    // A small limit, so exhausting it is quick; the client socket exists before it is reached.
    setrlimit(Resource::NOFILE, open_descriptors() + 64, hard).expect("lower the open-files limit");
    let client = Socket::new(Domain::IPV4, Type::STREAM, None).expect("client socket");
    let stat = File::open("/proc/self/stat").expect("/proc/self/stat");
    let held = exhaust_descriptors();
    assert!(
        File::open("/dev/null").is_err(),
        "descriptors are exhausted"
    );

    // The kernel completes the handshake; the server's accept now fails with EMFILE.
    client
        .connect(&env.addr.into())
        .expect("connect (no descriptor needed)");
    tokio::time::sleep(Duration::from_millis(200)).await;
    let before = env.metrics.snapshot().tcp_accept_failed;
    let cpu_before = cpu_ticks(&stat);
    tokio::time::sleep(Duration::from_secs(1)).await;
    let cpu_in_a_second = cpu_ticks(&stat) - cpu_before;
    let failed_in_a_second = env.metrics.snapshot().tcp_accept_failed - before;
    // Clock ticks are 1/100 s: hickory-server's own accept loop used 99 of them in that second.
    assert!(
        cpu_in_a_second < 30,
        "{cpu_in_a_second} ticks of CPU in one second"
    );
    assert!(
        before >= 1,
        "accept never failed: the test did not reach EMFILE"
    );
    // A pause of 50 ms after each failure: about 20 a second, where a spinning loop makes
    // hundreds of thousands.
    assert!(
        (1..=30).contains(&failed_in_a_second),
        "{failed_in_a_second} failed accepts in one second"
    );

    // Positive control: with descriptors free again the same connection is served.
    drop(held);
    setrlimit(Resource::NOFILE, soft, hard).expect("restore the open-files limit");
    let stream: std::net::TcpStream = client.into();
    stream.set_nonblocking(true).expect("non-blocking");
    let mut stream = tokio::net::TcpStream::from_std(stream).expect("tokio stream");
    assert!(tcp_answered(&mut stream).await);
    assert_eq!(
        env.metrics.snapshot().tcp_refused,
        0,
        "nothing was refused by the cap"
    );
}
