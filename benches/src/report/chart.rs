//! The SVG chart: one panel per scenario, one bar per system (median), af-proxy highlighted.

use std::path::Path;

use plotters::prelude::*;

use super::{REFERENCE, Row, Status};
use crate::error::{BenchError, Result};
use crate::scenarios::Scenario;

/// Draws the measured rows of `rows` into an SVG at `path`.
pub(crate) fn draw(rows: &[Row], title: &str, path: &Path) -> Result<()> {
    let err = |e: &dyn std::fmt::Display| BenchError::Chart {
        path: path.to_path_buf(),
        reason: e.to_string(),
    };
    let panels: Vec<(Scenario, Vec<&Row>)> = Scenario::ALL
        .iter()
        .map(|s| {
            let measured: Vec<&Row> = rows
                .iter()
                .filter(|r| r.scenario == *s && r.status == Status::Measured && r.value.is_some())
                .collect();
            (*s, measured)
        })
        .filter(|(_, rs)| !rs.is_empty())
        .collect();
    let cols = 2usize;
    let grid_rows = panels.len().div_ceil(cols).max(1);
    let (w, h) = (1200u32, 80 + 300 * grid_rows as u32);
    let root = SVGBackend::new(path, (w, h)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| err(&e))?;
    let root = root
        .titled(title, ("sans-serif", 22))
        .map_err(|e| err(&e))?;
    let areas = root.split_evenly((grid_rows, cols));
    for ((scenario, rs), area) in panels.iter().zip(areas.iter()) {
        let max = rs
            .iter()
            .filter_map(|r| r.value)
            .fold(0.0f64, f64::max)
            .max(1e-9);
        let n = rs.len();
        let better = if scenario.unit().higher_is_better() {
            "higher is better"
        } else {
            "lower is better"
        };
        let caption = format!(
            "{} ({}, {better})",
            scenario.name(),
            scenario.unit().label()
        );
        let mut chart = ChartBuilder::on(area)
            .caption(caption, ("sans-serif", 16))
            .margin(10)
            .x_label_area_size(30)
            .y_label_area_size(70)
            .build_cartesian_2d((0..n).into_segmented(), 0.0..max * 1.15)
            .map_err(|e| err(&e))?;
        let names: Vec<String> = rs.iter().map(|r| r.system.clone()).collect();
        chart
            .configure_mesh()
            .disable_x_mesh()
            .x_labels(n)
            .x_label_formatter(&|v| match v {
                SegmentValue::CenterOf(i) => names.get(*i).cloned().unwrap_or_default(),
                _ => String::new(),
            })
            .y_label_formatter(&|v| super::table::figure(*v))
            .draw()
            .map_err(|e| err(&e))?;
        let bars = rs.iter().enumerate().map(|(i, r)| {
            let color = if r.system == REFERENCE {
                RGBColor(214, 39, 40)
            } else {
                RGBColor(120, 144, 176)
            };
            let v = r.value.unwrap_or(0.0);
            let mut bar = Rectangle::new(
                [
                    (SegmentValue::Exact(i), 0.0),
                    (SegmentValue::Exact(i + 1), v),
                ],
                color.filled(),
            );
            bar.set_margin(0, 0, 12, 12);
            bar
        });
        chart.draw_series(bars).map_err(|e| err(&e))?;
        let labels = rs.iter().enumerate().map(|(i, r)| {
            let v = r.value.unwrap_or(0.0);
            Text::new(
                super::table::figure(v),
                (SegmentValue::CenterOf(i), v + max * 0.03),
                ("sans-serif", 12).into_font(),
            )
        });
        chart.draw_series(labels).map_err(|e| err(&e))?;
    }
    root.present().map_err(|e| err(&e))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_chart_is_written_with_one_panel_per_measured_scenario() {
        let mut a = Row::empty("af-proxy", Scenario::HttpKeepAlive, Status::Measured);
        a.value = Some(1000.0);
        let mut b = Row::empty("squid", Scenario::HttpKeepAlive, Status::Measured);
        b.value = Some(250.0);
        let c = Row::empty("tinyproxy", Scenario::Dns, Status::Missing("x".into()));
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("c.svg");
        draw(&[a, b, c], "test", &path).expect("drawn");
        let svg = std::fs::read_to_string(&path).expect("read");
        assert!(svg.contains("http-keepalive") && svg.contains("squid"));
        assert!(!svg.contains("tinyproxy"));
    }
}
