//! What services trust: the environment's own certificate authority, which the sidecar signs
//! the certificates of intercepted hosts with, and the CA bundle every service reads (this
//! machine's system roots plus that CA, so hosts tunnelled untouched still verify for clients
//! whose variable replaces their trust store).
//!
//! Runtime-neutral: a runtime only decides how the files reach the services.

pub mod bundle;
pub mod ca;
pub mod store;
pub mod upstream;

pub use bundle::TrustFiles;
pub use ca::EnvCa;

/// Where the bundle (system roots and the environment CA) sits in every service.
pub const BUNDLE_PATH: &str = "/etc/af/ca-bundle.pem";
/// Where the environment CA alone sits in every service.
pub const CA_PATH: &str = "/etc/af/ca.pem";

/// The variables that point common clients (OpenSSL, Python requests, Node, curl, git, the AWS
/// SDKs) at the bundle.
pub const BUNDLE_VARIABLES: [&str; 6] = [
    "SSL_CERT_FILE",
    "REQUESTS_CA_BUNDLE",
    "NODE_EXTRA_CA_CERTS",
    "CURL_CA_BUNDLE",
    "GIT_SSL_CAINFO",
    "AWS_CA_BUNDLE",
];
/// The variable naming the environment CA alone.
pub const CA_VARIABLE: &str = "AF_CA_CERT";

/// Why the CA or the bundle could not be made.
#[derive(Debug, thiserror::Error)]
pub enum TrustError {
    /// rcgen refused to make the CA.
    #[error("the environment CA could not be generated: {0}")]
    Generate(#[from] rcgen::Error),
    /// A stored CA could not be read back.
    #[error("the stored environment CA is not usable: {0}")]
    Stored(String),
    /// Neither the platform's store nor the fallback file gave any root certificate.
    #[error("no system root certificates were found: {0}")]
    NoSystemRoots(String),
}

/// Each service's variables for the CA files: `NAME=path`.
pub fn variables() -> Vec<String> {
    BUNDLE_VARIABLES
        .iter()
        .map(|name| format!("{name}={BUNDLE_PATH}"))
        .chain(std::iter::once(format!("{CA_VARIABLE}={CA_PATH}")))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_client_variable_names_the_bundle_and_af_ca_cert_the_ca_alone() {
        let vars = variables();
        for name in BUNDLE_VARIABLES {
            assert!(
                vars.contains(&format!("{name}=/etc/af/ca-bundle.pem")),
                "{name}: {vars:?}"
            );
        }
        assert!(vars.contains(&"AF_CA_CERT=/etc/af/ca.pem".to_owned()));
        assert_eq!(vars.len(), 7);
    }
}
