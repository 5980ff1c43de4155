//! Many client connections held through the sidecar for minutes, each sending a keep-alive
//! request every few seconds (every fourth through a CONNECT tunnel, which holds an upstream
//! connection of its own); the sidecar's open files and resident memory before, during and
//! after, and every error a client saw.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde::Serialize;
use tokio::net::TcpStream;
use tokio::sync::{Semaphore, watch};

use super::footprint::Footprint;
use crate::admin::Admin;
use crate::error::{BenchError, Result};
use crate::load::idle::{Failure, exchange};
use crate::load::tunnel;
use crate::upstream::SMALL_PATH;

/// Every `TUNNEL_EVERY`th connection is a CONNECT tunnel rather than plain HTTP.
pub(super) const TUNNEL_EVERY: usize = 4;
/// Connections being set up at once (the sidecar's accept backlog is not the subject).
const SETUP_PARALLEL: usize = 64;
/// Longest wait for one answer; past it the connection counts as an error.
const ANSWER_TIMEOUT: Duration = Duration::from_secs(10);
/// Connections opened, one request each, and closed before the baseline is read.
pub(super) const WARM_UP: usize = 8;

/// How many connections, for how long.
#[derive(Debug, Clone)]
pub(super) struct Plan {
    /// Client connections held at once.
    pub connections: usize,
    /// How long they are held once all are set up.
    pub duration: Duration,
    /// Time between two requests of one connection (below the sidecar's 10 s header timeout).
    pub interval: Duration,
    /// Longest wait after the clients close for the sidecar to return to its baseline.
    pub settle: Duration,
    /// Time between two readings of the sidecar.
    pub sample_every: Duration,
    /// How far above the baseline "back to the baseline" may be.
    pub tolerance: Footprint,
}

/// One reading during the run.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Sample {
    /// Seconds since the connections began to open.
    pub at_secs: f64,
    /// The sidecar's open files and memory.
    #[serde(flatten)]
    pub footprint: Footprint,
    /// Client connections open at that moment.
    pub connections: usize,
}

/// What the hold measured.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Held {
    /// Client connections asked for.
    pub connections: usize,
    /// Of which CONNECT tunnels.
    pub tunnels: usize,
    /// Connections that were set up (their first request answered).
    pub opened: usize,
    /// Seconds until every connection was set up or had failed.
    pub setup_secs: f64,
    /// Seconds the connections were held after that.
    pub held_secs: f64,
    /// Seconds between two requests of a connection.
    pub interval_secs: f64,
    /// Requests answered 200, first ones included.
    pub answered: u64,
    /// Errors by kind (`setup`, `timeout`, `closed`, `status-503`, ...): none is expected.
    pub errors: BTreeMap<String, u64>,
    /// Their sum.
    pub unexpected_errors: u64,
    /// The sidecar after warming up, before the connections.
    pub baseline: Footprint,
    /// The largest of each figure while they were open.
    pub peak: Footprint,
    /// The sidecar once the clients had closed (and settled, or `settle` ran out).
    pub after: Footprint,
    /// Seconds after the clients closed until its open files were back within tolerance.
    pub files_back_secs: Option<f64>,
    /// The same for its resident memory.
    pub rss_back_secs: Option<f64>,
    /// The tolerance above the baseline.
    pub tolerance: Footprint,
    /// The sidecar's own counters at the end (refusals at its limits, unanswered closes,
    /// journal drops, upstream dials).
    pub counters: BTreeMap<String, f64>,
    /// Every reading, during and after.
    pub samples: Vec<Sample>,
}

/// The sidecar's counters the hold reports: any refusal or drop among them is a bound hit.
const COUNTERS: [&str; 6] = [
    "af_proxy_connection_limit_refusals_total",
    "af_proxy_upstream_limit_refusals_total",
    "af_proxy_closed_unanswered_total",
    "af_proxy_journal_queue_drops_total",
    "af_proxy_upstream_dials_total",
    "af_proxy_journal_records_total",
];

/// Counters every connection task adds to.
#[derive(Default)]
struct Tally {
    opened: AtomicUsize,
    open: AtomicUsize,
    answered: AtomicU64,
    errors: Mutex<BTreeMap<String, u64>>,
}

impl Tally {
    fn error(&self, kind: String) {
        if let Ok(mut e) = self.errors.lock() {
            *e.entry(kind).or_default() += 1;
        }
    }
}

