//! The environment CA: ECDSA P-256, a CA for end-entity certificates only (path length 0),
//! valid for a week and renewed by `af up` when less than two days remain.
//!
//! Its private key lives only in the sidecar's configuration; a later `af up` reads it back
//! from there (see `runtime::local::sidecar`), never from a file on this machine.

use std::fmt;
use std::time::{Duration, SystemTime};

use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, IsCa, KeyPair, KeyUsagePurpose,
    PKCS_ECDSA_P256_SHA256, PublicKeyData,
};

use super::TrustError;
use crate::env_id::EnvId;

/// How long a new CA is valid.
pub const VALIDITY: Duration = Duration::from_secs(7 * 24 * 3600);
/// A CA with less than this left is replaced by the next `af up`.
pub const RENEW_WITHIN: Duration = Duration::from_secs(2 * 24 * 3600);
/// How far before "now" a new CA starts being valid, for clocks slightly behind this one.
const BACKDATE: Duration = Duration::from_secs(3600);

/// One environment's certificate authority.
#[derive(Clone, PartialEq, Eq)]
pub struct EnvCa {
    cert_pem: String,
    key_pem: String,
    not_after: SystemTime,
}

impl fmt::Debug for EnvCa {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Never the key.
        f.debug_struct("EnvCa")
            .field("not_after", &self.not_after)
            .finish_non_exhaustive()
    }
}

impl EnvCa {
    /// A new CA for `env`, valid from (just before) `now` for [`VALIDITY`].
    pub fn generate(env: &EnvId, now: SystemTime) -> Result<EnvCa, TrustError> {
        let key = KeyPair::generate_for(&PKCS_ECDSA_P256_SHA256)?;
        let mut params = CertificateParams::default();
        let mut name = DistinguishedName::new();
        name.push(DnType::CommonName, format!("af {env} environment CA"));
        params.distinguished_name = name;
        params.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
        params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
        let not_before = now.checked_sub(BACKDATE).unwrap_or(now);
        let not_after = now + VALIDITY;
        params.not_before = not_before.into();
        params.not_after = not_after.into();
        let cert = params.self_signed(&key)?;
        // The certificate stores whole seconds; read it back so `not_after` is what it says.
        EnvCa::from_pem(&cert.pem(), &key.serialize_pem())
    }

    /// A CA as stored in the sidecar's configuration: the certificate must parse and carry the
    /// key's public half.
    pub fn from_pem(cert_pem: &str, key_pem: &str) -> Result<EnvCa, TrustError> {
        let stored = |what: &str| TrustError::Stored(what.to_owned());
        let (_, pem) = x509_parser::pem::parse_x509_pem(cert_pem.as_bytes())
            .map_err(|e| stored(&format!("the certificate is not PEM: {e}")))?;
        let cert = pem
            .parse_x509()
            .map_err(|e| stored(&format!("the certificate does not parse: {e}")))?;
        let key = KeyPair::from_pem(key_pem)
            .map_err(|e| stored(&format!("the key does not parse: {e}")))?;
        if cert.public_key().subject_public_key.data.as_ref() != key.der_bytes() {
            return Err(stored("the key is not the certificate's"));
        }
        let not_after = u64::try_from(cert.validity().not_after.timestamp())
            .map(|secs| SystemTime::UNIX_EPOCH + Duration::from_secs(secs))
            .map_err(|_| stored("the certificate expired before 1970"))?;
        Ok(EnvCa {
            cert_pem: cert_pem.to_owned(),
            key_pem: key_pem.to_owned(),
            not_after,
        })
    }

    /// The previous CA while it has at least [`RENEW_WITHIN`] left, otherwise a new one.
    pub fn keep_or_renew(
        previous: Option<EnvCa>,
        env: &EnvId,
        now: SystemTime,
    ) -> Result<EnvCa, TrustError> {
        match previous {
            Some(ca) if ca.is_fresh(now) => Ok(ca),
            _ => EnvCa::generate(env, now),
        }
    }

    /// Whether at least [`RENEW_WITHIN`] of its validity is left at `now`.
    pub fn is_fresh(&self, now: SystemTime) -> bool {
        self.not_after
            .duration_since(now)
            .is_ok_and(|left| left >= RENEW_WITHIN)
    }

    /// The certificate (PEM): what services trust.
    pub fn cert_pem(&self) -> &str {
        &self.cert_pem
    }

    /// The private key (PKCS#8 PEM): only ever written into the sidecar's configuration.
    pub fn key_pem(&self) -> &str {
        &self.key_pem
    }

