//! Containment while the environment runs, judged from what the sidecar's watchers last said
//! (`GET /v1/containment`) and the pods that should have said it: held only when every one of
//! them reported within three periods and every report says held.

use af_sidecar_api::containment::{Breach, ContainmentPage};

use crate::admin;
use crate::env_id::EnvId;
use crate::runtime::{EnvStatus, Runtime};
use serde::Serialize;

/// The verdict `af status` and `af ui` show.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "state", rename_all = "lowercase")]
pub enum Containment {
    /// Every watched pod reported within the period, each with every layer in force and every
    /// way out held.
    Held {
        /// Seconds since the oldest of those reports.
        checked_secs_ago: u64,
        /// The pods watched.
        pods: usize,
    },
    /// At least one pod's watcher found a way through.
    Lost {
        /// When the first of them found it (RFC 3339, the sidecar's clock).
        lost_at: String,
        /// Each pod and what got through.
        pods: Vec<LostPod>,
    },
    /// No proof either way: a pod without a recent report, or no page to read.
    Unverified {
        /// Why, in one sentence.
        why: String,
    },
}

/// One pod whose watcher found a way through.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LostPod {
    /// The pod.
    pub pod: String,
    /// What got through.
    pub breaches: Vec<Breach>,
}

impl Containment {
    /// Fill `status.containment` where the runtime watches: the watchers' reports read through
    /// the admin API and judged against the pods that run one.
    pub async fn fill(runtime: &dyn Runtime, env: &EnvId, status: &mut EnvStatus) {
        let Some(pods) = status.watched.as_deref().filter(|_| status.exists) else {
            return;
        };
        let page = match runtime.admin(env).await {
            Ok(endpoint) => admin::containment(endpoint.addr, &endpoint.token).await,
            Err(e) => Err(e),
        };
        status.containment = Some(match page {
            Ok(Some(page)) => Containment::judge(&page, pods),
            Ok(None) => Containment::Unverified {
                why: "the sidecar runs no containment watchers (it predates them: `af up` replaces it)"
                    .to_owned(),
            },
            Err(e) => Containment::Unverified {
                why: format!(
                    "the sidecar's watchers could not be read: {}",
                    e.report().statement
                ),
            },
        });
    }

    /// The verdict for `pods` (the service pods that run a watcher) from `page`. With no pod
    /// running (stopped on a loss, say), a loss any watcher reported still stands.
    pub fn judge(page: &ContainmentPage, pods: &[String]) -> Containment {
        let counts = |pod: &String| pods.is_empty() || pods.contains(pod);
        let mut lost: Vec<(&str, LostPod)> = page
            .watchers
            .iter()
            .filter(|w| counts(&w.pod) && !w.held())
            .map(|w| {
                (
                    w.lost_at.as_deref().unwrap_or(&w.checked_at),
                    LostPod {
                        pod: w.pod.clone(),
                        breaches: w.breaches.clone(),
                    },
                )
            })
            .collect();
        if !lost.is_empty() {
            lost.sort_by(|a, b| a.0.cmp(b.0));
            return Containment::Lost {
                lost_at: lost[0].0.to_owned(),
                pods: lost.into_iter().map(|(_, pod)| pod).collect(),
            };
        }
        if pods.is_empty() {
            return Containment::Unverified {
                why: "no service pod runs, so no watcher reports".to_owned(),
            };
        }
        let mut oldest = 0;
        for pod in pods {
            match page.watchers.iter().find(|w| &w.pod == pod) {
                None => {
                    return Containment::Unverified {
                        why: format!("no report yet from {pod}'s watcher"),
                    };
                }
                Some(w) if w.checked_secs_ago > page.stale_after_secs => {
                    return Containment::Unverified {
                        why: format!(
                            "no report from {pod}'s watcher for {} s (one is due every {} s)",
                            w.checked_secs_ago, page.period_secs
                        ),
                    };
                }
                Some(w) => oldest = oldest.max(w.checked_secs_ago),
            }
        }
        Containment::Held {
            checked_secs_ago: oldest,
            pods: pods.len(),
        }
    }