fn failure_kind(f: Failure) -> String {
    match f {
        Failure::Closed => "closed".into(),
        Failure::Status(code) => format!("status-{code}"),
        Failure::Malformed => "malformed".into(),
        Failure::Io => "io".into(),
    }
}

/// What each connection asks for: plain HTTP to the proxy, or through a tunnel.
#[derive(Clone)]
struct Requests {
    proxy: SocketAddr,
    upstream: SocketAddr,
    /// Absolute form, sent to the proxy.
    http: Arc<Vec<u8>>,
    /// Origin form, sent through a tunnel to the upstream.
    tunnelled: Arc<Vec<u8>>,
}

impl Requests {
    fn new(proxy: SocketAddr, upstream: SocketAddr) -> Self {
        let host = upstream.to_string();
        Self {
            proxy,
            upstream,
            http: Arc::new(
                format!("GET http://{host}{SMALL_PATH} HTTP/1.1\r\nHost: {host}\r\n\r\n")
                    .into_bytes(),
            ),
            tunnelled: Arc::new(
                format!("GET {SMALL_PATH} HTTP/1.1\r\nHost: {host}\r\n\r\n").into_bytes(),
            ),
        }
    }

    /// A set-up connection (its first request answered) and what it sends from then on.
    async fn open(
        &self,
        tunnelled: bool,
    ) -> std::result::Result<(TcpStream, Arc<Vec<u8>>), String> {
        let (mut s, request) = if tunnelled {
            let (s, early) = tunnel::open(Some(self.proxy), self.upstream)
                .await
                .map_err(|_| "setup".to_owned())?;
            if !early.is_empty() {
                return Err("setup".into());
            }
            (s, self.tunnelled.clone())
        } else {
            let s = TcpStream::connect(self.proxy)
                .await
                .map_err(|_| "setup".to_owned())?;
            (s, self.http.clone())
        };
        match tokio::time::timeout(ANSWER_TIMEOUT, exchange(&mut s, &request)).await {
            Ok(Ok(())) => Ok((s, request)),
            Ok(Err(f)) => Err(format!("setup-{}", failure_kind(f))),
            Err(_) => Err("setup-timeout".into()),
        }
    }
}

/// Opens `count` connections with one request each and closes them: buffers, pools and
/// lazily built state exist before the baseline is read.
pub(super) async fn warm_up(proxy: SocketAddr, upstream: SocketAddr, count: usize) -> Result<()> {
    let requests = Requests::new(proxy, upstream);
    let opens = (0..count).map(|i| {
        let requests = requests.clone();
        async move { requests.open(i % TUNNEL_EVERY == 0).await }
    });
    for r in futures_util::future::join_all(opens).await {
        r.map_err(|kind| BenchError::Protocol(format!("warm-up connection failed: {kind}")))?;
    }
    Ok(())
}

/// The sidecar under test: its proxy listener, process and admin API.
#[derive(Debug, Clone, Copy)]
pub(super) struct Sidecar {
    /// The explicit proxy listener.
    pub proxy: SocketAddr,
    /// Its process.
    pub pid: u32,
    /// Its admin API.
    pub admin: Admin,
}

