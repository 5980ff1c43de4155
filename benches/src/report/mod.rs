//! Turning the runs into the table: medians across rounds and ratios to af-proxy.

pub(crate) mod chart;
pub(crate) mod goals;
pub(crate) mod json;
pub(crate) mod table;

use serde::Serialize;

use crate::scenarios::{Measurement, Scenario, Unit};

/// The system every ratio is taken against.
pub(crate) const REFERENCE: &str = "af-proxy";
/// The reference in a scenario where af-proxy has no figure (DNS before af-dns is wired in).
pub(crate) const FALLBACK_REFERENCE: &str = "af-dns";

/// What a row says about a system in a scenario.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "kebab-case", tag = "status", content = "reason")]
pub(crate) enum Status {
    /// Measured: the figures are medians of the successful rounds.
    Measured,
    /// The program is not installed here.
    Missing(String),
    /// Part of the plan, not measurable yet.
    Pending(String),
    /// Every round failed; the first error.
    Failed(String),
}

/// One line of the table.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Row {
    /// System name.
    pub system: String,
    /// Scenario.
    pub scenario: Scenario,
    /// Measured, missing, pending or failed.
    #[serde(flatten)]
    pub status: Status,
    /// Unit of `value`.
    pub unit: Unit,
    /// Median headline figure.
    pub value: Option<f64>,
    /// Median p50 latency, µs.
    pub p50_us: Option<f64>,
    /// Median p99 latency, µs.
    pub p99_us: Option<f64>,
    /// Median p99.9 latency, µs.
    pub p999_us: Option<f64>,
    /// Median mean latency, µs.
    pub mean_us: Option<f64>,
    /// Errors summed over the rounds.
    pub errors: u64,
    /// Median CPU seconds per 10k requests (per GB for connect-bulk).
    pub cpu_per_unit: Option<f64>,
    /// Largest peak RSS over the rounds, KiB.
    pub peak_rss_kib: Option<u64>,
    /// Median heap allocations per request (query, tunnel), for a system that counts them.
    pub allocs_per_op: Option<f64>,
    /// Median KiB of heap held per idle connection, for a system that counts it.
    pub heap_kib_per_op: Option<f64>,
    /// Median instructions per operation (callgrind), where counted.
    pub instructions_per_op: Option<f64>,
    /// `value` divided by af-proxy's in the same scenario.
    pub ratio: Option<f64>,
    /// Successful rounds.
    pub rounds: usize,
}

impl Row {
    /// A row with no figures.
    pub(crate) fn empty(system: &str, scenario: Scenario, status: Status) -> Self {
        Self {
            system: system.to_string(),
            scenario,
            status,
            unit: scenario.unit(),
            value: None,
            p50_us: None,
            p99_us: None,
            p999_us: None,
            mean_us: None,
            errors: 0,
            cpu_per_unit: None,
            peak_rss_kib: None,
            allocs_per_op: None,
            heap_kib_per_op: None,
            instructions_per_op: None,
            ratio: None,
            rounds: 0,
        }
    }

    /// The medians of `runs` (all of one system and scenario).
    pub(crate) fn measured(system: &str, scenario: Scenario, runs: &[&Measurement]) -> Self {
        let med = |f: &dyn Fn(&Measurement) -> Option<f64>| {
            median(runs.iter().filter_map(|m| f(m)).collect())
        };
        Self {
            status: Status::Measured,
            value: med(&|m| Some(m.value)),
            p50_us: med(&|m| m.load.p50_us),
            p99_us: med(&|m| m.load.p99_us),
            p999_us: med(&|m| m.load.p999_us),
            mean_us: med(&|m| m.load.mean_us),
            errors: runs.iter().map(|m| m.load.errors).sum(),
            cpu_per_unit: med(&|m| m.cpu_per_unit),
            peak_rss_kib: runs.iter().filter_map(|m| m.peak_rss_kib).max(),
            allocs_per_op: med(&|m| m.allocs_per_op),
            heap_kib_per_op: med(&|m| m.heap_kib_per_op),
            instructions_per_op: med(&|m| m.instructions_per_op),
            rounds: runs.len(),
            ..Self::empty(system, scenario, Status::Measured)
        }
    }
}

/// The median (mean of the middle two for an even count); `None` when empty.
pub(crate) fn median(mut values: Vec<f64>) -> Option<f64> {
    values.retain(|v| v.is_finite());
    if values.is_empty() {
        return None;
    }
    values.sort_by(f64::total_cmp);
    let mid = values.len() / 2;
    Some(if values.len().is_multiple_of(2) {
        (values[mid - 1] + values[mid]) / 2.0
    } else {
        values[mid]
    })
}

