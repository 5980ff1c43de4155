//! The harness's one error type.

use std::path::PathBuf;

/// Everything that can go wrong while setting up, running or reporting a benchmark.
#[derive(Debug, thiserror::Error)]
pub(crate) enum BenchError {
    /// A file or socket operation failed.
    #[error("{what}: {source}")]
    Io {
        /// What the harness was doing.
        what: String,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// A program the harness needs could not be started.
    #[error("cannot start {program}: {source}")]
    Spawn {
        /// The program's name or path.
        program: String,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// A system under test did not become ready in time.
    #[error("{system} did not become ready on port {port} within {secs} s{detail}")]
    NotReady {
        /// The system's name.
        system: String,
        /// The port the harness waited on.
        port: u16,
        /// How long the harness waited.
        secs: u64,
        /// What the system wrote to stderr, if anything.
        detail: String,
    },
    /// A system under test exited while it should have been serving.
    #[error("{system} exited early ({status}){detail}")]
    Exited {
        /// The system's name.
        system: String,
        /// Its exit status.
        status: String,
        /// What it wrote to stderr, if anything.
        detail: String,
    },
    /// A `cargo build` the harness needs failed.
    #[error("`cargo {command}` failed ({status}); run it by hand (benches/README.md) to see why")]
    Build {
        /// Cargo's arguments.
        command: String,
        /// Cargo's exit status.
        status: String,
    },
    /// A git command the harness needs (`--compare`) failed.
    #[error("`git {command}` failed ({status}): {stderr}")]
    Git {
        /// Git's arguments.
        command: String,
        /// Git's exit status.
        status: String,
        /// What git said.
        stderr: String,
    },
    /// A load generator's output could not be understood.
    #[error("cannot parse {tool} output: {reason}")]
    Parse {
        /// wrk, dnsperf, …
        tool: &'static str,
        /// What was missing or malformed.
        reason: String,
    },
    /// A load generator exited unsuccessfully.
    #[error("{tool} failed ({status}): {stderr}")]
    Load {
        /// wrk, dnsperf, …
        tool: &'static str,
        /// Its exit status.
        status: String,
        /// The tail of its stderr.
        stderr: String,
    },
    /// A protocol exchange with a system under test went wrong.
    #[error("{0}")]
    Protocol(String),
    /// /proc could not be read for a process.
    #[error("cannot read /proc for pid {pid}: {source}")]
    Proc {
        /// The process id.
        pid: u32,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// Writing the JSON results failed.
    #[error("cannot write {path}: {source}")]
    Json {
        /// The file.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: serde_json::Error,
    },
    /// Drawing the SVG chart failed.
    #[error("cannot draw chart {path}: {reason}")]
    Chart {
        /// The file.
        path: PathBuf,
        /// The backend's message.
        reason: String,
    },
    /// TLS setup for the intercepted-HTTPS scenario failed.
    #[error("tls: {0}")]
    Tls(String),
}

impl BenchError {
    /// Wraps an I/O error with what the harness was doing.
    pub(crate) fn io(what: impl Into<String>, source: std::io::Error) -> Self {
        Self::Io {
            what: what.into(),
            source,
        }
    }
}

/// The harness's result type.
pub(crate) type Result<T> = std::result::Result<T, BenchError>;
