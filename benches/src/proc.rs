//! CPU time and memory of a system under test, read from /proc.
//!
//! Several peers run more than one process (squid's helpers, mitmproxy's
//! workers), so every sample covers the process and all its descendants.

use std::fs;

use crate::error::{BenchError, Result};

/// One reading of a process tree.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub(crate) struct Sample {
    /// utime + stime of every process in the tree, in seconds.
    pub cpu_secs: f64,
    /// Sum of the processes' current resident set (VmRSS), KiB.
    pub rss_kib: u64,
    /// Sum of the processes' peak resident set (VmHWM), KiB.
    pub hwm_kib: u64,
}

/// Reads the tree rooted at `pid`.
pub(crate) fn sample(pid: u32) -> Result<Sample> {
    let ticks = clock_ticks();
    let mut total = Sample::default();
    for p in tree(pid) {
        let stat = match fs::read_to_string(format!("/proc/{p}/stat")) {
            Ok(s) => s,
            // A helper that exited between listing and reading is not an error;
            // the root vanishing is.
            Err(_) if p != pid => continue,
            Err(source) => return Err(BenchError::Proc { pid, source }),
        };
        let status = fs::read_to_string(format!("/proc/{p}/status")).unwrap_or_default();
        if let Some((utime, stime)) = parse_stat_times(&stat) {
            total.cpu_secs += (utime + stime) as f64 / ticks;
        }
        total.rss_kib += parse_status_kib(&status, "VmRSS:").unwrap_or(0);
        total.hwm_kib += parse_status_kib(&status, "VmHWM:").unwrap_or(0);
    }
    Ok(total)
}

/// How many files `pid` has open (entries of /proc/PID/fd: sockets, the journal, pipes).
pub(crate) fn open_files(pid: u32) -> Result<usize> {
    fs::read_dir(format!("/proc/{pid}/fd"))
        .map(Iterator::count)
        .map_err(|source| BenchError::Proc { pid, source })
}

/// `pid` and all its descendants.
fn tree(pid: u32) -> Vec<u32> {
    let mut parents: Vec<(u32, u32)> = Vec::new();
    if let Ok(dir) = fs::read_dir("/proc") {
        for entry in dir.flatten() {
            let Some(p) = entry
                .file_name()
                .to_str()
                .and_then(|s| s.parse::<u32>().ok())
            else {
                continue;
            };
            if let Ok(stat) = fs::read_to_string(format!("/proc/{p}/stat"))
                && let Some(ppid) = parse_stat_ppid(&stat)
            {
                parents.push((p, ppid));
            }
        }
    }
    let mut out = vec![pid];
    let mut i = 0;
    while i < out.len() {
        let parent = out[i];
        out.extend(
            parents
                .iter()
                .filter(|(_, pp)| *pp == parent)
                .map(|(p, _)| *p),
        );
        i += 1;
    }
    out
}

/// Clock ticks per second (the unit of utime and stime).
fn clock_ticks() -> f64 {
    match nix::unistd::sysconf(nix::unistd::SysconfVar::CLK_TCK) {
        Ok(Some(t)) if t > 0 => t as f64,
        _ => 100.0,
    }
}

/// The fields after the command name, which may itself contain spaces and parentheses.
fn after_comm(stat: &str) -> Option<Vec<&str>> {
    let close = stat.rfind(')')?;
    Some(stat.get(close + 2..)?.split_whitespace().collect())
}

/// Parent pid (field 4 of /proc/PID/stat).
fn parse_stat_ppid(stat: &str) -> Option<u32> {
    after_comm(stat)?.get(1)?.parse().ok()
}

/// utime and stime in clock ticks (fields 14 and 15 of /proc/PID/stat).
pub(crate) fn parse_stat_times(stat: &str) -> Option<(u64, u64)> {
    let f = after_comm(stat)?;
    // After the command name, field 3 (state) is index 0, so field N is index N - 3.
    Some((f.get(11)?.parse().ok()?, f.get(12)?.parse().ok()?))
}

/// A `kB` line of /proc/PID/status, e.g. `VmHWM:    1234 kB`.
pub(crate) fn parse_status_kib(status: &str, key: &str) -> Option<u64> {
    status
        .lines()
        .find(|l| l.starts_with(key))?
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_times_survive_a_command_name_with_spaces_and_parens() {
        let stat = "4242 (squid (kid 1)) S 1 4242 4242 0 -1 4194560 1000 0 0 0 1234 567 0 0 20 0 1 0 100 1000000 250 18446744073709551615";
        assert_eq!(parse_stat_times(stat), Some((1234, 567)));
        assert_eq!(parse_stat_ppid(stat), Some(1));
    }

    #[test]
    fn status_kib_reads_the_named_line() {
        let status = "Name:\taf-proxy\nVmHWM:\t   10240 kB\nVmRSS:\t    8192 kB\n";
        assert_eq!(parse_status_kib(status, "VmHWM:"), Some(10240));
        assert_eq!(parse_status_kib(status, "VmRSS:"), Some(8192));
        assert_eq!(parse_status_kib(status, "VmSwap:"), None);
    }

    /// The open files of a shell that first runs `opens`, read once it says so. The shell then
    /// waits in its own `read` builtin: a program it started (`exec sleep`) would open and close
    /// files of its own (the loader's cache, the locale) while they are counted.
    fn files_of_a_shell_that(opens: &str) -> usize {
        use std::io::BufRead;
        let mut child = std::process::Command::new("sh")
            .arg("-c")
            .arg(format!("{opens} echo ready; read -r _"))
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .expect("sh");
        let mut line = String::new();
        let out = child.stdout.take().expect("piped");
        std::io::BufReader::new(out)
            .read_line(&mut line)
            .expect("ready");
        let open = open_files(child.id());
        let _ = child.kill();
        let _ = child.wait();
        open.expect("its /proc entry")
    }

    #[test]
    fn three_more_files_opened_are_three_more_counted() {
        let plain = files_of_a_shell_that("");
        let more = files_of_a_shell_that("exec 7</dev/null 8</dev/null 9</dev/null;");
        assert!(plain >= 3, "at least the standard streams: {plain}");
        assert_eq!(more, plain + 3);
    }

    #[test]
    fn sampling_this_process_sees_memory() {
        let s = sample(std::process::id()).expect("own /proc entry");
        assert!(s.rss_kib > 0 && s.hwm_kib >= s.rss_kib);
    }
}
