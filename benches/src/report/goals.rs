//! Issue 38's goals, HAProxy the anchor, and the earlier goals that stay, each judged met or
//! not met from the ratios of one run, so a change is judged against all of them in one table.

use serde::Serialize;

use super::{REFERENCE, Row, STACK_REFERENCE, Status};
use crate::scenarios::Scenario;

/// The peer the goals are set against: the same forwarding with nothing decided or journaled.
const ANCHOR: &str = "haproxy";
/// The twin that counts its allocations.
const COUNTING: &str = "af-proxy (allocs)";
/// Compose bringing up the demo's services (`af-up`).
const COMPOSE: &str = "docker-compose";
/// The twin that answers intercepted requests from a pack.
const MOCK: &str = "af-proxy (mock)";

/// What one run says about one goal.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "kebab-case", tag = "verdict", content = "measured")]
pub(crate) enum Verdict {
    /// The goal holds; what was measured.
    Met(String),
    /// The goal does not hold; what was measured.
    NotMet(String),
    /// A figure is shown but cannot be judged here; the figure and why.
    Shown(String),
    /// This run has no figure for it; why.
    Unmeasured(String),
}

impl Verdict {
    /// The same verdict with `note` (when there is one) after what was measured.
    fn noting(self, note: Option<String>) -> Self {
        let Some(note) = note else {
            return self;
        };
        let add = |text: String| format!("{text}; {note}");
        match self {
            Verdict::Met(t) => Verdict::Met(add(t)),
            Verdict::NotMet(t) => Verdict::NotMet(add(t)),
            Verdict::Shown(t) => Verdict::Shown(add(t)),
            Verdict::Unmeasured(t) => Verdict::Unmeasured(add(t)),
        }
    }

    /// As printed in the verdict column.
    fn label(&self) -> &'static str {
        match self {
            Verdict::Met(_) => "met",
            Verdict::NotMet(_) => "NOT MET",
            Verdict::Shown(_) => "shown",
            Verdict::Unmeasured(_) => "not measured",
        }
    }

    /// What was measured, or why nothing was.
    fn detail(&self) -> &str {
        match self {
            Verdict::Met(s) | Verdict::NotMet(s) | Verdict::Shown(s) | Verdict::Unmeasured(s) => s,
        }
    }
}

/// One goal and its verdict.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct Judged {
    /// The goal, as the issue states it.
    pub goal: &'static str,
    /// What this run says about it.
    #[serde(flatten)]
    pub verdict: Verdict,
}

