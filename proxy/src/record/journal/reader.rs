//! Reading committed records back for the admin API: from the in-memory tail when it reaches
//! back far enough, otherwise from the segment files.

use std::fs::File;
use std::io::{BufRead, BufReader};
use std::path::Path;

use bytes::Bytes;

use super::record::{StoredView, refused};
use super::segment;
use super::tail::Cached;

/// What to read.
#[derive(Debug, Clone, Default)]
pub struct Query {
    /// Only records with a larger sequence number.
    pub since: u64,
    /// At most this many.
    pub limit: usize,
    /// `Some(true)`: only refused decisions; `Some(false)`: only allowed ones.
    pub blocked: Option<bool>,
    /// Only records for this host (compared case-insensitively, trailing dot ignored).
    pub host: Option<String>,
    /// Only captured messages (the inbox).
    pub messages_only: bool,
}

impl Query {
    /// Whether a record passes the filters.
    pub fn keeps(&self, host: Option<&str>, blocked: Option<bool>, message: bool) -> bool {
        if self.messages_only && !message {
            return false;
        }
        if let Some(want) = self.blocked
            && blocked != Some(want)
        {
            return false;
        }
        if let Some(want) = &self.host {
            let want = want.trim_end_matches('.');
            if !host.is_some_and(|h| h.eq_ignore_ascii_case(want)) {
                return false;
            }
        }
        true
    }

    /// Whether a cached record passes the filters.
    pub fn keeps_cached(&self, c: &Cached) -> bool {
        self.keeps(c.host.as_deref(), c.blocked, c.message)
    }
}

/// Read matching records with `since < seq <= committed` from the segment files.
pub(crate) fn read_disk(
    dir: &Path,
    query: &Query,
    committed: u64,
) -> std::io::Result<Vec<(u64, Bytes)>> {
    let segments = segment::list(dir)?;
    let start = segments
        .iter()
        .rposition(|s| s.first_seq <= query.since.saturating_add(1))
        .unwrap_or(0);
    let mut out = Vec::new();
    for seg in &segments[start..] {
        let file = match File::open(&seg.path) {
            Ok(f) => f,
            // Evicted between listing and opening: its records are gone.
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => return Err(e),
        };
        for line in BufReader::new(file).split(b'\n') {
            let Ok(line) = line else { break };
            // A torn, non-UTF-8 or unparsable line is skipped; only whole committed records are
            // served, and nothing after such a line is hidden.
            let Ok(line) = String::from_utf8(line) else {
                continue;
            };
            let Ok(view) = serde_json::from_str::<StoredView>(&line) else {
                continue;
            };
            if view.seq <= query.since {
                continue;
            }
            if view.seq > committed {
                return Ok(out);
            }
            let blocked = view.allowed.map(|a| refused(a, view.code.is_some()));
            let message = view.kind.as_deref() == Some("message");
            if query.keeps(view.host.as_deref(), blocked, message) {
                out.push((view.seq, Bytes::from(line)));
                if out.len() >= query.limit {
                    return Ok(out);
                }
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_line_that_is_not_text_hides_none_of_the_records_after_it() {
        let dir = std::env::temp_dir().join(format!("af-reader-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("temp dir");
        let mut lines = br#"{"seq":1,"host":"a.test","allowed":true}"#.to_vec();
        lines.extend_from_slice(b"\n\xff\xfe torn\n");
        lines.extend_from_slice(br#"{"seq":2,"host":"b.test","allowed":false}"#);
        lines.push(b'\n');
        std::fs::write(dir.join(format!("{:020}.{}", 1, segment::EXT)), lines).expect("write");
        let query = Query {
            limit: 10,
            ..Query::default()
        };
        let seqs: Vec<u64> = read_disk(&dir, &query, 2)
            .expect("reads")
            .into_iter()
            .map(|(seq, _)| seq)
            .collect();
        let _ = std::fs::remove_dir_all(&dir);
        assert_eq!(seqs, [1, 2]);
    }
}