/// Holds `plan.connections` connections through the sidecar to `upstream` (plain HTTP),
/// reading it throughout. `baseline` was read after [`warm_up`].
pub(super) async fn run(
    sidecar: Sidecar,
    upstream: SocketAddr,
    baseline: Footprint,
    plan: &Plan,
) -> Result<Held> {
    let Sidecar { proxy, pid, admin } = sidecar;
    let requests = Requests::new(proxy, upstream);
    let tally = Arc::new(Tally::default());
    let gate = Arc::new(Semaphore::new(SETUP_PARALLEL));
    let (stop_tx, stop_rx) = watch::channel(false);
    let start = Instant::now();
    let settled = Arc::new(AtomicUsize::new(0));
    let tasks: Vec<_> = (0..plan.connections)
        .map(|i| {
            let (requests, tally, gate, settled) = (
                requests.clone(),
                tally.clone(),
                gate.clone(),
                settled.clone(),
            );
            let mut stop = stop_rx.clone();
            let interval = plan.interval;
            tokio::spawn(async move {
                let permit = gate.acquire_owned().await;
                let opened = requests.open(i % TUNNEL_EVERY == 0).await;
                drop(permit);
                settled.fetch_add(1, Ordering::SeqCst);
                let (mut s, request) = match opened {
                    Ok(ok) => ok,
                    Err(kind) => return tally.error(kind),
                };
                tally.opened.fetch_add(1, Ordering::SeqCst);
                tally.open.fetch_add(1, Ordering::SeqCst);
                tally.answered.fetch_add(1, Ordering::SeqCst);
                // Spread the requests evenly over the interval.
                let mut next = tokio::time::Instant::now() + interval.mul_f64(fastrand::f64());
                loop {
                    tokio::select! {
                        _ = stop.changed() => break,
                        () = tokio::time::sleep_until(next) => {}
                    }
                    match tokio::time::timeout(ANSWER_TIMEOUT, exchange(&mut s, &request)).await {
                        Ok(Ok(())) => {
                            tally.answered.fetch_add(1, Ordering::Relaxed);
                        }
                        Ok(Err(f)) => {
                            tally.error(failure_kind(f));
                            break;
                        }
                        Err(_) => {
                            tally.error("timeout".into());
                            break;
                        }
                    }
                    next += interval;
                }
                tally.open.fetch_sub(1, Ordering::SeqCst);
            })
        })
        .collect();

    let mut samples = Vec::new();
    let mut peak = baseline;
    let read = |samples: &mut Vec<Sample>, open: usize| -> Result<Footprint> {
        let f = Footprint::read(pid)?;
        samples.push(Sample {
            at_secs: start.elapsed().as_secs_f64(),
            footprint: f,
            connections: open,
        });
        Ok(f)
    };
    // Set-up: until every connection is open or has failed.
    let mut last_read = Instant::now();
    while settled.load(Ordering::SeqCst) < plan.connections {
        if last_read.elapsed() >= plan.sample_every {
            peak = peak.max(read(&mut samples, tally.open.load(Ordering::SeqCst))?);
            last_read = Instant::now();
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let setup_secs = start.elapsed().as_secs_f64();
    eprintln!(
        "soak hold: {} of {} connections set up in {setup_secs:.1} s; holding {} s",
        tally.opened.load(Ordering::SeqCst),
        plan.connections,
        plan.duration.as_secs()
    );
    // Held: read the sidecar until the duration is over.
    let held_from = Instant::now();
    while held_from.elapsed() < plan.duration {
        peak = peak.max(read(&mut samples, tally.open.load(Ordering::SeqCst))?);
        tokio::time::sleep(plan.sample_every.min(plan.duration)).await;
    }
    peak = peak.max(read(&mut samples, tally.open.load(Ordering::SeqCst))?);
    let held_secs = held_from.elapsed().as_secs_f64();
    let _ = stop_tx.send(true);
    for t in tasks {
        t.await
            .map_err(|e| BenchError::Protocol(format!("connection task: {e}")))?;
    }
    // After: every client has closed; wait for the sidecar to let go.
    let closed_at = Instant::now();
    let (mut files_back_secs, mut rss_back_secs) = (None, None);
    let after = loop {
        let f = read(&mut samples, 0)?;
        let (files, rss) = f.within(baseline, plan.tolerance);
        let now = Some(closed_at.elapsed().as_secs_f64());
        if files && files_back_secs.is_none() {
            files_back_secs = now;
        }
        if rss && rss_back_secs.is_none() {
            rss_back_secs = now;
        }
        if (files && rss) || closed_at.elapsed() >= plan.settle {
            break f;
        }
        tokio::time::sleep(Duration::from_secs(2)).await;
    };
    let errors = tally.errors.lock().map(|e| e.clone()).unwrap_or_default();
    let mut counters = BTreeMap::new();
    for name in COUNTERS {
        counters.insert(name.to_owned(), admin.metric(name).await?);
    }
    Ok(Held {
        connections: plan.connections,
        tunnels: plan.connections.div_ceil(TUNNEL_EVERY),
        opened: tally.opened.load(Ordering::SeqCst),
        setup_secs,
        held_secs,
        interval_secs: plan.interval.as_secs_f64(),
        answered: tally.answered.load(Ordering::SeqCst),
        unexpected_errors: errors.values().sum(),
        errors,
        baseline,
        peak,
        after,
        files_back_secs,
        rss_back_secs,
        tolerance: plan.tolerance,
        counters,
        samples,
    })
}
