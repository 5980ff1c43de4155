//! The run: every scenario × every system × every round, interleaved.

use crate::decision::Case;
use crate::error::{BenchError, Result};
use crate::report::{self, Row, Status};
use crate::scenarios::{self, Ctx, Load, Measurement, Scenario};
use crate::stacks::{self, Stack};
use crate::systems::{Env, Support, System};
use crate::upstream::Upstream;

/// What takes part in a scenario: a system started on loopback, (in `af-up`) a stack of
/// containers, or (in `decision`) one case of the decision driver.
#[derive(Clone, Copy)]
enum Entrant<'a> {
    System(&'a dyn System),
    Stack(&'a Stack),
    Decision(&'a Case),
}

impl Entrant<'_> {
    fn name(&self) -> &str {
        match self {
            Entrant::System(s) => s.name(),
            Entrant::Stack(s) => s.name(),
            Entrant::Decision(c) => c.name(),
        }
    }

    fn support(&self, scenario: Scenario) -> Support {
        match (self, scenario) {
            (Entrant::Stack(_), Scenario::AfUp) | (Entrant::Decision(_), Scenario::Decision) => {
                Support::Yes
            }
            (Entrant::Stack(_) | Entrant::Decision(_), _)
            | (Entrant::System(_), Scenario::AfUp | Scenario::Decision) => Support::No,
            (Entrant::System(s), _) => s.support(scenario),
        }
    }

    fn missing(&self) -> Option<String> {
        match self {
            Entrant::System(s) => s.missing(),
            Entrant::Stack(s) => s.missing(),
            Entrant::Decision(_) => None,
        }
    }

    fn measure(&self, scenario: Scenario, round: u32, ctx: &Ctx<'_>) -> Result<Measurement> {
        match self {
            Entrant::System(s) => scenarios::measure(scenario, *s, round, ctx),
            Entrant::Stack(s) => stacks::measure(s, round, ctx.rt),
            Entrant::Decision(c) => c.measure(round, ctx.load),
        }
    }
}

/// What to run.
pub(crate) struct Plan {
    /// Rounds; each round visits every system once per scenario.
    pub rounds: u32,
    /// Load settings.
    pub load: Load,
    /// Scenarios, in table order.
    pub scenarios: Vec<Scenario>,
    /// The data-plane threads every system is given.
    pub threads: u32,
}

/// Runs the plan and returns the per-run measurements and the table rows; `stacks` are cleared
/// off the daemon at the end, whatever happened.
pub(crate) fn run(
    plan: &Plan,
    systems: &[Box<dyn System>],
    stacks: &[Stack],
    decisions: &[Case],
) -> Result<(Vec<Measurement>, Vec<Row>)> {
    let entrants: Vec<Entrant<'_>> = systems
        .iter()
        .map(|s| Entrant::System(s.as_ref()))
        .chain(stacks.iter().map(Entrant::Stack))
        .chain(decisions.iter().map(Entrant::Decision))
        .collect();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| BenchError::io("start tokio", e))?;
    let work = tempfile::Builder::new()
        .prefix("af-bench-work-")
        .tempdir()
        .map_err(|e| BenchError::io("create work dir", e))?;
    let upstream = Upstream::spawn(work.path())?;
    let env = Env::for_upstream(&upstream, plan.threads);
    let ctx = Ctx {
        rt: &rt,
        upstream: &upstream,
        load: &plan.load,
        work: work.path(),
        env: &env,
    };
    let mut runs: Vec<Measurement> = Vec::new();
    let mut failures: Vec<(String, Scenario, String)> = Vec::new();
    for round in 0..plan.rounds {
        for &scenario in &plan.scenarios {
            let takers: Vec<Entrant<'_>> = entrants
                .iter()
                .copied()
                .filter(|s| s.support(scenario) == Support::Yes && s.missing().is_none())
                .collect();
            // Rotate the order each round (A B C, B C A, …) so no system always
            // runs first, on a cold machine, or right after the same neighbour.
            let n = takers.len().max(1);
            for i in 0..takers.len() {
                let system = takers[(i + round as usize) % n];
                eprint!(
                    "round {}/{} {:<18} {:<10} ",
                    round + 1,
                    plan.rounds,
                    scenario.name(),
                    system.name()
                );
                match system.measure(scenario, round, &ctx) {
                    Ok(m) => {
                        eprintln!("{} {}", report::table::figure(m.value), m.unit.label());
                        runs.push(m);
                    }
                    Err(e) => {
                        eprintln!("FAILED: {e}");
                        failures.push((system.name().to_string(), scenario, e.to_string()));
                    }
                }
            }
        }
    }
    for stack in stacks {
        if let Err(e) = rt.block_on(stack.clear()) {
            eprintln!("clearing {}: {e}", stack.name());
            failures.push((stack.name().to_owned(), Scenario::AfUp, e.to_string()));
        }
    }
    let mut rows = Vec::new();
    for &scenario in &plan.scenarios {
        for system in &entrants {
            let name = system.name();
            let row = match system.support(scenario) {
                Support::No => continue,
                Support::Pending(reason) => Row::empty(name, scenario, Status::Pending(reason)),
                Support::Yes => match system.missing() {
                    Some(reason) => Row::empty(name, scenario, Status::Missing(reason)),
                    None => {
                        let mine: Vec<&Measurement> = runs
                            .iter()
                            .filter(|m| m.system == name && m.scenario == scenario)
                            .collect();
                        if mine.is_empty() {
                            let reason = failures
                                .iter()
                                .find(|(s, sc, _)| s == name && *sc == scenario)
                                .map(|(_, _, e)| e.clone())
                                .unwrap_or_else(|| "no run".into());
                            Row::empty(name, scenario, Status::Failed(reason))
                        } else {
                            Row::measured(name, scenario, &mine)
                        }
                    }
                },
            };
            rows.push(row);
        }
    }
    report::fill_ratios(&mut rows);
    Ok((runs, rows))
}
