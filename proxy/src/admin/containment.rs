//! What the containment watchers last said: each pod's newest report, bounded, with every
//! change of verdict journaled (first heard, lost, held again) and counted. The admin API
//! serves it as `GET /v1/containment`; the report listener ([`super::report`]) fills it.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant, SystemTime};

use af_sidecar_api::config::Containment;
use af_sidecar_api::containment::{Breach, ContainmentPage, WatchReport, WatcherState};
use af_sidecar_api::journal::{ContainmentRecord, Entry};

use crate::metrics::Metrics;
use crate::record::journal::Journal;
use crate::record::journal::record::rfc3339;

/// Every watcher heard from.
pub(crate) struct Watchers {
    by_pod: Mutex<HashMap<String, Watched>>,
    journal: Journal,
    metrics: Arc<Metrics>,
    period: Duration,
    max: usize,
}

/// One watcher's newest report.
struct Watched {
    checked: Instant,
    checked_at: SystemTime,
    reports: u64,
    lost_at: Option<SystemTime>,
    breaches: Vec<Breach>,
}

impl Watchers {
    pub(crate) fn new(config: &Containment, journal: Journal, metrics: Arc<Metrics>) -> Self {
        Self {
            by_pod: Mutex::new(HashMap::new()),
            journal,
            metrics,
            period: Duration::from_secs(u64::from(config.period_secs.get())),
            max: config.max_watchers.max(1),
        }
    }

    /// Keep `report` as its pod's newest; journal it if the verdict changed.
    pub(crate) fn report(&self, report: WatchReport) {
        let now = Instant::now();
        let wall = SystemTime::now();
        let held = report.breaches.is_empty();
        let mut by_pod = self.by_pod.lock().unwrap_or_else(PoisonError::into_inner);
        if !by_pod.contains_key(&report.pod) && by_pod.len() >= self.max {
            let oldest = by_pod
                .iter()
                .min_by_key(|(_, w)| w.checked)
                .map(|(pod, _)| pod.clone());
            if let Some(pod) = oldest {
                by_pod.remove(&pod);
                self.metrics.containment_watcher_forgotten();
            }
        }
        let before = by_pod.get(&report.pod).map(|w| w.breaches.is_empty());
        let watched = by_pod.entry(report.pod.clone()).or_insert(Watched {
            checked: now,
            checked_at: wall,
            reports: 0,
            lost_at: None,
            breaches: Vec::new(),
        });
        watched.checked = now;
        watched.checked_at = wall;
        watched.reports += 1;
        if held {
            watched.lost_at = None;
        } else {
            watched.lost_at.get_or_insert(wall);
        }
        let changed = before != Some(held) || (!held && watched.breaches != report.breaches);
        watched.breaches.clone_from(&report.breaches);
        let lost_now = by_pod.values().filter(|w| !w.breaches.is_empty()).count();
        drop(by_pod);
        self.metrics
            .containment_reported(held, before == Some(false), lost_now);
        if changed {
            if held {
                tracing::info!(pod = %report.pod, "containment held");
            } else {
                tracing::error!(pod = %report.pod, breaches = ?report.breaches, "containment LOST");
            }
            self.journal.record(Entry::Containment(ContainmentRecord {
                pod: report.pod,
                held,
                breaches: report.breaches,
            }));
        }
    }

