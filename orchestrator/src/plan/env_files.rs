//! A service's environment: its `env_file` files (`NAME=value` lines, read as Compose and
//! `docker run --env-file` read them, by `dotenvy`), then its own `env`, which wins.

use std::collections::BTreeMap;
use std::path::Path;

use af_policy::error::{Report, codes};
use af_policy::manifest::Service;

/// The most bytes of one env file af reads.
const MAX_BYTES: u64 = 1 << 20;

/// `service`'s variables: each file `env_file` names (relative to `dir`, later files winning),
/// then `env`. A file that cannot be read is refused (AF-RUN-016), naming the file and line but
/// never a value.
pub(super) fn environment(
    service: &Service,
    dir: &Path,
) -> Result<BTreeMap<String, String>, Report> {
    let mut env = BTreeMap::new();
    for file in &service.env_file {
        let path = dir.join(file);
        let refuse = |why: String| {
            Report::new(
                &codes::RUN_ENV_FILE,
                format!(
                    "The env_file {file} of service {} {why}; nothing was started.",
                    service.name
                ),
            )
        };
        let size = std::fs::metadata(&path)
            .map_err(|e| refuse(format!("cannot be read ({e})")))?
            .len();
        if size > MAX_BYTES {
            return Err(refuse(format!(
                "is {size} bytes, more than the 1 MiB af reads"
            )));
        }
        let lines =
            dotenvy::from_path_iter(&path).map_err(|e| refuse(format!("cannot be read ({e})")))?;
        for (line, item) in lines.enumerate() {
            // dotenvy's error names the line's text, which may hold a secret: only its number
            // is said.
            let (name, value) = item.map_err(|_| {
                refuse(format!(
                    "has a line af cannot read as NAME=value (entry {})",
                    line + 1
                ))
            })?;
            env.insert(name, value);
        }
    }
    env.extend(service.env.iter().map(|(k, v)| (k.clone(), v.clone())));
    Ok(env)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn service(env_file: &[&str], env: &[(&str, &str)]) -> Service {
        let yaml = "name: web\nport: 8080\n";
        let mut service: Service = serde_saphyr::from_str(yaml).expect("service");
        service.env_file = env_file.iter().map(|f| (*f).to_owned()).collect();
        service.env = env
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        service
    }

    #[test]
    fn later_files_win_and_env_wins_over_them() {
        let dir = tempfile::tempdir().expect("dir");
        std::fs::write(
            dir.path().join("a.env"),
            "# comment\nA=1\nB=from-a\nQUOTED=\"x y\"\n",
        )
        .expect("write");
        std::fs::write(dir.path().join("b.env"), "B=from-b\nC=from-b\n").expect("write");
        let env =
            environment(&service(&["a.env", "b.env"], &[("C", "own")]), dir.path()).expect("read");
        assert_eq!(env["A"], "1");
        assert_eq!(env["B"], "from-b");
        assert_eq!(env["C"], "own");
        assert_eq!(env["QUOTED"], "x y");
    }

    #[test]
    fn a_missing_or_unreadable_file_is_refused_without_a_value() {
        let dir = tempfile::tempdir().expect("dir");
        let missing = environment(&service(&["none.env"], &[]), dir.path()).expect_err("refused");
        assert_eq!(missing.code.code, "AF-RUN-016");
        assert!(
            missing.statement.contains("none.env"),
            "{}",
            missing.statement
        );
        std::fs::write(dir.path().join("bad.env"), "TOKEN=s3cret\nnot a line 'x\n").expect("write");
        let bad = environment(&service(&["bad.env"], &[]), dir.path()).expect_err("refused");
        assert_eq!(bad.code.code, "AF-RUN-016");
        assert!(!bad.statement.contains("s3cret"), "{}", bad.statement);
    }
}
