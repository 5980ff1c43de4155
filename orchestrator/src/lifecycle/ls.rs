//! `af ls`: every environment on this machine's Docker daemon and on the clusters the
//! manifest's targets name, each with where it runs, its project and repository, its state and
//! its age. A place that cannot be asked is said so after what the others hold.

use std::io::Write;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use af_policy::error::Report;
use serde::Serialize;

use super::output::{Format, print_json};
use super::table::{self, Column};
use crate::runtime::{EnvSummary, RuntimeError};

/// Where environments were looked for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Place {
    /// `local` or `kubernetes`.
    pub runtime: &'static str,
    /// The kubeconfig context of a cluster (`None`: the current one, or the local daemon).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub context: Option<String>,
    /// Whether the manifest places environments here: only such a place that cannot be asked
    /// is a refusal (this machine's Docker daemon is always asked).
    #[serde(skip)]
    pub required: bool,
}

impl Place {
    /// The place as one word for a person: `local`, `kubernetes:CONTEXT`.
    fn label(&self) -> String {
        match &self.context {
            Some(context) => format!("{}:{context}", self.runtime),
            None => self.runtime.to_owned(),
        }
    }
}

/// What one place answered.
pub struct Asked {
    /// The place.
    pub place: Place,
    /// Its environments, or why it could not be asked.
    pub found: Result<Vec<EnvSummary>, RuntimeError>,
}

/// An environment's state, in one word.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum State {
    /// The sidecar and every service run.
    Running,
    /// The sidecar runs, a service does not.
    Degraded,
    /// A service runs without its sidecar (no way out at all until it is back).
    SidecarDown,
    /// Nothing runs (what is left: stopped containers, networks).
    Stopped,
    /// Being removed.
    Removing,
}

impl State {
    /// The state of `env`.
    pub fn of(env: &EnvSummary) -> State {
        let running = env.services.iter().filter(|(_, up)| *up).count();
        if env.removing {
            State::Removing
        } else if env.sidecar_running && running == env.services.len() {
            State::Running
        } else if env.sidecar_running {
            State::Degraded
        } else if running > 0 {
            State::SidecarDown
        } else {
            State::Stopped
        }
    }

    fn word(self) -> &'static str {
        match self {
            State::Running => "running",
            State::Degraded => "degraded",
            State::SidecarDown => "sidecar down",
            State::Stopped => "stopped",
            State::Removing => "removing",
        }
    }
}

#[derive(Serialize)]
struct Row<'a> {
    env: &'a str,
    #[serde(flatten)]
    place: &'a Place,
    state: State,
    services: Vec<ServiceRow<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    project: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    repository: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    created: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    age_seconds: Option<u64>,
}

#[derive(Serialize)]
struct ServiceRow<'a> {
    name: &'a str,
    running: bool,
}

#[derive(Serialize)]
struct Unreached<'a> {
    #[serde(flatten)]
    place: &'a Place,
    code: &'static str,
    error: String,
}

#[derive(Serialize)]
struct Doc<'a> {
    environments: Vec<Row<'a>>,
    unreachable: Vec<Unreached<'a>>,
}

/// Print what every place holds at `now`, and which could not be asked; the first place the
/// manifest places environments in that could not be asked is the refusal, after the rest.
pub fn run(
    asked: &[Asked],
    now: SystemTime,
    format: Format,
    out: &mut dyn Write,
) -> Result<(), Report> {
    let mut rows = Vec::new();
    let mut unreached = Vec::new();
    for Asked { place, found } in asked {
        match found {
            Ok(envs) => rows.extend(envs.iter().map(|env| row(place, env, now))),
            Err(e) => unreached.push((place, e.report())),
        }
    }
    match format {
        Format::Json => print_json(
            out,
            &Doc {
                environments: rows,
                unreachable: unreached
                    .iter()
                    .map(|(place, report)| Unreached {
                        place,
                        code: report.code.code,
                        error: report.statement.clone(),
                    })
                    .collect(),
            },
        ),
        Format::Human => {
            if rows.is_empty() {
                let places: Vec<String> = asked
                    .iter()
                    .filter(|a| a.found.is_ok())
                    .map(|a| a.place.label())
                    .collect();
                if !places.is_empty() {
                    let _ = writeln!(out, "no environments ({})", places.join(", "));
                }
            } else {
                let _ = out.write_all(table::render(&COLUMNS, &human(&rows)).as_bytes());
            }
        }
    }
    match unreached.into_iter().find(|(place, _)| place.required) {
        Some((_, report)) => Err(report),
        None => Ok(()),
    }
}

const COLUMNS: [Column; 7] = [
    Column::left("ENV", 30),
    Column::left("RUNTIME", 28),
    Column::left("STATE", 12),
    Column::right("SERVICES", 8),
    Column::right("AGE", 5),
    Column::left("PROJECT", 20),
    Column::left("REPOSITORY", 60),
];