    /// Every watcher, by pod name.
    pub(crate) fn page(&self) -> ContainmentPage {
        let now = Instant::now();
        let by_pod = self.by_pod.lock().unwrap_or_else(PoisonError::into_inner);
        let mut watchers: Vec<WatcherState> = by_pod
            .iter()
            .map(|(pod, w)| WatcherState {
                pod: pod.clone(),
                checked_at: rfc3339(w.checked_at).to_string(),
                checked_secs_ago: now.saturating_duration_since(w.checked).as_secs(),
                reports: w.reports,
                lost_at: w.lost_at.map(|t| rfc3339(t).to_string()),
                breaches: w.breaches.clone(),
            })
            .collect();
        drop(by_pod);
        watchers.sort_by(|a, b| a.pod.cmp(&b.pod));
        ContainmentPage {
            period_secs: u32::try_from(self.period.as_secs()).unwrap_or(u32::MAX),
            stale_after_secs: self.period.as_secs() * u64::from(Containment::STALE_PERIODS),
            watchers,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::journal::{JournalSettings, Query};

    fn watchers(max: usize) -> (Watchers, Journal, Arc<Metrics>, tempfile::TempDir) {
        let dir = tempfile::tempdir().expect("tempdir");
        let metrics = Arc::new(Metrics::default());
        let settings = JournalSettings {
            dir: dir.path().to_owned(),
            segment_bytes: 1 << 20,
            max_segments: 4,
            queue: 64,
            batch: 16,
            commit_interval: std::time::Duration::ZERO,
            tail: 64,
        };
        let (journal, _writer) =
            Journal::start(&settings, Arc::from("env"), metrics.clone()).expect("journal");
        let mut config = Containment::new("t".repeat(16));
        config.max_watchers = max;
        (
            Watchers::new(&config, journal.clone(), metrics.clone()),
            journal,
            metrics,
            dir,
        )
    }

    fn report(pod: &str, breaches: &[&str]) -> WatchReport {
        WatchReport {
            pod: pod.to_owned(),
            breaches: breaches
                .iter()
                .map(|r| Breach {
                    route: (*r).to_owned(),
                    what: format!("{r} reached"),
                })
                .collect(),
        }
    }

    async fn journaled(journal: &Journal, want: usize) -> Vec<ContainmentRecord> {
        for _ in 0..200 {
            if journal.committed() >= want as u64 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        let lines = journal
            .query(Query {
                limit: 100,
                ..Query::default()
            })
            .await
            .expect("read");
        lines
            .iter()
            .map(|(_, line)| {
                let record: af_sidecar_api::journal::Record =
                    serde_json::from_slice(line).expect("a record");
                record.entry.as_containment().expect("containment").clone()
            })
            .collect()
    }

    #[tokio::test]
    async fn only_changes_of_verdict_are_journaled_and_the_loss_keeps_its_first_time() {
        let (w, journal, metrics, _dir) = watchers(8);
        w.report(report("web-1", &[]));
        w.report(report("web-1", &[]));
        w.report(report("web-1", &["policy-layer"]));
        let first_loss = w.page().watchers[0].lost_at.clone();
        w.report(report("web-1", &["policy-layer"]));
        w.report(report("web-1", &["policy-layer", "tcp"]));
        w.report(report("web-1", &[]));
        let records = journaled(&journal, 4).await;
        let verdicts: Vec<(bool, usize)> =
            records.iter().map(|r| (r.held, r.breaches.len())).collect();
        assert_eq!(verdicts, [(true, 0), (false, 1), (false, 2), (true, 0)]);
        assert!(first_loss.is_some());
        let page = w.page();
        assert_eq!(page.watchers.len(), 1);
        assert_eq!(page.watchers[0].reports, 6);
        assert!(page.watchers[0].held() && page.watchers[0].lost_at.is_none());
        let text = metrics.render();
        assert!(text.contains("af_containment_reports_total 6"), "{text}");
        assert!(text.contains("af_containment_losses_total 1"), "{text}");
        assert!(text.contains("af_containment_lost_watchers 0"), "{text}");
    }

    #[tokio::test]
    async fn a_lost_watcher_shows_in_the_page_and_the_gauge_until_it_holds() {
        let (w, _journal, metrics, _dir) = watchers(8);
        w.report(report("web-1", &[]));
        w.report(report("worker-1", &["pod-layer"]));
        let page = w.page();
        let pods: Vec<(&str, bool)> = page
            .watchers
            .iter()
            .map(|s| (s.pod.as_str(), s.held()))
            .collect();
        assert_eq!(pods, [("web-1", true), ("worker-1", false)]);
        assert_eq!(page.stale_after_secs, 30);
        assert!(metrics.render().contains("af_containment_lost_watchers 1"));
    }

    #[tokio::test]
    async fn the_store_is_bounded_and_forgets_the_watcher_heard_from_longest_ago() {
        let (w, _journal, metrics, _dir) = watchers(2);
        w.report(report("a", &[]));
        w.report(report("b", &[]));
        w.report(report("a", &[]));
        w.report(report("c", &[]));
        let pods: Vec<String> = w.page().watchers.into_iter().map(|s| s.pod).collect();
        assert_eq!(pods, ["a", "c"]);
        assert!(
            metrics
                .render()
                .contains("af_containment_watchers_forgotten_total 1")
        );
    }
}
