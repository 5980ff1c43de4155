//! Starting the sidecar: build the shared state, bind every listener, then serve; and
//! stopping it ([`Running::shutdown`]).
//! Nothing is bound until the configuration has been checked ([`crate::config::load`]).

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use af_dns::DnsServer;
use af_policy::error::{Report, codes};
use rustls::ClientConfig;
use rustls::crypto::CryptoProvider;
use tokio::net::TcpListener;
use tokio::sync::Semaphore;

use crate::admin::containment::Watchers;
use crate::admin::report::{self, Reports};
use crate::admin::{self, Admin, deliver};
use crate::answer::modes::ModeSettings;
use crate::answer::modes::model_client::SynthModel;
use crate::answer::modes::packs::Packs;
use crate::answer::modes::synth::OpenApiDocs;
use crate::arrive::intercept::{Authority, Interception};
use crate::arrive::threads::{self, DataThreads};
use crate::config::{Limits, Settings, SidecarConfig};
use crate::decide::loops::Loops;
use crate::decide::rate::RuleRates;
use crate::dns::{self, JournalSightings};
use crate::drain::{Drain, Drained};
use crate::leave::guard::{Guard, GuardSettings, resolver_for};
use crate::leave::pools::Pools;
use crate::leave::upstream;
use crate::limits::{ConnectionLimit, UpstreamLimit};
use crate::metrics::{Metrics, Via, Witness};
use crate::record::journal::{Journal, JournalSettings};
use crate::state::{State, Tuning};

/// How long the journal gets to commit what was handed over, once the data path has drained.
const JOURNAL_FLUSH: Duration = Duration::from_secs(2);

/// A running sidecar: where it listens, and its tasks (cut when dropped; [`Running::shutdown`]
/// drains them).
pub struct Running {
    /// The explicit proxy listener's bound address.
    pub proxy: Option<SocketAddr>,
    /// The transparent HTTP listener's bound address.
    pub transparent_http: Option<SocketAddr>,
    /// The transparent TLS listener's bound address.
    pub transparent_tls: Option<SocketAddr>,
    /// The admin API's bound address.
    pub admin: SocketAddr,
    /// The DNS server's bound address (UDP and TCP), when DNS is on.
    pub dns: Option<SocketAddr>,
    /// The SMTP listener's bound addresses.
    pub smtp: Vec<SocketAddr>,
    /// The containment listeners' bound addresses, when the section is configured.
    pub containment: Option<ContainmentAddrs>,
    /// The journal, for other writers (the DNS server's sightings).
    pub journal: Journal,
    /// Counters.
    pub metrics: Arc<Metrics>,
    /// The data path: its listeners, DNS, connections, tunnels and HTTP/2 streams.
    data: Drain,
    /// The threads the data listeners are served on.
    threads: Option<DataThreads>,
    /// The admin API's listener and connections.
    admin_tasks: Drain,
    /// `limits.drain_timeout_ms`.
    deadline: Duration,
}

/// Where the containment listeners listen.
#[derive(Debug, Clone, Copy)]
pub struct ContainmentAddrs {
    /// The watchers' report listener.
    pub report: SocketAddr,
    /// The policy witness.
    pub policy_witness: SocketAddr,
    /// The fence witness.
    pub fence_witness: SocketAddr,
}

impl Running {
    /// Stop as on SIGTERM: every data listener (DNS included) stops accepting, open requests
    /// and tunnels get `limits.drain_timeout_ms` to finish and are then closed, each journaled;
    /// the journal commits what it was handed; then the admin API, which served throughout,
    /// closes. Returns how many connections the deadline cut.
    pub async fn shutdown(mut self) -> Drained {
        let drained = self.data.run(self.deadline).await;
        if let Some(threads) = self.threads.take() {
            let _ = tokio::task::spawn_blocking(move || threads.join()).await;
        }
        self.journal.drain(JOURNAL_FLUSH).await;
        self.admin_tasks.run(Duration::ZERO).await;
        drained
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        self.data.abandon();
        self.admin_tasks.abandon();
    }
}

async fn bind(name: &str, addr: Option<SocketAddr>) -> Result<Option<TcpListener>, Report> {
    let Some(addr) = addr else { return Ok(None) };
    TcpListener::bind(addr)
        .await
        .map(Some)
        .map_err(|e| unbound(name, addr, &e))
}

/// A data listener's sockets, one per data thread (empty when it is off).
fn bind_data(
    name: &str,
    addr: Option<SocketAddr>,
    threads: usize,
) -> Result<Vec<std::net::TcpListener>, Report> {
    let Some(addr) = addr else {
        return Ok(Vec::new());
    };
    threads::bind(addr, threads).map_err(|e| unbound(name, addr, &e))
}

