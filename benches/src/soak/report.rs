//! The soak's checks and its results files: `NAME.json` (everything), `NAME.txt` (the
//! figures), `NAME.svg` (the sidecar's open files and memory through the hold).

use std::fmt::Write as _;
use std::path::Path;

use plotters::prelude::*;

use super::Results;
use super::hold::Held;
use super::kill::Killed;
use super::lifecycle::Stopped;
use crate::error::{BenchError, Result};

/// What the hold must show, as sentences of what it did not.
pub(super) fn hold_failures(h: &Held) -> Vec<String> {
    let mut out = Vec::new();
    if h.unexpected_errors > 0 {
        out.push(format!(
            "hold: {} unexpected errors {:?}",
            h.unexpected_errors, h.errors
        ));
    }
    if h.files_back_secs.is_none() {
        out.push(format!(
            "hold: open files not back to the baseline ({} + {}) within the settle time: {}",
            h.baseline.open_files, h.tolerance.open_files, h.after.open_files
        ));
    }
    if h.rss_back_secs.is_none() {
        out.push(format!(
            "hold: RSS not back to the baseline ({} + {}) within the settle time: {}",
            mib(h.baseline.rss_kib),
            mib(h.tolerance.rss_kib),
            mib(h.after.rss_kib)
        ));
    }
    out
}

/// What the later holds on the same sidecar must show: no error, and memory that stops
/// growing (the last peak within the tolerance of the one before: what a hold left is reused).
pub(super) fn again_failures(first: &Held, again: &[Held]) -> Vec<String> {
    let mut out = Vec::new();
    let mut previous = first;
    for (i, a) in again.iter().enumerate() {
        if a.unexpected_errors > 0 {
            out.push(format!(
                "hold {}: {} unexpected errors {:?}",
                i + 2,
                a.unexpected_errors,
                a.errors
            ));
        }
        if i + 1 == again.len() && a.peak.rss_kib > previous.peak.rss_kib + first.tolerance.rss_kib
        {
            out.push(format!(
                "hold {}: RSS still growing, past the previous hold's peak ({} + {}): {}",
                i + 2,
                mib(previous.peak.rss_kib),
                mib(first.tolerance.rss_kib),
                mib(a.peak.rss_kib)
            ));
        }
        previous = a;
    }
    out
}

/// What the kills must show.
pub(super) fn kill_failures(k: &Killed) -> Vec<String> {
    let mut out = Vec::new();
    if k.lost > 0 || k.changed > 0 {
        out.push(format!(
            "kill: {} records the admin API had returned were lost and {} changed",
            k.lost, k.changed
        ));
    }
    if k.returned == 0 {
        out.push(
            "kill: the admin API returned no record before a kill (nothing was checked)".into(),
        );
    }
    out
}

/// What each stopped `af up` must show.
pub(super) fn lifecycle_failures(s: &Stopped) -> Vec<String> {
    s.runs
        .iter()
        .filter(|r| !r.passed)
        .map(|r| {
            format!(
                "{:?} at step {} ({}): exit {:?}, code {:?}, down {:?}, left {:?}",
                s.fault, r.step, r.at, r.exit, r.code, r.down_exit, r.left
            )
        })
        .collect()
}

/// Writes `results` to `dir/{stem}.json`, `.txt` and (with a hold) `.svg`.
pub(super) fn write(results: &Results, dir: &Path, stem: &str) -> Result<()> {
    std::fs::create_dir_all(dir)
        .map_err(|e| BenchError::io(format!("create {}", dir.display()), e))?;
    let json = dir.join(format!("{stem}.json"));
    let file = std::fs::File::create(&json)
        .map_err(|e| BenchError::io(format!("create {}", json.display()), e))?;
    serde_json::to_writer_pretty(std::io::BufWriter::new(file), results).map_err(|source| {
        BenchError::Json {
            path: json.clone(),
            source,
        }
    })?;
    let text = render(results);
    let txt = dir.join(format!("{stem}.txt"));
    std::fs::write(&txt, &text)
        .map_err(|e| BenchError::io(format!("write {}", txt.display()), e))?;
    println!("{text}");
    if let Some(hold) = &results.hold {
        let svg = dir.join(format!("{stem}.svg"));
        draw(
            hold,
            &format!("af-benches soak {} on {}", results.date, results.machine),
            &svg,
        )?;
    }
    eprintln!("wrote {}", dir.display());
    Ok(())
}

fn mib(kib: u64) -> String {
    format!("{:.1} MiB", kib as f64 / 1024.0)
}

