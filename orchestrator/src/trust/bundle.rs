//! The CA files every service gets: the bundle (this machine's system roots, then the
//! environment CA) and the environment CA alone.

use std::path::Path;

use pem::{EncodeConfig, LineEnding, Pem};

use super::store::with_ca;
use super::{EnvCa, TrustError};
use crate::plan::short_digest;

/// Where the system roots are read from when the platform's store gives none (Debian, Ubuntu
/// and Alpine keep the same file).
pub const FALLBACK_ROOTS: &str = "/etc/ssl/certs/ca-certificates.crt";

/// The two files uploaded into every service.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TrustFiles {
    /// System roots followed by the environment CA (PEM).
    pub bundle_pem: String,
    /// The environment CA alone (PEM).
    pub ca_pem: String,
}

impl TrustFiles {
    /// The files for `ca` on top of `system_roots_pem`.
    pub fn new(system_roots_pem: &str, ca: &EnvCa) -> TrustFiles {
        TrustFiles {
            bundle_pem: with_ca(system_roots_pem, ca.cert_pem()),
            ca_pem: ca.cert_pem().to_owned(),
        }
    }

    /// A digest of both files: a service made with other files is replaced.
    pub fn digest(&self) -> String {
        short_digest(format!("{}\0{}", self.bundle_pem, self.ca_pem).as_bytes())
    }
}

/// This machine's trusted roots as PEM: the platform's store, else [`FALLBACK_ROOTS`].
pub fn system_roots() -> Result<String, TrustError> {
    let native = rustls_native_certs::load_native_certs();
    if !native.certs.is_empty() {
        let pems: Vec<Pem> = native
            .certs
            .iter()
            .map(|der| Pem::new("CERTIFICATE", der.as_ref()))
            .collect();
        return Ok(pem::encode_many_config(
            &pems,
            EncodeConfig::new().set_line_ending(LineEnding::LF),
        ));
    }
    let store: Vec<String> = native.errors.iter().map(ToString::to_string).collect();
    roots_file(Path::new(FALLBACK_ROOTS)).map_err(|file| {
        TrustError::NoSystemRoots(format!(
            "the platform's store gave none ({}) and {file}",
            if store.is_empty() {
                "no error".to_owned()
            } else {
                store.join("; ")
            }
        ))
    })
}

/// A PEM file of root certificates, if it holds at least one.
fn roots_file(path: &Path) -> Result<String, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("{} could not be read: {e}", path.display()))?;
    let certs = pem::parse_many(&text)
        .map_err(|e| format!("{} is not PEM: {e}", path.display()))?
        .into_iter()
        .filter(|p| p.tag() == "CERTIFICATE")
        .count();
    if certs == 0 {
        return Err(format!("{} holds no certificate", path.display()));
    }
    Ok(text)
}

#[cfg(test)]
mod tests {
    use std::time::SystemTime;

    use super::*;
    use crate::env_id::EnvId;

    fn ca() -> EnvCa {
        let env = EnvId::parse("bundle-test").expect("id");
        EnvCa::generate(&env, SystemTime::now()).expect("CA")
    }

    fn certificates(pem_text: &str) -> Vec<Vec<u8>> {
        pem::parse_many(pem_text)
            .expect("PEM")
            .into_iter()
            .map(|p| p.into_contents())
            .collect()
    }

    #[test]
    fn the_bundle_is_every_system_root_then_the_environment_ca() {
        let roots = system_roots().expect("this machine has root certificates");
        let ca = ca();
        let files = TrustFiles::new(&roots, &ca);
        let in_bundle = certificates(&files.bundle_pem);
        let system = certificates(&roots);
        let own = certificates(ca.cert_pem());
        assert!(system.len() > 10, "a real root store: {}", system.len());
        assert_eq!(in_bundle.len(), system.len() + 1);
        assert_eq!(in_bundle[..system.len()], system[..]);
        assert_eq!(in_bundle.last(), own.first());
        assert_eq!(
            certificates(&files.ca_pem),
            own,
            "the CA file holds the CA alone"
        );
        assert!(!files.bundle_pem.contains('\r'));
    }

    #[test]
    fn a_new_ca_changes_the_digest_and_the_same_one_keeps_it() {
        let ca = ca();
        let a = TrustFiles::new("", &ca);
        assert_eq!(a.digest(), TrustFiles::new("", &ca).digest());
        assert_ne!(a.digest(), TrustFiles::new("", &self::ca()).digest());
        assert_eq!(certificates(&a.bundle_pem).len(), 1);
    }

    #[test]
    fn a_fallback_file_without_certificates_is_refused() {
        let dir = std::env::temp_dir().join(format!("af-roots-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        let empty = dir.join("empty.crt");
        std::fs::write(&empty, "no certificates here\n").expect("write");
        assert!(roots_file(&empty).is_err());
        assert!(roots_file(&dir.join("missing.crt")).is_err());
        let good = dir.join("good.crt");
        std::fs::write(&good, ca().cert_pem()).expect("write");
        assert_eq!(roots_file(&good).expect("one root"), ca_text(&good));
        let _ = std::fs::remove_dir_all(dir);
    }

    fn ca_text(path: &Path) -> String {
        std::fs::read_to_string(path).expect("read")
    }
}