fn unbound(name: &str, addr: SocketAddr, e: &std::io::Error) -> Report {
    Report::new(
        &codes::NET_BIND,
        format!("The {name} listener could not listen on {addr}: {e}."),
    )
    .with_next(format!(
        "Free {addr} or set another address for {name} in the sidecar configuration."
    ))
}

/// The sidecar's own inside addresses: what its DNS answers every outside name with. The guard
/// never dials them, so no request or tunnel can loop through the sidecar. (Listener addresses
/// are not added: a listener bound to loopback must not make loopback upstreams unreachable,
/// and the classifier already refuses the sidecar's other, private or loopback, addresses.)
fn own_addresses(config: &SidecarConfig) -> Vec<IpAddr> {
    let dns = &config.listeners.dns;
    dns.answer_v4
        .map(IpAddr::V4)
        .into_iter()
        .chain(dns.answer_v6.map(IpAddr::V6))
        .collect()
}

/// Check what starting compiles besides the document (the environment CA, the upstream roots,
/// the mock packs and the OpenAPI descriptions), binding and writing nothing: with
/// [`crate::config::load`], what `af-proxy --check-config` does.
pub fn check(settings: &Settings) -> Result<(), Report> {
    let config = &settings.config;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    interception(config, &provider, &Arc::new(Metrics::default()))?;
    upstream_tls(config, &provider)?;
    packs(config)?;
    openapi(config)?;
    Ok(())
}

/// TLS interception from the environment CA, when `tls` is configured.
fn interception(
    config: &SidecarConfig,
    provider: &Arc<CryptoProvider>,
    metrics: &Arc<Metrics>,
) -> Result<Option<Arc<Interception>>, Report> {
    config
        .tls
        .as_ref()
        .map(|t| {
            Authority::load(
                &t.ca_cert_pem,
                &t.ca_key_pem,
                t.leaf_cache,
                provider,
                metrics.clone(),
            )
            .and_then(|authority| Interception::new(authority, provider.clone()))
            .map(Arc::new)
        })
        .transpose()
        .map_err(|e| Report::new(&codes::NET_CONFIG, format!("{e}.")))
}

/// The TLS client settings for real upstreams: the web roots and `tls.extra_upstream_roots_pem`.
fn upstream_tls(
    config: &SidecarConfig,
    provider: &Arc<CryptoProvider>,
) -> Result<ClientConfig, Report> {
    let extra = config.tls.as_ref();
    upstream::upstream_tls(
        provider.clone(),
        extra.and_then(|t| t.extra_upstream_roots_pem.as_deref()),
    )
    .map_err(|e| Report::new(&codes::NET_CONFIG, format!("{e}.")))
}

/// The repository's mock packs.
fn packs(config: &SidecarConfig) -> Result<Packs, Report> {
    Packs::load(&config.modes.packs).map_err(|e| {
        Report::new(&codes::NET_CONFIG, format!("modes.packs: {e}."))
            .with_next("Fix the pack named (docs/mock-packs.md has the format).")
    })
}

/// The repository's OpenAPI descriptions.
fn openapi(config: &SidecarConfig) -> Result<OpenApiDocs, Report> {
    OpenApiDocs::load(&config.modes.openapi).map_err(|e| {
        Report::new(&codes::NET_CONFIG, format!("modes.openapi: {e}."))
            .with_next("Give an OpenAPI 3 description with paths.")
    })
}