/// Every goal, judged from `rows` (one run's medians), every system given `threads[0]`
/// data-plane threads and af-proxy and HAProxy measured again with each other count.
pub(crate) fn judge(rows: &[Row], threads: &[u32]) -> Vec<Judged> {
    use Scenario::*;
    let run = Run { rows };
    let mut out = Vec::new();
    let mut goal = |goal: &'static str, verdict: Verdict| out.push(Judged { goal, verdict });
    // Issue 38: HAProxy, which forwards without deciding or journaling, is the anchor.
    goal(
        "http-keepalive: req/s >= 0.8x HAProxy's",
        run.rate_vs(HttpKeepAlive, REFERENCE, Some(ANCHOR), 0.8),
    );
    goal(
        "http-keepalive: CPU per request <= 1.5x HAProxy's",
        run.cpu_vs(HttpKeepAlive, ANCHOR, 1.5, "s/10k"),
    );
    goal(
        "http-keepalive: p99 <= HAProxy's",
        run.latency_vs(HttpKeepAlive, Some(ANCHOR), |r| r.p99_us),
    );
    goal(
        "http-newconn: req/s >= 0.8x HAProxy's",
        run.rate_vs(HttpNewConn, REFERENCE, Some(ANCHOR), 0.8),
    );
    goal(
        "connect-bulk: MB/s >= 0.9x direct",
        run.rate_vs(ConnectBulk, REFERENCE, Some("direct"), 0.9),
    );
    goal(
        "connect-bulk: MB/s >= 1x HAProxy's TCP relay",
        run.rate_vs(ConnectBulk, REFERENCE, Some(ANCHOR), 1.0),
    );
    goal(
        "dns: qps >= 1.0x unbound",
        run.rate_vs(Dns, REFERENCE, Some("unbound"), 1.0),
    );
    goal("dns: no more loss than unbound", run.loss_vs_unbound());
    goal(
        "dns: CPU per query <= unbound's",
        run.cpu_vs(Dns, "unbound", 1.0, "s/10k"),
    );
    goal(
        "intercepted-https: req/s >= 0.8x HAProxy re-encrypting",
        run.rate_vs(InterceptedHttps, REFERENCE, Some(ANCHOR), 0.8),
    );
    goal(
        "intercepted-https: mock answers >= 0.8x direct TLS",
        run.rate_vs(InterceptedHttps, MOCK, Some("direct"), 0.8),
    );
    goal(
        "scaling: af-proxy's req/s per thread holds as HAProxy's does with more threads",
        run.scaling(HttpKeepAlive, threads),
    );
    goal(
        "one decision: <= 42 ns and 0 allocations",
        run.decision(42.0),
    );
    goal(
        "a proxied request: allocations published, <= 4 beyond hyper's own",
        match run
            .row(HttpKeepAlive, COUNTING)
            .and_then(|r| r.allocs_per_op)
        {
            Some(a) => Verdict::Shown(format!(
                "{a:.1} allocations per request (hyper's own apart: benches/profile.sh allocations)"
            )),
            None => Verdict::Unmeasured(format!("no {COUNTING} row")),
        },
    );
    goal(
        "idle client connection: <= 10 KiB",
        run.at_most(IdleMemory, REFERENCE, |r| r.value, 10.0, "KiB")
            .noting(
                run.row(IdleMemory, COUNTING)
                    .and_then(|r| r.heap_kib_per_op)
                    .map(|heap| format!("heap held {heap:.1} KiB ({COUNTING})")),
            ),
    );
    goal(
        "af up of the demo, images cached: <= 1.5x docker compose up --wait",
        run.at_most_times(AfUp, STACK_REFERENCE, COMPOSE, 1.5),
    );
    out
}

/// One run's measured rows.
struct Run<'a> {
    rows: &'a [Row],
}

