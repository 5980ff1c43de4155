//! The sidecar killed with SIGKILL under load and started again on the same journal: every
//! record the admin API returned before the kill must be returned after it, unchanged; the
//! requests that were answered but have no record (still queued for the journal at the kill)
//! are counted.

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use af_sidecar_api::admin::JournalLosses;
use af_sidecar_api::journal::Record;
use serde::Serialize;
use tokio::net::TcpStream;

use crate::admin::Admin;
use crate::error::{BenchError, Result};
use crate::load::idle::exchange;
use crate::systems::Running;
use crate::upstream::SMALL_PATH;

/// The query parameter that names each request, so its record can be found.
const TAG: &str = "soak";
/// Time between two reads of the admin API while the load runs.
const POLL: Duration = Duration::from_millis(20);

/// How many kills, under how much load.
#[derive(Debug, Clone)]
pub(super) struct Plan {
    /// Kills (each followed by a restart and a check).
    pub rounds: u32,
    /// Load before each kill.
    pub load: Duration,
    /// Keep-alive clients sending requests back to back.
    pub workers: usize,
}

/// One kill.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Round {
    /// Requests that got their whole answer before the kill.
    pub answered: usize,
    /// Records the admin API returned before the kill (this round).
    pub returned: usize,
    /// Records returned before any kill so far that the restarted sidecar does not return.
    pub lost: usize,
    /// Records it returns changed (another record under the same sequence number).
    pub changed: usize,
    /// Answered requests with no record after the restart.
    pub answered_unrecorded: usize,
    /// Records of requests whose answer the kill cut off.
    pub recorded_unanswered: usize,
    /// The highest sequence number returned before the kill.
    pub last_seq: u64,
    /// Milliseconds from SIGKILL to the restarted sidecar accepting.
    pub restart_ms: u64,
}

/// What the kills showed.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Killed {
    /// Clients sending requests back to back during each load.
    pub workers: usize,
    /// Seconds of load before each kill.
    pub load_secs: f64,
    /// Every kill.
    pub rounds: Vec<Round>,
    /// Sum of `answered`.
    pub answered: usize,
    /// Records returned before a kill, all rounds.
    pub returned: usize,
    /// Records lost, all rounds (must be 0).
    pub lost: usize,
    /// Records changed, all rounds (must be 0).
    pub changed: usize,
    /// Answered requests with no record, all rounds.
    pub answered_unrecorded: usize,
    /// The journal's own loss counters after the last restart (`losses` of the API).
    pub journal_losses: JournalLosses,
}

/// Runs `plan` against the started sidecar `running` (its journal in its own directory).
pub(super) async fn run(
    running: &mut Running,
    proxy: SocketAddr,
    upstream: SocketAddr,
    plan: &Plan,
) -> Result<Killed> {
    let admin = Admin::new(
        running
            .admin
            .ok_or_else(|| BenchError::Protocol("the sidecar has no admin API".into()))?,
    );
    // Every record ever returned before a kill, by sequence number.
    let mut returned: BTreeMap<u64, Record> = BTreeMap::new();
    let mut since = 0;
    let mut rounds = Vec::new();
    for round in 0..plan.rounds {
        let workers: Vec<_> = (0..plan.workers)
            .map(|w| tokio::spawn(send_until_cut(proxy, upstream, format!("{round}-{w}"))))
            .collect();
        let reader = tokio::spawn(read_until_cut(admin, since));
        tokio::time::sleep(plan.load).await;
        tokio::task::block_in_place(|| running.kill())?;
        let killed_at = Instant::now();
        let before = reader
            .await
            .map_err(|e| BenchError::Protocol(format!("reader: {e}")))?;
        let mut answered = BTreeSet::new();
        for w in workers {
            answered.extend(
                w.await
                    .map_err(|e| BenchError::Protocol(format!("worker: {e}")))?,
            );
        }
        tokio::task::block_in_place(|| running.restart())?;
        let restart_ms = killed_at.elapsed().as_millis() as u64;
        let this_round = before.len();
        let last_seq = before.keys().next_back().copied().unwrap_or(since);
        returned.extend(before);

        let after: BTreeMap<u64, Record> = admin
            .all(0)
            .await?
            .into_iter()
            .map(|r| (r.seq, r))
            .collect();
        since = after.keys().next_back().copied().unwrap_or(0);
        let lost = returned.keys().filter(|s| !after.contains_key(s)).count();
        let changed = returned
            .iter()
            .filter(|(s, r)| after.get(s).is_some_and(|a| a != *r))
            .count();
        let prefix = format!("{round}-");
        let recorded: BTreeSet<String> = after
            .values()
            .filter_map(tag_of)
            .filter(|t| t.starts_with(&prefix))
            .collect();
        let r = Round {
            answered: answered.len(),
            returned: this_round,
            lost,
            changed,
            answered_unrecorded: answered.difference(&recorded).count(),
            recorded_unanswered: recorded.difference(&answered).count(),
            last_seq,
            restart_ms,
        };
        eprintln!(
            "soak kill {}/{}: {} answered, {} records returned before the kill, {} lost, {} answered but unrecorded",
            round + 1,
            plan.rounds,
            r.answered,
            r.returned,
            r.lost,
            r.answered_unrecorded
        );
        rounds.push(r);
    }
    let journal_losses = admin.page(since).await?.losses;
    let sum = |f: fn(&Round) -> usize| rounds.iter().map(f).sum();
    Ok(Killed {
        workers: plan.workers,
        load_secs: plan.load.as_secs_f64(),
        answered: sum(|r| r.answered),
        returned: sum(|r| r.returned),
        lost: sum(|r| r.lost),
        changed: sum(|r| r.changed),
        answered_unrecorded: sum(|r| r.answered_unrecorded),
        rounds,
        journal_losses,
    })
}