/// The figures as text.
pub(super) fn render(r: &Results) -> String {
    let mut t = String::new();
    let _ = writeln!(
        t,
        "af-benches soak {} on {} (af-proxy {}, commit {}{})\n",
        r.date,
        r.machine,
        r.af_proxy,
        r.commit,
        if r.quick { ", --quick" } else { "" }
    );
    if let Some(h) = &r.hold {
        let _ = writeln!(
            t,
            "hold: {} client connections ({} CONNECT tunnels), {} set up in {:.1} s, held {:.0} s, a request every {:.0} s each",
            h.connections, h.tunnels, h.opened, h.setup_secs, h.held_secs, h.interval_secs
        );
        let _ = writeln!(
            t,
            "  requests answered {}, unexpected errors {} {:?}",
            h.answered, h.unexpected_errors, h.errors
        );
        let _ = writeln!(t, "  sidecar counters: {:?}", h.counters);
        let _ = writeln!(t, "  {:<10} {:>10} {:>12}", "", "open files", "RSS");
        for (name, f) in [
            ("baseline", h.baseline),
            ("peak", h.peak),
            ("after", h.after),
        ] {
            let _ = writeln!(
                t,
                "  {:<10} {:>10} {:>12}",
                name,
                f.open_files,
                mib(f.rss_kib)
            );
        }
        let back = |secs: Option<f64>| match secs {
            Some(s) => format!("yes, {s:.0} s after the clients closed"),
            None => "NO, not within the settle time".into(),
        };
        let _ = writeln!(
            t,
            "  back to baseline (+{} files, +{}): open files {}; RSS {}",
            h.tolerance.open_files,
            mib(h.tolerance.rss_kib),
            back(h.files_back_secs),
            back(h.rss_back_secs)
        );
        for (i, a) in r.hold_again.iter().enumerate() {
            let _ = writeln!(
                t,
                "  hold {} on the same sidecar ({} connections, {:.0} s): {} answered, {} errors, peak {} files, {}, after {}",
                i + 2,
                a.connections,
                a.held_secs,
                a.answered,
                a.unexpected_errors,
                a.peak.open_files,
                mib(a.peak.rss_kib),
                mib(a.after.rss_kib)
            );
        }
        t.push('\n');
    }
    if let Some(k) = &r.kill {
        let _ = writeln!(
            t,
            "kill: {} SIGKILLs under load ({} keep-alive clients, {:.0} s each), restarted on the same journal",
            k.rounds.len(),
            k.workers,
            k.load_secs
        );
        let _ = writeln!(
            t,
            "  requests answered {}, records returned before a kill {}, lost {}, changed {}",
            k.answered, k.returned, k.lost, k.changed
        );
        let _ = writeln!(
            t,
            "  answered but no record: {} ({:.3} %), journal losses after: {:?}",
            k.answered_unrecorded,
            100.0 * k.answered_unrecorded as f64 / k.answered.max(1) as f64,
            k.journal_losses
        );
        for (i, round) in k.rounds.iter().enumerate() {
            let _ = writeln!(
                t,
                "  kill {}: answered {}, returned {}, lost {}, answered unrecorded {}, recorded unanswered {}, back in {} ms",
                i + 1,
                round.answered,
                round.returned,
                round.lost,
                round.answered_unrecorded,
                round.recorded_unanswered,
                round.restart_ms
            );
        }
        t.push('\n');
    }
    for s in [&r.ctrl_c, &r.daemon].into_iter().flatten() {
        let _ = writeln!(
            t,
            "{:?}: af up of fixtures/demo stopped at each of its {} steps, then af down: {} of {} clean (the whole up: {:.0} s, {} objects)",
            s.fault,
            s.steps.len(),
            s.passed,
            s.runs.len(),
            s.full_up_secs,
            s.full_up_made
        );
        let _ = writeln!(
            t,
            "  {:<4} {:<34} {:<11} {:>4} {:>7} {:>5} {:>5} {:>5}",
            "step", "at", "code", "exit", "stop s", "made", "down", "left"
        );
        for run in &s.runs {
            let mut at = run.at.clone();
            at.truncate(34);
            let _ = writeln!(
                t,
                "  {:<4} {:<34} {:<11} {:>4} {:>7.1} {:>5} {:>5} {:>5}",
                run.step,
                at,
                run.code.as_deref().unwrap_or("-"),
                run.exit.map_or("-".into(), |c| c.to_string()),
                run.stop_secs,
                run.made,
                run.down_exit.map_or("-".into(), |c| c.to_string()),
                run.left.len()
            );
        }
        t.push('\n');
    }
    if r.failed.is_empty() {
        t.push_str("every check held\n");
    } else {
        for f in &r.failed {
            let _ = writeln!(t, "FAILED {f}");
        }
    }
    t
}

/// Two panels: the sidecar's open files and its RSS over the hold.
fn draw(h: &Held, title: &str, path: &Path) -> Result<()> {
    let err = |e: &dyn std::fmt::Display| BenchError::Chart {
        path: path.to_path_buf(),
        reason: e.to_string(),
    };
    let root = SVGBackend::new(path, (1200, 700)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| err(&e))?;
    let root = root
        .titled(title, ("sans-serif", 20))
        .map_err(|e| err(&e))?;
    let panels = root.split_evenly((2, 1));
    let end = h.samples.last().map_or(1.0, |s| s.at_secs).max(1.0);
    type Series = (&'static str, fn(&super::hold::Sample) -> f64, f64);
    let series: [Series; 2] = [
        (
            "open files",
            |s| s.footprint.open_files as f64,
            h.baseline.open_files as f64,
        ),
        (
            "RSS (MiB)",
            |s| s.footprint.rss_kib as f64 / 1024.0,
            h.baseline.rss_kib as f64 / 1024.0,
        ),
    ];
    for ((label, value, baseline), area) in series.into_iter().zip(panels.iter()) {
        let top = h.samples.iter().map(value).fold(baseline, f64::max) * 1.1;
        let mut chart = ChartBuilder::on(area)
            .caption(format!("{label}; dashed: baseline"), ("sans-serif", 16))
            .margin(10)
            .x_label_area_size(30)
            .y_label_area_size(70)
            .build_cartesian_2d(0.0..end, 0.0..top.max(1.0))
            .map_err(|e| err(&e))?;
        chart
            .configure_mesh()
            .x_desc("seconds")
            .draw()
            .map_err(|e| err(&e))?;
        chart
            .draw_series(LineSeries::new(
                h.samples.iter().map(|s| (s.at_secs, value(s))),
                RGBColor(214, 39, 40).stroke_width(2),
            ))
            .map_err(|e| err(&e))?;
        chart
            .draw_series(DashedLineSeries::new(
                [(0.0, baseline), (end, baseline)],
                6,
                4,
                RGBColor(120, 144, 176).stroke_width(1),
            ))
            .map_err(|e| err(&e))?;
    }
    root.present().map_err(|e| err(&e))
}