impl Run<'_> {
    /// The measured row of `system` in `scenario`.
    fn row(&self, scenario: Scenario, system: &str) -> Option<&Row> {
        self.rows
            .iter()
            .find(|r| r.scenario == scenario && r.system == system && r.status == Status::Measured)
    }

    /// af-proxy's CPU per unit of work is at most `factor` times `other`'s.
    fn cpu_vs(&self, scenario: Scenario, other: &str, factor: f64, unit: &str) -> Verdict {
        match self.row(scenario, other).and_then(|r| r.cpu_per_unit) {
            Some(theirs) => self
                .at_most(
                    scenario,
                    REFERENCE,
                    |r| r.cpu_per_unit,
                    theirs * factor,
                    unit,
                )
                .noting(Some(format!("{other} {theirs:.2} {unit}"))),
            None => Verdict::Unmeasured(format!("{other} has no CPU figure")),
        }
    }

    /// `system`'s rate is at least `factor` times `other`'s.
    fn rate_vs(
        &self,
        scenario: Scenario,
        system: &str,
        other: Option<&str>,
        factor: f64,
    ) -> Verdict {
        let Some(other) = other else {
            return Verdict::Unmeasured("no peer was measured".into());
        };
        match (self.value(scenario, system), self.value(scenario, other)) {
            (Some(mine), Some(theirs)) if theirs > 0.0 => {
                let ratio = mine / theirs;
                let text = format!("{ratio:.2}x {other}");
                if ratio >= factor {
                    Verdict::Met(text)
                } else {
                    Verdict::NotMet(text)
                }
            }
            (None, _) => Verdict::Unmeasured(format!("no {system} figure")),
            _ => Verdict::Unmeasured(format!("no {other} figure")),
        }
    }

    /// `system`'s figure is at most `factor` times `other`'s (for a figure where lower is
    /// better, such as seconds).
    fn at_most_times(&self, scenario: Scenario, system: &str, other: &str, factor: f64) -> Verdict {
        match (self.value(scenario, system), self.value(scenario, other)) {
            (Some(mine), Some(theirs)) if theirs > 0.0 => {
                let ratio = mine / theirs;
                let text = format!("{ratio:.2}x {other} ({mine:.2} s vs {theirs:.2} s)");
                if ratio <= factor {
                    Verdict::Met(text)
                } else {
                    Verdict::NotMet(text)
                }
            }
            (None, _) => Verdict::Unmeasured(format!("no {system} figure")),
            _ => Verdict::Unmeasured(format!("no {other} figure")),
        }
    }

    /// af-proxy's latency (`field`, µs) is at most `peer`'s.
    fn latency_vs(
        &self,
        scenario: Scenario,
        peer: Option<&str>,
        field: fn(&Row) -> Option<f64>,
    ) -> Verdict {
        let Some(peer) = peer else {
            return Verdict::Unmeasured("no peer was measured".into());
        };
        let mine = self.row(scenario, REFERENCE).and_then(field);
        let theirs = self.row(scenario, peer).and_then(field);
        match mine.zip(theirs) {
            Some((mine, theirs)) => {
                let text = format!("{:.2} ms vs {peer} {:.2} ms", mine / 1e3, theirs / 1e3);
                if mine <= theirs {
                    Verdict::Met(text)
                } else {
                    Verdict::NotMet(text)
                }
            }
            None => Verdict::Unmeasured(format!("no latency figure for af-proxy or {peer}")),
        }
    }

    /// `system`'s `field` is at most `limit` (in `unit`).
    fn at_most(
        &self,
        scenario: Scenario,
        system: &str,
        field: fn(&Row) -> Option<f64>,
        limit: f64,
        unit: &str,
    ) -> Verdict {
        match self.row(scenario, system).and_then(field) {
            Some(v) => {
                let text = format!("{v:.2} {unit} (limit {limit:.2})");
                if v <= limit {
                    Verdict::Met(text)
                } else {
                    Verdict::NotMet(text)
                }
            }
            None => Verdict::Unmeasured(format!("no {system} figure")),
        }
    }

    /// Every measured `decision` row: the slowest at most `limit_ns`, none allocating; the
    /// instruction counts' range beside them.
    fn decision(&self, limit_ns: f64) -> Verdict {
        let rows: Vec<(&Row, f64)> = self
            .rows
            .iter()
            .filter(|r| r.scenario == Scenario::Decision && r.status == Status::Measured)
            .filter_map(|r| Some((r, r.value?)))
            .collect();
        let Some((slowest, ns)) = rows.iter().copied().max_by(|a, b| a.1.total_cmp(&b.1)) else {
            return Verdict::Unmeasured("no decision row".into());
        };
        let allocating: Vec<&str> = rows
            .iter()
            .filter(|(r, _)| r.allocs_per_op.is_none_or(|a| a > 0.0))
            .map(|(r, _)| r.system.as_str())
            .collect();
        let allocations = if allocating.is_empty() {
            "0 allocations".to_owned()
        } else {
            format!("allocating or uncounted: {}", allocating.join(", "))
        };
        let counts: Vec<f64> = rows
            .iter()
            .filter_map(|(r, _)| r.instructions_per_op)
            .collect();
        let instructions = match (
            counts.iter().copied().reduce(f64::min),
            counts.iter().copied().reduce(f64::max),
        ) {
            (Some(low), Some(high)) if counts.len() == rows.len() => {
                format!("{low:.0} to {high:.0} Ir")
            }
            _ => "instructions not counted for every case (valgrind)".to_owned(),
        };
        let text = format!(
            "slowest {} {ns:.1} ns (limit {limit_ns:.0}); {allocations}; {instructions}",
            slowest.system
        );
        if ns <= limit_ns && allocating.is_empty() {
            Verdict::Met(text)
        } else {
            Verdict::NotMet(text)
        }
    }

    /// req/s per thread in `scenario` of af-proxy and HAProxy at each of `threads` (the first
    /// is the usual rows'); met when, from the first count to each other, af-proxy keeps at
    /// least 0.9 of the share of its per-thread rate that HAProxy keeps on this machine.
    fn scaling(&self, scenario: Scenario, threads: &[u32]) -> Verdict {
        let Some((&base, more)) = threads.split_first() else {
            return Verdict::Unmeasured("no thread counts".into());
        };
        if more.is_empty() {
            return Verdict::Unmeasured("one thread count measured (--threads 1,2)".into());
        }
        let per_thread = |system: &str, n: u32| {
            let name = if n == base {
                system.to_owned()
            } else {
                crate::systems::threaded_name(system, n)
            };
            self.value(scenario, &name).map(|v| v / f64::from(n))
        };
        let mut shown = Vec::new();
        let mut met = true;
        for &n in more {
            let kept = |system| Some(per_thread(system, n)? / per_thread(system, base)?);
            match (kept(REFERENCE), kept(ANCHOR)) {
                (Some(mine), Some(theirs)) => {
                    met &= mine >= 0.9 * theirs;
                    shown.push(format!(
                        "{n} threads: af-proxy {:.0} req/s per thread ({mine:.2} of {base}'s), \
                         HAProxy {:.0} ({theirs:.2})",
                        per_thread(REFERENCE, n).unwrap_or_default(),
                        per_thread(ANCHOR, n).unwrap_or_default(),
                    ));
                }
                _ => {
                    return Verdict::Unmeasured(format!(
                        "no af-proxy or HAProxy row at {n} threads"
                    ));
                }
            }
        }
        let text = format!(
            "{base} thread{}: af-proxy {:.0}, HAProxy {:.0} req/s per thread; {}",
            if base == 1 { "" } else { "s" },
            per_thread(REFERENCE, base).unwrap_or_default(),
            per_thread(ANCHOR, base).unwrap_or_default(),
            shown.join("; ")
        );
        if met {
            Verdict::Met(text)
        } else {
            Verdict::NotMet(text)
        }
    }

    /// af-proxy's DNS errors (lost or failed queries) are no more than unbound's.
    fn loss_vs_unbound(&self) -> Verdict {
        match (
            self.row(Scenario::Dns, REFERENCE),
            self.row(Scenario::Dns, "unbound"),
        ) {
            (Some(mine), Some(theirs)) => {
                let text = format!("{} lost vs unbound {}", mine.errors, theirs.errors);
                if mine.errors <= theirs.errors {
                    Verdict::Met(text)
                } else {
                    Verdict::NotMet(text)
                }
            }
            _ => Verdict::Unmeasured("no af-proxy or unbound DNS figure".into()),
        }
    }

    fn value(&self, scenario: Scenario, system: &str) -> Option<f64> {
        self.row(scenario, system)?.value
    }
}

