//! The machine-readable results file.

use std::path::Path;

use serde::Serialize;

use super::Row;
use super::goals::Judged;
use crate::error::{BenchError, Result};
use crate::scenarios::Measurement;

/// Everything one invocation measured.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Results {
    /// When the run finished (RFC 3339, UTC).
    pub date: String,
    /// Which machine: label, cores, memory, kernel.
    pub machine: String,
    /// `--quick` or a full run.
    pub quick: bool,
    /// Rounds per system and scenario.
    pub rounds: u32,
    /// Measured seconds per timed run.
    pub duration_secs: u64,
    /// Idle connections in the memory scenario.
    pub idle_connections: usize,
    /// Data-plane threads: every system's, then each other count af-proxy and HAProxy were
    /// measured with.
    pub threads: Vec<u32>,
    /// The table.
    pub rows: Vec<Row>,
    /// Every goal, judged from `rows`.
    pub goals: Vec<Judged>,
    /// Every individual run, for anyone who wants more than medians.
    pub runs: Vec<Measurement>,
}

/// Writes `results` as pretty JSON to `path`.
pub(crate) fn write(results: &Results, path: &Path) -> Result<()> {
    let file = std::fs::File::create(path)
        .map_err(|e| BenchError::io(format!("create {}", path.display()), e))?;
    serde_json::to_writer_pretty(std::io::BufWriter::new(file), results).map_err(|source| {
        BenchError::Json {
            path: path.to_path_buf(),
            source,
        }
    })
}
