//! The plain-text table printed at the end of a run (and kept in the README).

use super::{Row, Status};
use crate::scenarios::Scenario;

/// Column headers.
const HEADERS: [&str; 12] = [
    "scenario",
    "system",
    "rate",
    "p50",
    "p99",
    "p99.9",
    "errors",
    "CPU",
    "peak RSS",
    "allocs/op",
    "Ir/op",
    "vs af-proxy",
];

/// Renders `rows` as an aligned text table, one block per scenario.
pub(crate) fn render(rows: &[Row]) -> String {
    let mut cells: Vec<Vec<String>> = Vec::with_capacity(rows.len());
    for row in rows {
        cells.push(cells_of(row));
    }
    let mut widths: Vec<usize> = HEADERS.iter().map(|h| h.chars().count()).collect();
    for line in &cells {
        // A status line spans the figure columns; it does not widen them.
        let spanned = line.len() < HEADERS.len();
        for (i, c) in line.iter().enumerate() {
            if !(spanned && i == line.len() - 1) {
                widths[i] = widths[i].max(c.chars().count());
            }
        }
    }
    let mut out = String::new();
    push_line(&mut out, &HEADERS.map(String::from), &widths);
    let rule: Vec<String> = widths.iter().map(|w| "-".repeat(*w)).collect();
    push_line(&mut out, &rule, &widths);
    let mut last: Option<Scenario> = None;
    for (row, line) in rows.iter().zip(&cells) {
        if last.is_some_and(|s| s != row.scenario) {
            out.push('\n');
        }
        last = Some(row.scenario);
        push_line(&mut out, line, &widths);
    }
    out
}

fn push_line(out: &mut String, cells: &[String], widths: &[usize]) {
    let mut parts = Vec::with_capacity(cells.len());
    for (i, c) in cells.iter().enumerate() {
        let last = i + 1 == cells.len();
        let w = widths[i];
        // Text columns left, figures right.
        if last && cells.len() < widths.len() {
            parts.push(c.clone());
        } else if i < 2 {
            parts.push(format!("{c:<w$}"));
        } else {
            parts.push(format!("{c:>w$}"));
        }
    }
    out.push_str(parts.join("  ").trim_end());
    out.push('\n');
}

fn cells_of(row: &Row) -> Vec<String> {
    let head = vec![row.scenario.name().to_string(), row.system.clone()];
    let status = match &row.status {
        Status::Measured => None,
        Status::Missing(r) => Some(format!("missing ({r})")),
        Status::Pending(r) => Some(format!("pending ({r})")),
        Status::Failed(r) => Some(format!("failed ({})", shorten(r, 90))),
    };
    if let Some(s) = status {
        return [head, vec![s]].concat();
    }
    let cpu_unit = if row.scenario == Scenario::ConnectBulk {
        "s/GB"
    } else {
        "s/10k"
    };
    let mut line = head;
    line.push(
        row.value
            .map(|v| format!("{} {}", figure(v), row.unit.label()))
            .unwrap_or_default(),
    );
    // dnsperf gives only a mean: shown in the p50 column, marked with `~`.
    line.push(match (row.p50_us, row.mean_us) {
        (None, Some(mean)) => format!("~{}", ms(Some(mean))),
        (p50, _) => ms(p50),
    });
    line.push(ms(row.p99_us));
    line.push(ms(row.p999_us));
    line.push(row.errors.to_string());
    line.push(
        row.cpu_per_unit
            .map(|c| format!("{c:.2} {cpu_unit}"))
            .unwrap_or_else(|| "-".into()),
    );
    line.push(
        row.peak_rss_kib
            .map(|k| format!("{:.1} MiB", k as f64 / 1024.0))
            .unwrap_or_else(|| "-".into()),
    );
    line.push(
        row.allocs_per_op
            .map(|a| format!("{a:.1}"))
            .unwrap_or_else(|| "-".into()),
    );
    line.push(
        row.instructions_per_op
            .map(|i| format!("{i:.0}"))
            .unwrap_or_else(|| "-".into()),
    );
    line.push(
        row.ratio
            .map(|r| format!("{r:.2}x"))
            .unwrap_or_else(|| "-".into()),
    );
    line
}

/// A headline figure: no decimals when large, some when small.
pub(crate) fn figure(v: f64) -> String {
    if v >= 100.0 {
        format!("{v:.0}")
    } else if v >= 10.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    }
}

/// Microseconds as milliseconds, `-` when absent.
fn ms(us: Option<f64>) -> String {
    us.map(|u| format!("{:.2}ms", u / 1000.0))
        .unwrap_or_else(|| "-".into())
}

fn shorten(s: &str, max: usize) -> String {
    if s.chars().count() <= max {
        s.to_string()
    } else {
        let cut: String = s.chars().take(max).collect();
        format!("{cut}…")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scenarios::Unit;

    fn row(system: &str, scenario: Scenario, status: Status) -> Row {
        Row::empty(system, scenario, status)
    }

    #[test]
    fn measured_rows_show_units_and_ratios_and_others_show_their_status() {
        let mut a = row("af-proxy", Scenario::HttpKeepAlive, Status::Measured);
        a.value = Some(41_234.4);
        a.p50_us = Some(1_500.0);
        a.p99_us = Some(4_000.0);
        a.p999_us = Some(9_000.0);
        a.cpu_per_unit = Some(0.5);
        a.peak_rss_kib = Some(10_240);
        a.allocs_per_op = Some(31.26);
        a.ratio = Some(1.0);
        let mut dns = row("unbound", Scenario::Dns, Status::Measured);
        dns.mean_us = Some(2_000.0);
        let rows = vec![
            a,
            row(
                "tinyproxy",
                Scenario::HttpKeepAlive,
                Status::Missing("tinyproxy not installed".into()),
            ),
            row(
                "af-proxy",
                Scenario::Dns,
                Status::Pending("not wired".into()),
            ),
            dns,
        ];
        let text = render(&rows);
        let lines: Vec<&str> = text.lines().collect();
        assert!(lines[0].starts_with("scenario") && lines[0].contains("vs af-proxy"));
        assert!(lines[2].contains("41234 req/s") && lines[2].contains("1.50ms"));
        assert!(
            lines[2].contains("0.50 s/10k")
                && lines[2].contains("10.0 MiB")
                && lines[2].contains("31.3")
                && lines[2].ends_with("1.00x")
        );
        assert!(lines[3].ends_with("missing (tinyproxy not installed)"));
        assert_eq!(lines[4], "", "a blank line between scenarios");
        assert!(lines[5].contains("pending (not wired)"));
        assert!(
            lines[6].contains("~2.00ms"),
            "a mean stands in for p50, marked"
        );
        assert_eq!(Unit::KibPerConn.label(), "KiB/conn");
    }

    #[test]
    fn figures_keep_sensible_precision() {
        assert_eq!(figure(12345.6), "12346");
        assert_eq!(figure(12.34), "12.3");
        assert_eq!(figure(1.234), "1.23");
    }
}