/// The goals as an aligned text block: goal, what was measured, verdict.
pub(crate) fn render(judged: &[Judged]) -> String {
    let width = |f: &dyn Fn(&Judged) -> usize| judged.iter().map(f).max().unwrap_or(0);
    let goal_w = width(&|j| j.goal.chars().count()).max(4);
    let detail_w = width(&|j| j.verdict.detail().chars().count()).max(8);
    let mut out = format!("{:<goal_w$}  {:<detail_w$}  verdict\n", "goal", "measured");
    for j in judged {
        let line = format!(
            "{:<goal_w$}  {:<detail_w$}  {}",
            j.goal,
            j.verdict.detail(),
            j.verdict.label()
        );
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(system: &str, scenario: Scenario, value: f64) -> Row {
        Row {
            value: Some(value),
            ..Row::empty(system, scenario, Status::Measured)
        }
    }

    fn verdict<'a>(judged: &'a [Judged], goal: &str) -> &'a Verdict {
        &judged
            .iter()
            .find(|j| j.goal == goal)
            .unwrap_or_else(|| panic!("no goal {goal:?}"))
            .verdict
    }

    #[test]
    fn rate_cpu_and_latency_goals_are_judged_against_haproxy_and_direct_from_one_runs_rows() {
        let mut af = row("af-proxy", Scenario::HttpKeepAlive, 40_000.0);
        af.p99_us = Some(2_000.0);
        af.cpu_per_unit = Some(0.30);
        let mut haproxy = row("haproxy", Scenario::HttpKeepAlive, 46_000.0);
        haproxy.p99_us = Some(1_400.0);
        haproxy.cpu_per_unit = Some(0.18);
        let rows = vec![
            row("direct", Scenario::HttpKeepAlive, 100_000.0),
            af,
            haproxy,
            row("af-proxy", Scenario::HttpNewConn, 1_000.0),
            row("haproxy", Scenario::HttpNewConn, 1_300.0),
            row("af-proxy", Scenario::ConnectBulk, 1_300.0),
            row("haproxy", Scenario::ConnectBulk, 780.0),
            row("direct", Scenario::ConnectBulk, 1_400.0),
        ];
        let judged = judge(&rows, &[1]);
        assert_eq!(
            verdict(&judged, "http-keepalive: req/s >= 0.8x HAProxy's"),
            &Verdict::Met("0.87x haproxy".into())
        );
        assert_eq!(
            verdict(&judged, "http-keepalive: CPU per request <= 1.5x HAProxy's"),
            &Verdict::NotMet("0.30 s/10k (limit 0.27); haproxy 0.18 s/10k".into())
        );
        assert_eq!(
            verdict(&judged, "http-keepalive: p99 <= HAProxy's"),
            &Verdict::NotMet("2.00 ms vs haproxy 1.40 ms".into())
        );
        assert_eq!(
            verdict(&judged, "http-newconn: req/s >= 0.8x HAProxy's"),
            &Verdict::NotMet("0.77x haproxy".into())
        );
        assert_eq!(
            verdict(&judged, "connect-bulk: MB/s >= 0.9x direct"),
            &Verdict::Met("0.93x direct".into())
        );
        assert_eq!(
            verdict(&judged, "connect-bulk: MB/s >= 1x HAProxy's TCP relay"),
            &Verdict::Met("1.67x haproxy".into())
        );
        assert!(matches!(
            verdict(
                &judged,
                "intercepted-https: req/s >= 0.8x HAProxy re-encrypting"
            ),
            Verdict::Unmeasured(_)
        ));
    }

    #[test]
    fn scaling_is_judged_by_the_share_of_its_per_thread_rate_each_keeps() {
        let goal = "scaling: af-proxy's req/s per thread holds as HAProxy's does with more threads";
        let keepalive = |system: &str, value| row(system, Scenario::HttpKeepAlive, value);
        let rows = |af_two| {
            vec![
                keepalive("af-proxy", 30_000.0),
                keepalive("haproxy", 40_000.0),
                keepalive("af-proxy (2 threads)", af_two),
                keepalive("haproxy (2 threads)", 48_000.0),
            ]
        };
        // HAProxy keeps 0.60 of its per-thread rate at 2 threads; af-proxy 0.55 is within 0.9.
        assert_eq!(
            verdict(&judge(&rows(33_000.0), &[1, 2]), goal),
            &Verdict::Met(
                "1 thread: af-proxy 30000, HAProxy 40000 req/s per thread; 2 threads: af-proxy \
                 16500 req/s per thread (0.55 of 1's), HAProxy 24000 (0.60)"
                    .into()
            )
        );
        // 0.40 is not.
        assert!(matches!(
            verdict(&judge(&rows(24_000.0), &[1, 2]), goal),
            Verdict::NotMet(_)
        ));
        assert!(matches!(
            verdict(&judge(&rows(33_000.0), &[1]), goal),
            Verdict::Unmeasured(_)
        ));
        assert!(matches!(
            verdict(&judge(&rows(33_000.0)[..2], &[1, 2]), goal),
            Verdict::Unmeasured(_)
        ));
    }

    #[test]
    fn af_up_is_judged_by_its_seconds_over_composes() {
        let seconds = |system: &str, value: f64| Row {
            unit: crate::scenarios::Unit::Seconds,
            ..row(system, Scenario::AfUp, value)
        };
        let goal = "af up of the demo, images cached: <= 1.5x docker compose up --wait";
        let met = judge(&[seconds("af", 3.0), seconds("docker-compose", 2.0)], &[1]);
        assert_eq!(
            verdict(&met, goal),
            &Verdict::Met("1.50x docker-compose (3.00 s vs 2.00 s)".into()),
            "the limit is inclusive"
        );
        let not_met = judge(&[seconds("af", 4.0), seconds("docker-compose", 2.0)], &[1]);
        assert!(matches!(verdict(&not_met, goal), Verdict::NotMet(_)));
        let alone = judge(&[seconds("af", 4.0)], &[1]);
        assert!(matches!(verdict(&alone, goal), Verdict::Unmeasured(_)));
    }

    #[test]
    fn a_row_that_failed_is_not_measured_and_limits_are_judged_inclusively() {
        let mut idle = row("af-proxy", Scenario::IdleMemory, 10.0);
        idle.unit = crate::scenarios::Unit::KibPerConn;
        let rows = vec![
            idle,
            Row::empty(
                "af-proxy",
                Scenario::ConnectBulk,
                Status::Failed("x".into()),
            ),
            row("direct", Scenario::ConnectBulk, 100.0),
        ];
        let judged = judge(&rows, &[1]);
        assert_eq!(
            verdict(&judged, "idle client connection: <= 10 KiB"),
            &Verdict::Met("10.00 KiB (limit 10.00)".into())
        );
        assert!(matches!(
            verdict(&judged, "connect-bulk: MB/s >= 0.9x direct"),
            Verdict::Unmeasured(_)
        ));
        let text = render(&judged);
        assert!(text.lines().next().is_some_and(|l| l.starts_with("goal")));
        assert!(text.contains("idle client connection: <= 10 KiB") && text.contains("  met"));
    }

    #[test]
    fn one_decision_is_judged_by_the_slowest_case_and_any_allocation() {
        let goal = "one decision: <= 42 ns and 0 allocations";
        let case = |name: &str, ns: f64, allocs: f64| Row {
            unit: crate::scenarios::Unit::Nanoseconds,
            allocs_per_op: Some(allocs),
            instructions_per_op: Some(ns * 10.0),
            ..row(name, Scenario::Decision, ns)
        };
        assert_eq!(
            verdict(
                &judge(
                    &[case("exact 10", 20.0, 0.0), case("miss 10", 42.0, 0.0)],
                    &[1]
                ),
                goal
            ),
            &Verdict::Met(
                "slowest miss 10 42.0 ns (limit 42); 0 allocations; 200 to 420 Ir".into()
            ),
            "the limit is inclusive"
        );
        assert_eq!(
            verdict(
                &judge(
                    &[case("exact 10", 20.0, 0.0), case("wildcard 10", 42.7, 0.0)],
                    &[1]
                ),
                goal
            ),
            &Verdict::NotMet(
                "slowest wildcard 10 42.7 ns (limit 42); 0 allocations; 200 to 427 Ir".into()
            )
        );
        let mut uncounted = case("miss 10", 12.0, 0.0);
        uncounted.instructions_per_op = None;
        assert_eq!(
            verdict(
                &judge(&[case("exact 10", 20.0, 0.5), uncounted], &[1]),
                goal
            ),
            &Verdict::NotMet(
                "slowest exact 10 20.0 ns (limit 42); allocating or uncounted: exact 10; \
                 instructions not counted for every case (valgrind)"
                    .into()
            ),
            "fast but allocating is not met"
        );
        assert!(matches!(
            verdict(&judge(&[], &[1]), goal),
            Verdict::Unmeasured(_)
        ));
    }

    #[test]
    fn the_idle_goal_names_the_heap_the_counting_build_saw_held() {
        let mut rows = Vec::new();
        for (system, rss) in [("af-proxy", 25.0), (COUNTING, 25.5)] {
            let mut idle = row(system, Scenario::IdleMemory, rss);
            idle.unit = crate::scenarios::Unit::KibPerConn;
            rows.push(idle);
        }
        rows[1].heap_kib_per_op = Some(40.8);
        assert_eq!(
            verdict(&judge(&rows, &[1]), "idle client connection: <= 10 KiB"),
            &Verdict::NotMet(format!(
                "25.00 KiB (limit 10.00); heap held 40.8 KiB ({COUNTING})"
            ))
        );
    }
}