    /// One line for a person: `containment held, checked 4 s ago (3 pods)`.
    pub fn line(&self) -> String {
        match self {
            Containment::Held {
                checked_secs_ago,
                pods,
            } => format!(
                "containment held, checked {checked_secs_ago} s ago ({pods} pod{})",
                if *pods == 1 { "" } else { "s" }
            ),
            Containment::Lost { lost_at, pods } => {
                let what: Vec<String> = pods
                    .iter()
                    .flat_map(|p| {
                        p.breaches
                            .iter()
                            .map(move |b| format!("{}: {}", p.pod, b.what))
                    })
                    .collect();
                format!("containment LOST at {lost_at}: {}", what.join("; "))
            }
            Containment::Unverified { why } => format!("containment unverified: {why}"),
        }
    }

    /// Whether it held.
    pub fn held(&self) -> bool {
        matches!(self, Containment::Held { .. })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use af_sidecar_api::containment::WatcherState;

    fn watcher(pod: &str, ago: u64, breaches: &[&str]) -> WatcherState {
        WatcherState {
            pod: pod.to_owned(),
            checked_at: format!("2026-12-07T10:00:{ago:02}.000Z"),
            checked_secs_ago: ago,
            reports: 3,
            lost_at: (!breaches.is_empty()).then(|| format!("2026-12-07T09:59:{ago:02}.000Z")),
            breaches: breaches
                .iter()
                .map(|r| Breach {
                    route: (*r).to_owned(),
                    what: format!("{r} answered"),
                })
                .collect(),
        }
    }

    fn page(watchers: Vec<WatcherState>) -> ContainmentPage {
        ContainmentPage {
            period_secs: 10,
            stale_after_secs: 30,
            watchers,
        }
    }

    fn pods(names: &[&str]) -> Vec<String> {
        names.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn held_only_when_every_watched_pod_reported_recently_and_held() {
        let p = page(vec![watcher("web-1", 4, &[]), watcher("worker-1", 9, &[])]);
        let held = Containment::judge(&p, &pods(&["web-1", "worker-1"]));
        assert_eq!(
            held,
            Containment::Held {
                checked_secs_ago: 9,
                pods: 2
            }
        );
        assert_eq!(held.line(), "containment held, checked 9 s ago (2 pods)");
        let missing = Containment::judge(&p, &pods(&["web-1", "worker-2"]));
        assert!(
            missing.line().contains("no report yet from worker-2"),
            "{missing:?}"
        );
        let stale = Containment::judge(&page(vec![watcher("web-1", 31, &[])]), &pods(&["web-1"]));
        assert!(stale.line().contains("for 31 s"), "{stale:?}");
        assert!(!Containment::judge(&p, &[]).held());
    }

    #[test]
    fn with_every_pod_stopped_the_loss_that_stopped_them_still_shows() {
        let p = page(vec![watcher("web-1", 40, &["pod-layer"])]);
        assert!(matches!(
            Containment::judge(&p, &[]),
            Containment::Lost { .. }
        ));
        let restarted = Containment::judge(
            &page(vec![
                watcher("web-1", 40, &["pod-layer"]),
                watcher("web-2", 1, &[]),
            ]),
            &pods(&["web-2"]),
        );
        assert!(restarted.held(), "{restarted:?}");
    }

    #[test]
    fn a_loss_of_a_watched_pod_names_it_and_what_got_through_and_a_gone_pod_does_not_count() {
        let p = page(vec![
            watcher("web-1", 2, &["policy-layer"]),
            watcher("web-0", 1, &["tcp:198.51.100.7:443"]),
            watcher("worker-1", 3, &[]),
        ]);
        let lost = Containment::judge(&p, &pods(&["web-1", "worker-1"]));
        let Containment::Lost { lost_at, pods: who } = &lost else {
            panic!("{lost:?}");
        };
        assert_eq!(lost_at, "2026-12-07T09:59:02.000Z");
        assert_eq!(who.len(), 1);
        assert_eq!(
            lost.line(),
            "containment LOST at 2026-12-07T09:59:02.000Z: web-1: policy-layer answered"
        );
    }
}
