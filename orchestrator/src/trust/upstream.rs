//! The certificate authorities `egress.upstream_roots` names: read relative to the manifest,
//! each file checked to hold X.509 certificates, for the sidecar's
//! `tls.extra_upstream_roots_pem` (it trusts them besides the public web roots when it opens
//! TLS to an upstream itself).

use std::path::Path;

use af_policy::error::{Report, codes};
use pem::{EncodeConfig, LineEnding, Pem};

/// The largest file read as a root: far above any real CA bundle, so a wrong path (a log, an
/// archive) is refused rather than copied into the sidecar's document.
pub const MAX_FILE_BYTES: u64 = 1024 * 1024;

/// Every certificate of every file in `files` (paths relative to `dir`, the manifest's
/// directory), re-encoded as PEM in order; `None` when the manifest names none. Anything
/// else in a file (a private key pasted by mistake) is left out. A file that cannot be read,
/// is too large, or holds no certificate that parses refuses with AF-RUN-055.
pub fn load(files: &[String], dir: &Path) -> Result<Option<String>, Report> {
    if files.is_empty() {
        return Ok(None);
    }
    let mut certificates = Vec::new();
    for (index, file) in files.iter().enumerate() {
        certificates.extend(read(dir, file).map_err(|why| refusal(dir, index, file, &why))?);
    }
    Ok(Some(pem::encode_many_config(
        &certificates,
        EncodeConfig::new().set_line_ending(LineEnding::LF),
    )))
}

/// The certificates of one file, or why it has none af can use.
fn read(dir: &Path, file: &str) -> Result<Vec<Pem>, String> {
    let full = dir.join(file);
    let size = std::fs::metadata(&full)
        .map_err(|e| format!("could not be read ({}: {e})", full.display()))?
        .len();
    if size > MAX_FILE_BYTES {
        return Err(format!(
            "is {size} bytes, more than a CA file's {MAX_FILE_BYTES}"
        ));
    }
    let text = std::fs::read_to_string(&full)
        .map_err(|e| format!("could not be read ({}: {e})", full.display()))?;
    let blocks = pem::parse_many(&text).map_err(|e| format!("is not PEM ({e})"))?;
    let certificates: Vec<Pem> = blocks
        .into_iter()
        .filter(|block| block.tag() == "CERTIFICATE")
        .collect();
    if let Some(bad) = certificates
        .iter()
        .position(|c| x509_parser::parse_x509_certificate(c.contents()).is_err())
    {
        return Err(format!(
            "holds a certificate (the {}th) that is not X.509",
            bad + 1
        ));
    }
    if certificates.is_empty() {
        return Err("holds no PEM CERTIFICATE block".to_owned());
    }
    Ok(certificates)
}

fn refusal(dir: &Path, index: usize, file: &str, why: &str) -> Report {
    Report::new(
        &codes::RUN_UPSTREAM_ROOTS,
        format!("egress.upstream_roots[{index}] names {file}, which {why}."),
    )
    .with_next(format!(
        "Name the CA's PEM certificate file (a path relative to {}); nothing was created.",
        dir.display()
    ))
}

#[cfg(test)]
mod tests {
    use std::time::SystemTime;

    use super::*;
    use crate::env_id::EnvId;
    use crate::trust::EnvCa;

    struct Dir(std::path::PathBuf);

    impl Dir {
        fn new(tag: &str) -> Dir {
            let dir =
                std::env::temp_dir().join(format!("af-upstream-{tag}-{}", std::process::id()));
            std::fs::create_dir_all(dir.join("certs")).expect("dir");
            Dir(dir)
        }
        fn write(&self, name: &str, text: &str) {
            std::fs::write(self.0.join(name), text).expect("write");
        }
    }

    impl Drop for Dir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    fn ca(name: &str) -> EnvCa {
        EnvCa::generate(&EnvId::parse(name).expect("id"), SystemTime::now()).expect("CA")
    }

    fn contents(text: &str) -> Vec<Vec<u8>> {
        pem::parse_many(text)
            .expect("PEM")
            .into_iter()
            .map(Pem::into_contents)
            .collect()
    }

    #[test]
    fn every_certificate_of_every_file_is_kept_in_order_and_keys_are_left_out() {
        let dir = Dir::new("read");
        let (a, b) = (ca("upstream-a"), ca("upstream-b"));
        dir.write("certs/a.pem", &format!("{}{}", a.cert_pem(), a.key_pem()));
        dir.write("b.pem", b.cert_pem());
        let files = ["certs/a.pem".to_owned(), "./b.pem".to_owned()];
        let pem = load(&files, &dir.0).expect("loads").expect("some roots");
        let mut want = contents(a.cert_pem());
        want.extend(contents(b.cert_pem()));
        assert_eq!(contents(&pem), want);
        assert!(!pem.contains("PRIVATE KEY"), "{pem}");
        assert_eq!(load(&[], &dir.0).expect("none"), None);
    }

    #[test]
    fn a_missing_garbage_or_certificate_less_file_is_af_run_055_naming_it() {
        let dir = Dir::new("bad");
        dir.write(
            "garbage.pem",
            "-----BEGIN CERTIFICATE-----\nbm90IGEgY2VydA==\n-----END CERTIFICATE-----\n",
        );
        dir.write("key.pem", ca("upstream-k").key_pem());
        dir.write("text.pem", "hello\n");
        for (file, why) in [
            ("certs/missing.pem", "could not be read"),
            ("garbage.pem", "is not X.509"),
            ("key.pem", "holds no PEM CERTIFICATE block"),
            ("text.pem", "holds no PEM CERTIFICATE block"),
        ] {
            let good = dir.0.join("good.pem");
            std::fs::write(&good, ca("upstream-g").cert_pem()).expect("write");
            let files = ["good.pem".to_owned(), file.to_owned()];
            let err = load(&files, &dir.0).expect_err(file);
            assert_eq!(err.code.code, "AF-RUN-055", "{file}");
            assert!(
                err.statement
                    .starts_with(&format!("egress.upstream_roots[1] names {file}, which")),
                "{err}"
            );
            assert!(err.statement.contains(why), "{file}: {err}");
        }
        // The control: the good file alone loads.
        assert!(
            load(&["good.pem".to_owned()], &dir.0)
                .expect("loads")
                .is_some()
        );
    }
}