/// Start the sidecar from checked settings.
pub async fn start(settings: Settings) -> Result<Running, Report> {
    let config = settings.config;
    let l = &config.limits;
    let metrics = Arc::new(Metrics::default());
    if let Some(limit) =
        crate::limits::raise_open_files_limit(l.max_connections, l.max_upstream_connections)
    {
        metrics.set_open_files_limit(limit);
    }
    let env: Arc<str> = Arc::from(config.env.as_str());
    let journal_settings = JournalSettings {
        dir: config.journal.dir.clone(),
        segment_bytes: config.journal.segment_bytes,
        max_segments: config.journal.max_segments,
        queue: config.journal.queue,
        batch: 1024,
        commit_interval: Limits::ms(config.journal.commit_interval_ms),
        tail: 8192,
    };
    let (journal, _writer) =
        Journal::start(&journal_settings, env, metrics.clone()).map_err(|e| {
            Report::new(
                &codes::NET_JOURNAL,
                format!(
                    "The journal directory {} cannot be used: {e}.",
                    config.journal.dir.display()
                ),
            )
        })?;
    let guard = Guard::new(
        settings.catalogue.clone(),
        GuardSettings {
            resolver: settings.resolver,
            inside: config.inside.subnets.clone(),
            trusted: config.guard.trusted_networks.clone(),
            own: own_addresses(&config),
            connect_timeout: Limits::ms(l.upstream_connect_timeout_ms),
            resolve_timeout: Limits::ms(l.resolve_timeout_ms),
            dial_timeout: Limits::ms(l.dial_timeout_ms),
            upstream: UpstreamLimit::new(l.max_upstream_connections, metrics.clone()),
        },
        metrics.clone(),
    )
    .map_err(|e| {
        Report::new(
            &codes::NET_CONFIG,
            format!(
                "The resolver {} could not be set up: {e}.",
                settings.resolver
            ),
        )
    })?;
    let guard = Arc::new(guard);
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let intercept = interception(&config, &provider, &metrics)?;
    let upstream_tls = upstream_tls(&config, &provider)?;
    let pools = Pools::new(
        guard.clone(),
        upstream_tls.clone(),
        l.pool_max_idle_per_host,
        Limits::ms(l.dial_timeout_ms),
    );
    let modes = ModeSettings {
        mock_body_bytes: config.modes.mock_body_bytes,
        capture_body_bytes: config.modes.capture_body_bytes,
        buffered: Arc::new(Semaphore::new(
            (config.modes.buffered_body_bytes / 1024).max(1),
        )),
        credentials: config.modes.credentials.clone(),
        packs: packs(&config)?,
        openapi: openapi(&config)?,
        model: config
            .modes
            .model
            .as_ref()
            .map(|m| SynthModel::new(m, guard.clone(), upstream_tls).map(Arc::new))
            .transpose()?,
    };
    if !config.guard.trusted_networks.is_empty() {
        tracing::warn!(networks = ?config.guard.trusted_networks, "guard: trusted upstream networks are set; loopback/private addresses in them will be dialled");
    }
    let state = Arc::new(State {
        rates: RuleRates::new(&settings.catalogue),
        loops: Loops::default(),
        undecided_budget: crate::decide::rate::per_second_with_burst(
            config.journal.undecided_per_second,
        ),
        catalogue: settings.catalogue,
        journal: journal.clone(),
        metrics: metrics.clone(),
        pools,
        intercept,
        modes,
        guard,
        limit: ConnectionLimit::new(l.max_connections, metrics.clone()),
        tuning: Tuning {
            header_read_timeout: Limits::ms(l.header_read_timeout_ms),
            idle_timeout: Limits::ms(l.idle_timeout_ms),
            client_hello_timeout: Limits::ms(l.client_hello_timeout_ms),
            max_header_bytes: l.max_header_bytes,
            max_headers: l.max_headers,
            tunnel_buffer_bytes: l.tunnel_buffer_bytes,
            http_port: config.listeners.transparent_http.advertised_port,
            tls_port: config.listeners.transparent_tls.upstream_port,
            smtp_max_message_bytes: config.listeners.smtp.max_message_bytes,
        },
        drain: Drain::default(),
    });

    let ls = &config.listeners;
    let admin_listener = bind("admin", Some(config.admin.listen)).await?;
    let data_threads = threads::count(l.data_threads);
    let mut data = vec![
        (
            bind_data("proxy", ls.proxy.listen, data_threads)?,
            Via::Proxy,
        ),
        (
            bind_data("transparent_http", ls.transparent_http.listen, data_threads)?,
            Via::Transparent,
        ),
        (
            bind_data("transparent_tls", ls.transparent_tls.listen, data_threads)?,
            Via::Tls,
        ),
    ];
    for addr in &ls.smtp.listen {
        data.push((bind_data("smtp", Some(*addr), data_threads)?, Via::Smtp));
    }
    let containment = match &config.containment {
        Some(c) => Some((
            c,
            bind("containment report", Some(c.report)).await?,
            bind("policy witness", Some(c.policy_witness)).await?,
            bind("fence witness", Some(c.fence_witness)).await?,
        )),
        None => None,
    };
    let dns = match settings.dns {
        Some(dns_config) => {
            let observer = Arc::new(JournalSightings {
                journal: journal.clone(),
                catalogue: state.catalogue.clone(),
            });
            let cap = Arc::new(state.limit.clone());
            let server = DnsServer::bind_under(dns_config, observer, cap)
                .await
                .map_err(dns::refusal)?;
            metrics.attach_dns(server.metrics());
            Some(server)
        }
        None => None,
    };

    let addr = |l: &Option<TcpListener>| l.as_ref().and_then(|l| l.local_addr().ok());
    // Where each data listener listens: its first socket's address (the group shares it).
    let listening = |via: Via| {
        data.iter()
            .filter(move |(_, v)| *v == via)
            .filter_map(|(sockets, _)| sockets.first()?.local_addr().ok())
    };
    let mut running = Running {
        proxy: listening(Via::Proxy).next(),
        transparent_http: listening(Via::Transparent).next(),
        transparent_tls: listening(Via::Tls).next(),
        admin: addr(&admin_listener).unwrap_or(config.admin.listen),
        dns: dns.as_ref().map(DnsServer::local_addr),
        smtp: listening(Via::Smtp).collect(),
        containment: containment
            .as_ref()
            .map(|(c, report, policy, fence)| ContainmentAddrs {
                report: addr(report).unwrap_or(c.report),
                policy_witness: addr(policy).unwrap_or(c.policy_witness),
                fence_witness: addr(fence).unwrap_or(c.fence_witness),
            }),
        journal: journal.clone(),
        metrics: metrics.clone(),
        data: state.drain.clone(),
        threads: None,
        admin_tasks: Drain::default(),
        deadline: Limits::ms(l.drain_timeout_ms),
    };
    if let Some(server) = dns {
        let stopping = state.drain.stopping();
        state.drain.spawn(async move {
            if let Err(e) = server.serve_until(stopping).await {
                tracing::error!(error = %dns::refusal(e), "the DNS server stopped");
            }
        });
    }
    // Thread n takes the n-th socket of every data listener.
    let mut per_thread: Vec<Vec<(std::net::TcpListener, Via)>> =
        (0..data_threads).map(|_| Vec::new()).collect();
    for (sockets, via) in data {
        for (own, socket) in per_thread.iter_mut().zip(sockets) {
            own.push((socket, via));
        }
    }
    running.threads = Some(DataThreads::start(per_thread, &state).map_err(|e| {
        Report::new(
            &codes::NET_CONFIG,
            format!("The sidecar could not start its {data_threads} data threads: {e}."),
        )
        .with_next("Set limits.data_threads to fewer threads, or give the sidecar more.")
    })?);
    let inside = deliver::Inside {
        names: config.inside.names.clone(),
        hosts: config.inside.hosts.clone(),
        subnets: config.inside.subnets.clone(),
        resolver: match ls.dns.listen.and(ls.dns.inside_resolver) {
            Some(server) => Some(
                resolver_for(server, Limits::ms(l.resolve_timeout_ms)).map_err(|e| {
                    Report::new(
                        &codes::NET_CONFIG,
                        format!("The inside resolver {server} could not be set up: {e}."),
                    )
                })?,
            ),
            None => None,
        },
    };
    let watchers = containment.map(|(c, report, policy, fence)| {
        let watchers = Arc::new(Watchers::new(c, journal.clone(), metrics.clone()));
        let tasks = &running.admin_tasks;
        let reports = Arc::new(Reports {
            watchers: watchers.clone(),
            expected_auth: format!("Bearer {}", c.token).into_bytes(),
            metrics: metrics.clone(),
        });
        for (listener, witness) in [(policy, Witness::Policy), (fence, Witness::Fence)] {
            if let Some(listener) = listener {
                tasks.spawn(report::witness_loop(
                    listener,
                    witness,
                    metrics.clone(),
                    tasks.clone(),
                ));
            }
        }
        if let Some(listener) = report {
            tasks.spawn(report::accept_loop(listener, reports, tasks.clone()));
        }
        watchers
    });
    if let Some(admin_listener) = admin_listener {
        let admin = Arc::new(Admin {
            journal,
            drain: running.admin_tasks.clone(),
            metrics,
            expected_auth: format!("Bearer {}", config.admin.token).into_bytes(),
            inside,
            containment: watchers,
        });
        running
            .admin_tasks
            .spawn(admin::accept_loop(admin_listener, admin));
    }
    tracing::info!(
        proxy = %Listening(running.proxy),
        transparent_http = %Listening(running.transparent_http),
        transparent_tls = %Listening(running.transparent_tls),
        dns = %Listening(running.dns),
        admin = %running.admin,
        "af-proxy listening"
    );
    Ok(running)
}

/// A listener's address as the log shows it: `0.0.0.0:3128`, or `off`.
struct Listening(Option<SocketAddr>);

impl std::fmt::Display for Listening {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.0 {
            Some(addr) => write!(f, "{addr}"),
            None => f.write_str("off"),
        }
    }
}
