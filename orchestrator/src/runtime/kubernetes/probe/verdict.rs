//! What one route's container said, judged: the route held, got out, or could not be
//! answered. Only a completed connection or an answered question counts as getting out; a
//! probe that did not run, ran but said nothing readable, or did not finish, answers nothing,
//! and an unanswered question about containment is not a pass.

use k8s_openapi::api::core::v1::ContainerStatus;
use serde_json::Value;

use super::targets::{Attempt, Route};

/// One route's result.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// The attempt failed (with what the probe saw).
    Held(String),
    /// The attempt succeeded: the route is open.
    GotOut,
    /// The pod was never governed (the witness's closed port answered, or its open one did
    /// not), so nothing was aimed outside; what the last round found.
    NotGoverned(String),
    /// Nothing can be concluded, and why.
    Unanswered(String),
}

/// Judge `route` from its container's status and log (the probe prints one JSON line).
pub fn judge(route: &Route, status: Option<&ContainerStatus>, log: Option<&str>) -> Outcome {
    let state = status.and_then(|s| s.state.as_ref());
    let Some(terminated) = state.and_then(|s| s.terminated.as_ref()) else {
        let why = match state.and_then(|s| s.waiting.as_ref()) {
            Some(waiting) => format!(
                "its container did not start ({}{})",
                waiting.reason.as_deref().unwrap_or("waiting"),
                waiting
                    .message
                    .as_deref()
                    .map(|m| format!(": {m}"))
                    .unwrap_or_default()
            ),
            None if state.is_some_and(|s| s.running.is_some()) => {
                "its container was still running".to_owned()
            }
            None => "its container never reported".to_owned(),
        };
        return Outcome::Unanswered(why);
    };
    if terminated.exit_code != 0 {
        return Outcome::Unanswered(format!(
            "its container exited with status {}",
            terminated.exit_code
        ));
    }
    let line = log.and_then(|l| l.lines().rev().find(|l| !l.trim().is_empty()));
    let Some(doc) = line.and_then(|l| serde_json::from_str::<Value>(l).ok()) else {
        return Outcome::Unanswered(format!(
            "its container printed no answer ({:?})",
            line.unwrap_or("")
        ));
    };
    if doc["governed"].as_str() == Some("false") {
        return Outcome::NotGoverned(doc["route"].as_str().unwrap_or("").to_owned());
    }
    let field = match route.attempt {
        Attempt::Tcp(_) => "connected",
        Attempt::Dns { .. } => "answered",
    };
    match doc[field].as_str() {
        Some("true") => Outcome::GotOut,
        Some("false") => Outcome::Held(doc["error"].as_str().unwrap_or("failed").to_owned()),
        _ => Outcome::Unanswered(format!("its container printed {doc}")),
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::{
        ContainerState, ContainerStateRunning, ContainerStateTerminated, ContainerStateWaiting,
    };

    use super::*;

    fn route(dns: bool) -> Route {
        let addr = "198.51.100.10:53".parse().expect("addr");
        Route {
            id: if dns { "dns" } else { "tcp" },
            what: "a route",
            attempt: if dns {
                Attempt::Dns {
                    server: addr,
                    name: "probe.test".to_owned(),
                }
            } else {
                Attempt::Tcp(addr)
            },
        }
    }

    fn status(state: ContainerState) -> ContainerStatus {
        ContainerStatus {
            name: "tcp".to_owned(),
            state: Some(state),
            ..ContainerStatus::default()
        }
    }

    fn exited(code: i32) -> ContainerStatus {
        status(ContainerState {
            terminated: Some(ContainerStateTerminated {
                exit_code: code,
                ..ContainerStateTerminated::default()
            }),
            ..ContainerState::default()
        })
    }

    #[test]
    fn a_completed_connection_or_an_answer_got_out_and_a_failure_held() {
        let done = exited(0);
        assert_eq!(
            judge(
                &route(false),
                Some(&done),
                Some("{\"connected\":\"true\"}\n")
            ),
            Outcome::GotOut
        );
        assert_eq!(
            judge(
                &route(false),
                Some(&done),
                Some("{\"connected\":\"false\",\"error\":\"timed out\"}\n")
            ),
            Outcome::Held("timed out".to_owned())
        );
        assert_eq!(
            judge(
                &route(true),
                Some(&done),
                Some("{\"answered\":\"true\",\"addrs\":\"\"}")
            ),
            Outcome::GotOut
        );
        assert_eq!(
            judge(
                &route(true),
                Some(&done),
                Some("{\"answered\":\"false\",\"error\":\"no answer\"}")
            ),
            Outcome::Held("no answer".to_owned())
        );
    }

    #[test]
    fn a_pod_never_governed_aimed_nothing_outside_and_says_why() {
        let done = exited(0);
        assert_eq!(
            judge(
                &route(false),
                Some(&done),
                Some("{\"governed\":\"false\",\"route\":\"TCP to 10.244.0.7:9901 got out\"}")
            ),
            Outcome::NotGoverned("TCP to 10.244.0.7:9901 got out".to_owned())
        );
    }

    #[test]
    fn a_probe_that_could_not_say_is_unanswered_never_held() {
        let waiting = status(ContainerState {
            waiting: Some(ContainerStateWaiting {
                reason: Some("ErrImageNeverPull".to_owned()),
                message: Some("image af-probe:x is not present".to_owned()),
            }),
            ..ContainerState::default()
        });
        let running = status(ContainerState {
            running: Some(ContainerStateRunning::default()),
            ..ContainerState::default()
        });
        let cases = [
            (
                Some(&waiting),
                Some(""),
                "did not start (ErrImageNeverPull: image af-probe:x is not present)",
            ),
            (Some(&running), None, "still running"),
            (None, None, "never reported"),
        ];
        for (s, log, why) in cases {
            match judge(&route(false), s, log) {
                Outcome::Unanswered(said) => assert!(said.contains(why), "{said}"),
                other => panic!("{other:?}"),
            }
        }
        let failed = exited(2);
        let done = exited(0);
        for (s, log) in [
            (&failed, "{\"connected\":\"true\"}"),
            (&done, "not json"),
            (&done, "{\"error\":\"not ADDR:PORT\"}"),
            (&done, ""),
        ] {
            assert!(
                matches!(
                    judge(&route(false), Some(s), Some(log)),
                    Outcome::Unanswered(_)
                ),
                "{log}"
            );
        }
    }
}
