//! What a process holds: open files and resident memory, and the bound they must return to.

use serde::Serialize;

use crate::error::Result;
use crate::proc;

/// One reading of the sidecar.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub(crate) struct Footprint {
    /// Entries of /proc/PID/fd.
    pub open_files: usize,
    /// VmRSS, KiB.
    pub rss_kib: u64,
}

impl Footprint {
    /// Reads process `pid` (the process alone: af-proxy has no children).
    pub(crate) fn read(pid: u32) -> Result<Self> {
        Ok(Self {
            open_files: proc::open_files(pid)?,
            rss_kib: proc::sample(pid)?.rss_kib,
        })
    }

    /// The larger of each figure.
    pub(crate) fn max(self, other: Self) -> Self {
        Self {
            open_files: self.open_files.max(other.open_files),
            rss_kib: self.rss_kib.max(other.rss_kib),
        }
    }

    /// Whether `self` is within `tolerance` above `baseline`: (open files, RSS).
    pub(crate) fn within(self, baseline: Self, tolerance: Self) -> (bool, bool) {
        (
            self.open_files <= baseline.open_files + tolerance.open_files,
            self.rss_kib <= baseline.rss_kib + tolerance.rss_kib,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn within_allows_the_tolerance_above_the_baseline_and_not_one_more() {
        let base = Footprint {
            open_files: 20,
            rss_kib: 10_000,
        };
        let tol = Footprint {
            open_files: 4,
            rss_kib: 1_000,
        };
        let at = |open_files, rss_kib| Footprint {
            open_files,
            rss_kib,
        };
        assert_eq!(at(24, 11_000).within(base, tol), (true, true));
        assert_eq!(
            at(10, 5_000).within(base, tol),
            (true, true),
            "below is fine"
        );
        assert_eq!(at(25, 11_000).within(base, tol), (false, true));
        assert_eq!(at(24, 11_001).within(base, tol), (true, false));
        assert_eq!(at(30, 1).max(at(2, 9)), at(30, 9));
    }
}