/// The tag of the request a record is of (`ROUND-WORKER-N`), if it is one of ours.
fn tag_of(record: &Record) -> Option<String> {
    let path = &record.entry.as_decision()?.path;
    let (_, query) = path.split_once('?')?;
    query
        .split('&')
        .find_map(|kv| kv.strip_prefix(TAG)?.strip_prefix('='))
        .map(str::to_owned)
}

/// One keep-alive client sending tagged requests back to back until the connection breaks;
/// the tags of the requests it got whole answers for.
async fn send_until_cut(proxy: SocketAddr, upstream: SocketAddr, worker: String) -> Vec<String> {
    let mut answered = Vec::new();
    let Ok(mut s) = TcpStream::connect(proxy).await else {
        return answered;
    };
    let _ = s.set_nodelay(true);
    for n in 0u64.. {
        let tag = format!("{worker}-{n}");
        let request = format!(
            "GET http://{upstream}{SMALL_PATH}?{TAG}={tag} HTTP/1.1\r\nHost: {upstream}\r\n\r\n"
        );
        if exchange(&mut s, request.as_bytes()).await.is_err() {
            break;
        }
        answered.push(tag);
    }
    answered
}

/// Reads the admin API from `since` until it stops answering; every record it returned.
async fn read_until_cut(admin: Admin, mut since: u64) -> BTreeMap<u64, Record> {
    let mut seen = BTreeMap::new();
    while let Ok(page) = admin.page(since).await {
        since = page.next_since;
        seen.extend(page.records.into_iter().map(|r| (r.seq, r)));
        tokio::time::sleep(POLL).await;
    }
    seen
}

#[cfg(test)]
mod tests {
    use super::*;

    use af_sidecar_api::Mode;
    use af_sidecar_api::journal::{DecisionRecord, DnsSighting, Entry};

    fn record(entry: Entry) -> Record {
        Record {
            seq: 1,
            at: String::new(),
            env: "bench".to_owned(),
            entry,
        }
    }

    fn decision(path: &str) -> Record {
        record(Entry::Decision(DecisionRecord {
            path: path.to_owned(),
            ..DecisionRecord::default()
        }))
    }

    #[test]
    fn a_records_tag_is_read_from_its_path_and_other_records_have_none() {
        assert_eq!(
            tag_of(&decision("/small?x=1&soak=2-7-31")).as_deref(),
            Some("2-7-31")
        );
        assert_eq!(tag_of(&decision("/small")), None);
        let sighting = record(Entry::DnsSighting(DnsSighting {
            via: "dns".to_owned(),
            client: ([127, 0, 0, 1], 53).into(),
            host: "x".to_owned(),
            qtype: "A".to_owned(),
            answer: "outside".to_owned(),
            mode: Mode::Allow,
            rule: "default".to_owned(),
        }));
        assert_eq!(tag_of(&sighting), None);
    }
}
