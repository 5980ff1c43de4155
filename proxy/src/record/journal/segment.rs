//! The journal's files: append-only NDJSON segments named by the first sequence number they
//! hold (`00000000000000000042.ndjson`), bounded in size and count.

use std::collections::VecDeque;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};

/// The extension every segment file carries.
pub(crate) const EXT: &str = "ndjson";

/// A segment on disk.
#[derive(Debug, Clone)]
pub(crate) struct SegmentInfo {
    /// The first sequence number written to it.
    pub first_seq: u64,
    /// Its file.
    pub path: PathBuf,
}

/// List the segments in `dir`, oldest first. Files that are not segments are ignored.
pub(crate) fn list(dir: &Path) -> io::Result<Vec<SegmentInfo>> {
    let mut out = Vec::new();
    for entry in fs::read_dir(dir)? {
        let path = entry?.path();
        if path.extension().and_then(|e| e.to_str()) != Some(EXT) {
            continue;
        }
        let Some(first_seq) = path
            .file_stem()
            .and_then(|s| s.to_str())
            .and_then(|s| s.parse::<u64>().ok())
        else {
            continue;
        };
        out.push(SegmentInfo { first_seq, path });
    }
    out.sort_by_key(|s| s.first_seq);
    Ok(out)
}

fn segment_path(dir: &Path, first_seq: u64) -> PathBuf {
    dir.join(format!("{first_seq:020}.{EXT}"))
}

/// The writer's view of the segment directory.
pub(crate) struct Segments {
    dir: PathBuf,
    segment_bytes: u64,
    max_segments: usize,
    segments: VecDeque<SegmentInfo>,
    current: File,
    current_len: u64,
}

/// What recovery found.
pub(crate) struct Recovered {
    /// The segments, ready for appending.
    pub segments: Segments,
    /// The next sequence number to assign.
    pub next_seq: u64,
}

impl Segments {
    /// Open `dir` (creating it), cut a torn last line, and find the next sequence number.
    pub(crate) fn recover(
        dir: &Path,
        segment_bytes: u64,
        max_segments: usize,
    ) -> io::Result<Recovered> {
        fs::create_dir_all(dir)?;
        let mut segments: VecDeque<SegmentInfo> = list(dir)?.into();
        let mut next_seq = 1;
        if let Some(last) = segments.back() {
            let mut text = Vec::new();
            File::open(&last.path)?.read_to_end(&mut text)?;
            // Everything after the last newline is a write the kill interrupted.
            let keep = text.iter().rposition(|b| *b == b'\n').map_or(0, |i| i + 1);
            if keep < text.len() {
                OpenOptions::new()
                    .write(true)
                    .open(&last.path)?
                    .set_len(keep as u64)?;
                tracing::warn!(segment = %last.path.display(), cut = text.len() - keep, "journal: cut a torn last line");
            }
            next_seq = last.first_seq;
            for line in text[..keep].split(|b| *b == b'\n').rev() {
                if let Ok(view) = serde_json::from_slice::<super::record::StoredView>(line) {
                    next_seq = view.seq + 1;
                    break;
                }
            }
        }
        if segments.is_empty() {
            segments.push_back(SegmentInfo {
                first_seq: next_seq,
                path: segment_path(dir, next_seq),
            });
        }
        let path = segments.back().map(|s| s.path.clone()).unwrap_or_default();
        let current = OpenOptions::new().create(true).append(true).open(&path)?;
        let current_len = current.metadata()?.len();
        sync_dir(dir);
        Ok(Recovered {
            segments: Segments {
                dir: dir.to_owned(),
                segment_bytes,
                max_segments,
                segments,
                current,
                current_len,
            },
            next_seq,
        })
    }

    /// Whether appending `len` more bytes (after `pending` buffered ones) should start a new
    /// segment first.
    pub(crate) fn full_for(&self, pending: usize, len: usize) -> bool {
        let used = self.current_len + pending as u64;
        used > 0 && used + len as u64 > self.segment_bytes
    }

    /// Append and fsync. Group commit: one call per batch. A batch that fails (a short write,
    /// a full disk, a failed fsync) is cut off again, so no torn fragment stays in front of the
    /// next batch's records.
    pub(crate) fn write_sync(&mut self, bytes: &[u8]) -> io::Result<()> {
        if bytes.is_empty() {
            return Ok(());
        }
        let written = self
            .current
            .write_all(bytes)
            .and_then(|()| self.current.sync_data());
        if let Err(error) = written {
            // Best effort: if even the truncation fails, the reader skips undecodable lines.
            let _ = self.current.set_len(self.current_len);
            return Err(error);
        }
        self.current_len += bytes.len() as u64;
        Ok(())
    }

    /// Start a new segment whose first record is `first_seq`; evict the oldest segments beyond
    /// the bound. Returns the number of records evicted per removed segment.
    pub(crate) fn rotate(&mut self, first_seq: u64) -> io::Result<Vec<u64>> {
        let path = segment_path(&self.dir, first_seq);
        self.current = OpenOptions::new().create(true).append(true).open(&path)?;
        self.current_len = self.current.metadata()?.len();
        self.segments.push_back(SegmentInfo { first_seq, path });
        let mut evicted = Vec::new();
        while self.segments.len() > self.max_segments {
            let Some(old) = self.segments.pop_front() else {
                break;
            };
            let next_first = self.segments.front().map_or(first_seq, |s| s.first_seq);
            fs::remove_file(&old.path)?;
            evicted.push(next_first.saturating_sub(old.first_seq));
        }
        sync_dir(&self.dir);
        Ok(evicted)
    }
}

// Make a created or removed segment durable; best effort (not every filesystem supports it).
fn sync_dir(dir: &Path) {
    if let Ok(d) = File::open(dir) {
        let _ = d.sync_all();
    }
}
