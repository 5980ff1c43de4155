//! The environment CA an intercepting af-proxy mints its leaf certificates from, made the
//! way the orchestrator makes it: ECDSA P-256, a CA for leaves only (path length 0).

use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, KeyPair, KeyUsagePurpose};

use crate::error::{BenchError, Result};

/// A fresh environment CA, as PEM.
#[derive(Debug, Clone)]
pub(super) struct EnvironmentCa {
    /// The CA certificate (PEM): what the load generator trusts.
    pub cert_pem: String,
    /// The CA's private key (PKCS#8 PEM): only af-proxy's configuration holds it.
    pub key_pem: String,
}

impl EnvironmentCa {
    /// Generates a new CA with a new key.
    pub(super) fn generate() -> Result<Self> {
        let tls = |e: rcgen::Error| BenchError::Tls(format!("environment CA: {e}"));
        let key = KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).map_err(tls)?;
        let mut params = CertificateParams::default();
        params
            .distinguished_name
            .push(DnType::CommonName, "af bench environment CA");
        params.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
        params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
        let cert = params.self_signed(&key).map_err(tls)?;
        Ok(Self {
            cert_pem: cert.pem(),
            key_pem: key.serialize_pem(),
        })
    }
}

#[cfg(test)]
mod tests {
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer};

    use super::*;

    #[test]
    fn a_generated_ca_is_a_trust_anchor_with_a_p256_key_rustls_loads() {
        let ca = EnvironmentCa::generate().expect("generate");
        let der = CertificateDer::from_pem_slice(ca.cert_pem.as_bytes()).expect("cert PEM");
        let mut roots = rustls::RootCertStore::empty();
        roots.add(der).expect("usable as a root");
        let key = PrivateKeyDer::from_pem_slice(ca.key_pem.as_bytes()).expect("key PEM");
        let signer = rustls::crypto::ring::default_provider()
            .key_provider
            .load_private_key(key)
            .expect("rustls loads the key");
        assert_eq!(signer.algorithm(), rustls::SignatureAlgorithm::ECDSA);
        let other = EnvironmentCa::generate().expect("generate");
        assert_ne!(ca.key_pem, other.key_pem, "every CA gets its own key");
    }
}