/// The reference of `af-up`: `af up` itself (no af-proxy there).
pub(crate) const STACK_REFERENCE: &str = "af";

/// The system a scenario's ratios are taken against.
fn reference(scenario: Scenario) -> &'static str {
    match scenario {
        Scenario::AfUp => STACK_REFERENCE,
        _ => REFERENCE,
    }
}

/// Fills each measured row's ratio to af-proxy's value in the same scenario (af-dns's where
/// af-proxy has none; `af`'s in `af-up`).
pub(crate) fn fill_ratios(rows: &mut [Row]) {
    let value_of = |name: &str, scenario: Scenario| {
        rows.iter()
            .find(|r| r.system == name && r.scenario == scenario)
            .and_then(|r| r.value)
    };
    let bases: Vec<Option<f64>> = rows
        .iter()
        .map(|r| {
            value_of(reference(r.scenario), r.scenario)
                .or_else(|| value_of(FALLBACK_REFERENCE, r.scenario))
        })
        .collect();
    for (row, base) in rows.iter_mut().zip(bases) {
        row.ratio = match (row.value, base) {
            (Some(v), Some(b)) if b > 0.0 => Some(v / b),
            _ => None,
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::load::LoadResult;

    fn m(system: &str, value: f64, p99: f64) -> Measurement {
        Measurement {
            system: system.into(),
            scenario: Scenario::HttpKeepAlive,
            round: 0,
            value,
            unit: Unit::RequestsPerSec,
            load: LoadResult {
                ops: 10,
                p99_us: Some(p99),
                errors: 1,
                ..LoadResult::default()
            },
            cpu_secs: Some(1.0),
            cpu_per_unit: Some(2.0),
            peak_rss_kib: Some(value as u64),
            allocs_per_op: Some(value / 10.0),
            heap_kib_per_op: None,
            instructions_per_op: None,
        }
    }

    #[test]
    fn median_of_odd_and_even_counts() {
        assert_eq!(median(vec![3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(vec![4.0, 1.0, 3.0, 2.0]), Some(2.5));
        assert_eq!(median(vec![]), None);
        assert_eq!(median(vec![f64::NAN, 5.0]), Some(5.0));
    }

    #[test]
    fn a_measured_row_takes_medians_sums_errors_and_keeps_the_peak() {
        let runs = [
            m("squid", 100.0, 9.0),
            m("squid", 300.0, 1.0),
            m("squid", 200.0, 5.0),
        ];
        let refs: Vec<&Measurement> = runs.iter().collect();
        let row = Row::measured("squid", Scenario::HttpKeepAlive, &refs);
        assert_eq!(row.value, Some(200.0));
        assert_eq!(row.p99_us, Some(5.0));
        assert_eq!(row.errors, 3);
        assert_eq!(row.peak_rss_kib, Some(300));
        assert_eq!(row.allocs_per_op, Some(20.0));
        assert_eq!(row.rounds, 3);
    }

    #[test]
    fn ratios_are_against_af_proxy_in_the_same_scenario() {
        let a = [m("af-proxy", 400.0, 1.0)];
        let b = [m("squid", 100.0, 1.0)];
        let mut rows = vec![
            Row::measured(
                "af-proxy",
                Scenario::HttpKeepAlive,
                &a.iter().collect::<Vec<_>>(),
            ),
            Row::measured(
                "squid",
                Scenario::HttpKeepAlive,
                &b.iter().collect::<Vec<_>>(),
            ),
            Row::empty(
                "tinyproxy",
                Scenario::HttpKeepAlive,
                Status::Missing("x".into()),
            ),
            Row::measured("af-dns", Scenario::Dns, &[&dns(50.0)]),
            Row::measured("unbound", Scenario::Dns, &[&dns(100.0)]),
        ];
        fill_ratios(&mut rows);
        assert_eq!(rows[0].ratio, Some(1.0));
        assert_eq!(rows[1].ratio, Some(0.25));
        assert_eq!(rows[2].ratio, None);
        assert_eq!(
            rows[4].ratio,
            Some(2.0),
            "af-dns is the reference when af-proxy has no DNS figure"
        );
    }

    fn dns(value: f64) -> Measurement {
        Measurement {
            scenario: Scenario::Dns,
            ..m("x", value, 1.0)
        }
    }
}