    /// When it stops being valid.
    pub fn not_after(&self) -> SystemTime {
        self.not_after
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use x509_parser::extensions::ParsedExtension;
    use x509_parser::oid_registry::{
        OID_EC_P256, OID_KEY_TYPE_EC_PUBLIC_KEY, OID_SIG_ECDSA_WITH_SHA256,
    };

    fn env() -> EnvId {
        EnvId::parse("shop-main-1a2b3c").expect("id")
    }

    fn at(secs: u64) -> SystemTime {
        SystemTime::UNIX_EPOCH + Duration::from_secs(secs)
    }

    const NOW: u64 = 1_750_000_000;

    #[test]
    fn a_new_ca_is_a_p256_path_length_zero_ca_valid_for_a_week() {
        let ca = EnvCa::generate(&env(), at(NOW)).expect("generate");
        let (_, pem) = x509_parser::pem::parse_x509_pem(ca.cert_pem().as_bytes()).expect("PEM");
        let cert = pem.parse_x509().expect("X.509");

        assert_eq!(
            cert.subject()
                .iter_common_name()
                .next()
                .and_then(|cn| cn.as_str().ok()),
            Some("af shop-main-1a2b3c environment CA")
        );
        assert_eq!(cert.subject(), cert.issuer(), "self-signed");
        assert_eq!(
            cert.signature_algorithm.algorithm,
            OID_SIG_ECDSA_WITH_SHA256
        );
        let spki = &cert.public_key().algorithm;
        assert_eq!(spki.algorithm, OID_KEY_TYPE_EC_PUBLIC_KEY);
        let curve = spki
            .parameters
            .as_ref()
            .and_then(|p| p.as_oid().ok())
            .expect("named curve");
        assert_eq!(curve, OID_EC_P256);

        let constraints = cert
            .basic_constraints()
            .expect("one basicConstraints")
            .expect("present");
        assert!(constraints.critical);
        assert!(constraints.value.ca);
        assert_eq!(constraints.value.path_len_constraint, Some(0));
        let usage = cert.key_usage().expect("one keyUsage").expect("present");
        assert!(usage.value.key_cert_sign() && usage.value.crl_sign());
        assert!(!usage.value.digital_signature() && !usage.value.key_encipherment());

        let validity = cert.validity();
        assert_eq!(validity.not_after.timestamp(), (NOW + 7 * 24 * 3600) as i64);
        assert!(validity.not_before.timestamp() < NOW as i64);
        assert_eq!(ca.not_after(), at(NOW + 7 * 24 * 3600));
        assert!(
            cert.extensions().iter().any(|e| matches!(
                e.parsed_extension(),
                ParsedExtension::SubjectKeyIdentifier(_)
            )),
            "clients chain leaves to it by key identifier"
        );

        let key = KeyPair::from_pem(ca.key_pem()).expect("PKCS#8 key");
        assert_eq!(key.algorithm(), &PKCS_ECDSA_P256_SHA256);
        assert!(ca.key_pem().starts_with("-----BEGIN PRIVATE KEY-----"));
    }

    #[test]
    fn a_stored_ca_reads_back_and_is_kept_until_two_days_are_left() {
        let ca = EnvCa::generate(&env(), at(NOW)).expect("generate");
        let back = EnvCa::from_pem(ca.cert_pem(), ca.key_pem()).expect("reads back");
        assert_eq!(back, ca);

        let five_days_later = at(NOW + 5 * 24 * 3600);
        let kept = EnvCa::keep_or_renew(Some(back.clone()), &env(), five_days_later).expect("keep");
        assert_eq!(kept, ca, "exactly two days left: kept");

        let later = at(NOW + 5 * 24 * 3600 + 1);
        let renewed = EnvCa::keep_or_renew(Some(back), &env(), later).expect("renew");
        assert_ne!(renewed.cert_pem(), ca.cert_pem());
        assert_eq!(renewed.not_after(), at(NOW + 12 * 24 * 3600 + 1));

        let first = EnvCa::keep_or_renew(None, &env(), at(NOW)).expect("new");
        assert!(first.is_fresh(at(NOW)));
    }

    #[test]
    fn a_key_that_is_not_the_certificates_is_refused() {
        let a = EnvCa::generate(&env(), at(NOW)).expect("a");
        let b = EnvCa::generate(&env(), at(NOW)).expect("b");
        let err = EnvCa::from_pem(a.cert_pem(), b.key_pem()).expect_err("mismatch");
        assert!(err.to_string().contains("not the certificate's"), "{err}");
        assert!(EnvCa::from_pem("not pem", a.key_pem()).is_err());
        assert!(EnvCa::from_pem(a.cert_pem(), "not pem").is_err());
    }

    #[test]
    fn debug_never_shows_the_key() {
        let ca = EnvCa::generate(&env(), at(NOW)).expect("generate");
        let shown = format!("{ca:?}");
        assert!(!shown.contains("PRIVATE KEY") && !shown.contains(&ca.key_pem()[30..60]));
    }
}