fn human(rows: &[Row<'_>]) -> Vec<Vec<String>> {
    rows.iter()
        .map(|r| {
            let running = r.services.iter().filter(|s| s.running).count();
            vec![
                r.env.to_owned(),
                r.place.label(),
                r.state.word().to_owned(),
                format!("{running}/{}", r.services.len()),
                r.age_seconds.map_or_else(|| "-".to_owned(), age),
                r.project.unwrap_or("-").to_owned(),
                r.repository.unwrap_or("-").to_owned(),
            ]
        })
        .collect()
}

fn row<'a>(place: &'a Place, env: &'a EnvSummary, now: SystemTime) -> Row<'a> {
    let created = env
        .created
        .and_then(|secs| u64::try_from(secs).ok())
        .map(|secs| UNIX_EPOCH + Duration::from_secs(secs));
    Row {
        env: env.env.as_str(),
        place,
        state: State::of(env),
        services: env
            .services
            .iter()
            .map(|(name, running)| ServiceRow {
                name,
                running: *running,
            })
            .collect(),
        project: env.project.as_deref(),
        repository: env.repository.as_deref(),
        created: created.map(|t| humantime::format_rfc3339_seconds(t).to_string()),
        age_seconds: created.map(|t| now.duration_since(t).unwrap_or_default().as_secs()),
    }
}

/// An age as `docker ps` and `kubectl get` show one: its largest unit (`45s`, `12m`, `3h`,
/// `5d`).
pub fn age(seconds: u64) -> String {
    match seconds {
        s if s < 60 => format!("{s}s"),
        s if s < 3600 => format!("{}m", s / 60),
        s if s < 86_400 => format!("{}h", s / 3600),
        s => format!("{}d", s / 86_400),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::env_id::EnvId;

    fn env(id: &str, sidecar: bool, services: &[(&str, bool)]) -> EnvSummary {
        EnvSummary {
            sidecar_running: sidecar,
            services: services
                .iter()
                .map(|(n, r)| ((*n).to_owned(), *r))
                .collect(),
            created: Some(1_000),
            project: Some("shop".to_owned()),
            repository: Some("/src/shop".to_owned()),
            ..EnvSummary::empty(EnvId::parse(id).expect("id"))
        }
    }

    #[test]
    fn the_state_says_whether_the_sidecar_and_every_service_run() {
        assert_eq!(State::of(&env("a", true, &[("web", true)])), State::Running);
        assert_eq!(State::of(&env("a", true, &[])), State::Running);
        assert_eq!(
            State::of(&env("a", true, &[("web", true), ("db", false)])),
            State::Degraded
        );
        assert_eq!(
            State::of(&env("a", false, &[("web", true)])),
            State::SidecarDown
        );
        assert_eq!(
            State::of(&env("a", false, &[("web", false)])),
            State::Stopped
        );
        let removing = EnvSummary {
            removing: true,
            ..env("a", true, &[("web", true)])
        };
        assert_eq!(State::of(&removing), State::Removing);
    }

    #[test]
    fn ages_are_shown_in_their_largest_unit() {
        assert_eq!(
            [0, 59, 60, 3599, 3600, 86_399, 86_400, 864_000].map(age),
            ["0s", "59s", "1m", "59m", "1h", "23h", "1d", "10d"]
        );
    }

    #[test]
    fn every_place_is_listed_and_one_that_did_not_answer_is_the_refusal_after_them() {
        let local = Place {
            runtime: "local",
            context: None,
            required: true,
        };
        let cluster = Place {
            runtime: "kubernetes",
            context: Some("staging".to_owned()),
            required: true,
        };
        let asked = [
            Asked {
                place: local.clone(),
                found: Ok(vec![env(
                    "shop-main-abc123",
                    true,
                    &[("web", true), ("db", false)],
                )]),
            },
            Asked {
                place: cluster.clone(),
                found: Err(RuntimeError::ClusterUnreachable {
                    context: "staging".to_owned(),
                    message: "connection refused".to_owned(),
                }),
            },
        ];
        let now = UNIX_EPOCH + Duration::from_secs(1_000 + 7_200);
        let mut out = Vec::new();
        let refused = run(&asked, now, Format::Human, &mut out).expect_err("staging refused");
        assert_eq!(refused.code.code, "AF-RUN-002", "{refused:?}");
        let text = String::from_utf8(out).expect("utf-8");
        let lines: Vec<Vec<&str>> = text
            .lines()
            .map(|l| {
                l.split("  ")
                    .map(str::trim)
                    .filter(|c| !c.is_empty())
                    .collect()
            })
            .collect();
        assert_eq!(
            lines,
            [
                vec![
                    "ENV",
                    "RUNTIME",
                    "STATE",
                    "SERVICES",
                    "AGE",
                    "PROJECT",
                    "REPOSITORY"
                ],
                vec![
                    "shop-main-abc123",
                    "local",
                    "degraded",
                    "1/2",
                    "2h",
                    "shop",
                    "/src/shop"
                ],
            ]
        );

        let mut out = Vec::new();
        let _ = run(&asked, now, Format::Json, &mut out);
        let doc: serde_json::Value = serde_json::from_slice(&out).expect("json");
        assert_eq!(
            doc,
            serde_json::json!({
                "environments": [{
                    "env": "shop-main-abc123", "runtime": "local", "state": "degraded",
                    "services": [{"name": "web", "running": true}, {"name": "db", "running": false}],
                    "project": "shop", "repository": "/src/shop",
                    "created": "1970-01-01T00:16:40Z", "age_seconds": 7200,
                }],
                "unreachable": [{
                    "runtime": "kubernetes", "context": "staging", "code": "AF-RUN-002",
                    "error": "The cluster of kubeconfig context staging could not be reached: connection refused.",
                }],
            })
        );

        // A Docker daemon the manifest does not place anything on is asked, and only named.
        let asked = [Asked {
            place: Place {
                required: false,
                ..local
            },
            found: Err(RuntimeError::Unreachable("no socket".to_owned())),
        }];
        let mut out = Vec::new();
        run(&asked, now, Format::Json, &mut out).expect("not a refusal");
        let doc: serde_json::Value = serde_json::from_slice(&out).expect("json");
        assert_eq!(doc["unreachable"][0]["code"], "AF-RUN-001", "{doc}");
    }
}
