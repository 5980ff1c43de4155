//! The `decision` scenario: one `Catalogue::decide`, the criterion bench's three requests at 10
//! and at 10 000 rules, timed and its allocations counted by the policy crate's driver
//! (`policy/examples/decide.rs`, in a process of its own with a counting allocator), and its
//! instructions counted under callgrind when valgrind is installed.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use af_fixtures::cargo::{self, Linkage};

use crate::error::{BenchError, Result};
use crate::load::{self, LoadResult};
use crate::scenarios::{Load, Measurement, Scenario};
use crate::systems;

/// Decisions in the counted callgrind run (one with none is the baseline).
const COUNTED: u64 = 100_000;

/// One row: a kind of request against a catalogue of `rules` rules.
#[derive(Debug, Clone)]
pub(crate) struct Case {
    /// `exact`, `wildcard` or `miss` (the driver's names).
    kind: &'static str,
    /// The catalogue's size.
    rules: usize,
    /// As in the table: "exact 10".
    name: String,
    /// The driver.
    driver: PathBuf,
}

/// The six cases, run by `driver`.
pub(crate) fn cases(driver: &Path) -> Vec<Case> {
    [10, 10_000]
        .into_iter()
        .flat_map(|rules| {
            ["exact", "wildcard", "miss"].map(|kind| Case {
                kind,
                rules,
                name: format!("{kind} {rules}"),
                driver: driver.to_path_buf(),
            })
        })
        .collect()
}

/// Builds the driver (static release, as af-proxy is built, so it shares that build's
/// dependencies) and returns where it landed.
pub(crate) fn build_driver(root: &Path) -> Result<PathBuf> {
    systems::cargo_build(
        root,
        Linkage::Static,
        &["-p", "af-policy", "--example", "decide"],
    )?;
    Ok(cargo::static_release_dir(root)
        .join("examples")
        .join("decide"))
}

impl Case {
    /// As in the table.
    pub(crate) fn name(&self) -> &str {
        &self.name
    }

    /// One round: the driver's median batch over a quarter of the run's duration (at least
    /// half a second); in round 0 the instructions too (callgrind's count does not vary).
    pub(crate) fn measure(&self, round: u32, load: &Load) -> Result<Measurement> {
        let millis = (load.duration.as_millis() / 4).max(500);
        let timed = Timed::parse(&self.run("time", &millis.to_string())?)?;
        let instructions = if round == 0 && systems::find_program("valgrind").is_some() {
            Some(self.instructions()?)
        } else {
            None
        };
        Ok(Measurement {
            system: self.name.clone(),
            scenario: Scenario::Decision,
            round,
            value: timed.ns,
            unit: Scenario::Decision.unit(),
            load: LoadResult {
                ops: timed.decisions,
                secs: timed.ns * timed.decisions as f64 / 1e9,
                ..LoadResult::default()
            },
            cpu_secs: None,
            cpu_per_unit: None,
            peak_rss_kib: None,
            allocs_per_op: Some(timed.allocations as f64 / timed.decisions as f64),
            heap_kib_per_op: None,
            instructions_per_op: instructions,
        })
    }

    /// Callgrind's instructions for [`COUNTED`] decisions less those for none, per decision.
    fn instructions(&self) -> Result<f64> {
        let collected = |count: u64| -> Result<u64> {
            let out = Self::output(
                Command::new("valgrind")
                    .args(["--tool=callgrind", "--callgrind-out-file=/dev/null"])
                    .arg(&self.driver)
                    .args(self.args("count", &count.to_string())),
                "valgrind",
            )?;
            let stderr = String::from_utf8_lossy(&out.stderr);
            stderr
                .lines()
                .find_map(|l| {
                    l.split_once("Collected :")
                        .map(|(_, n)| n.trim().parse().ok())
                })
                .flatten()
                .ok_or_else(|| {
                    BenchError::Protocol(format!(
                        "callgrind printed no instruction count: {stderr}"
                    ))
                })
        };
        let (base, counted) = (collected(0)?, collected(COUNTED)?);
        Ok(counted.saturating_sub(base) as f64 / COUNTED as f64)
    }

    /// The driver's arguments for `mode` and `amount`.
    fn args(&self, mode: &str, amount: &str) -> [String; 4] {
        [mode, self.kind, &self.rules.to_string(), amount].map(str::to_owned)
    }

    /// The driver's standard output for `mode` and `amount`.
    fn run(&self, mode: &str, amount: &str) -> Result<String> {
        let out = Self::output(
            Command::new(&self.driver).args(self.args(mode, amount)),
            "the decision driver",
        )?;
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    }

    /// `cmd`'s output, an error unless it exited successfully.
    fn output(cmd: &mut Command, what: &'static str) -> Result<Output> {
        let out = cmd.output().map_err(|source| BenchError::Spawn {
            program: what.into(),
            source,
        })?;
        if out.status.success() {
            Ok(out)
        } else {
            Err(BenchError::Load {
                tool: what,
                status: out.status.to_string(),
                stderr: load::tail(&out.stderr),
            })
        }
    }
}

/// What the driver's `time` mode printed.
#[derive(Debug, PartialEq)]
struct Timed {
    ns: f64,
    allocations: u64,
    decisions: u64,
}

impl Timed {
    /// `ns=24.49 allocations=0 decisions=40800000`.
    fn parse(line: &str) -> Result<Self> {
        let field = |key: &str| {
            line.split_whitespace()
                .find_map(|w| w.strip_prefix(key)?.strip_prefix('='))
                .ok_or_else(|| BenchError::Protocol(format!("the driver printed no {key}: {line}")))
        };
        let number = |key: &str| {
            field(key)?.parse::<u64>().map_err(|_| {
                BenchError::Protocol(format!("the driver's {key} is not a count: {line}"))
            })
        };
        let ns = field("ns")?.parse::<f64>().map_err(|_| {
            BenchError::Protocol(format!("the driver's ns is not a number: {line}"))
        })?;
        let decisions = number("decisions")?;
        if decisions == 0 {
            return Err(BenchError::Protocol(format!(
                "the driver made no decision: {line}"
            )));
        }
        Ok(Self {
            ns,
            allocations: number("allocations")?,
            decisions,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_drivers_line_is_read_field_by_field() {
        assert_eq!(
            Timed::parse("ns=24.49 allocations=3 decisions=40800000\n").ok(),
            Some(Timed {
                ns: 24.49,
                allocations: 3,
                decisions: 40_800_000
            })
        );
        for bad in [
            "",
            "ns=fast allocations=0 decisions=1",
            "ns=1 allocations=0",
            "ns=1 allocations=0 decisions=0",
            "nsx=1 allocations=0 decisions=5",
        ] {
            assert!(Timed::parse(bad).is_err(), "{bad:?} was read");
        }
    }

    #[test]
    fn six_cases_name_their_kind_and_size() {
        let names: Vec<String> = cases(Path::new("/d"))
            .iter()
            .map(|c| c.name().to_owned())
            .collect();
        assert_eq!(
            names,
            [
                "exact 10",
                "wildcard 10",
                "miss 10",
                "exact 10000",
                "wildcard 10000",
                "miss 10000"
            ]
        );
    }
}
