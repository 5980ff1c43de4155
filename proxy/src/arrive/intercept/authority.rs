//! The environment's certificate authority inside the sidecar: leaf certificates minted on
//! demand for the names clients ask for, kept in a bounded least-recently-used cache.
//!
//! Leaves are valid from an hour ago for seven days, never beyond the CA. One key pair (ECDSA P-256, made at start, never written anywhere) serves every leaf: minting
//! is then one signature (~0.3 ms), so a client naming many hosts cannot make the sidecar do
//! expensive work, and the cache bound keeps memory flat (evictions are counted).

use std::num::NonZeroUsize;
use std::sync::{Arc, Mutex};

use lru::LruCache;
use rcgen::{
    CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, Issuer, KeyPair,
    KeyUsagePurpose,
};
use rustls::crypto::CryptoProvider;
use rustls::sign::CertifiedKey;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use time::{Duration, OffsetDateTime};

use crate::metrics::Metrics;

/// How long a minted leaf is valid (never beyond the CA's own end).
const LEAF_VALIDITY: Duration = Duration::days(7);
/// How far back a leaf's validity starts, for clients whose clocks lag.
const CLOCK_SKEW: Duration = Duration::hours(1);

/// Why the authority could not be loaded or a leaf minted.
#[derive(Debug, thiserror::Error)]
pub(crate) enum AuthorityError {
    /// The configured CA certificate or key is unusable.
    #[error("the environment CA in tls.ca_cert_pem / tls.ca_key_pem is unusable: {0}")]
    Ca(String),
    /// A leaf could not be made for a name.
    #[error("no certificate could be made for {name}: {error}")]
    Leaf { name: String, error: String },
}

/// The environment CA and the leaves it has minted.
pub(crate) struct Authority {
    issuer: Issuer<'static, KeyPair>,
    ca_der: CertificateDer<'static>,
    ca_not_after: OffsetDateTime,
    leaf_key: KeyPair,
    signing_key: Arc<dyn rustls::sign::SigningKey>,
    cache: Mutex<LruCache<Box<str>, Arc<CertifiedKey>>>,
    metrics: Arc<Metrics>,
}

impl Authority {
    /// Load the CA from PEM and make the leaf key; `cache` leaves are kept at most.
    pub(crate) fn load(
        ca_cert_pem: &str,
        ca_key_pem: &str,
        cache: usize,
        provider: &CryptoProvider,
        metrics: Arc<Metrics>,
    ) -> Result<Self, AuthorityError> {
        let ca_err = |e: &dyn std::fmt::Display| AuthorityError::Ca(e.to_string());
        let ca_key = KeyPair::from_pem(ca_key_pem).map_err(|e| ca_err(&e))?;
        let ca_der = CertificateDer::from_pem_slice(ca_cert_pem.as_bytes())
            .map_err(|e| ca_err(&e))?
            .into_owned();
        let (_, parsed) = x509_parser::parse_x509_certificate(&ca_der).map_err(|e| ca_err(&e))?;
        let ca_not_after =
            OffsetDateTime::from_unix_timestamp(parsed.validity().not_after.timestamp())
                .map_err(|e| ca_err(&e))?;
        if ca_not_after <= OffsetDateTime::now_utc() {
            return Err(AuthorityError::Ca(format!(
                "the CA expired at {ca_not_after}; af up makes a new one"
            )));
        }
        let issuer = Issuer::from_ca_cert_der(&ca_der, ca_key).map_err(|e| ca_err(&e))?;
        let leaf_key =
            KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).map_err(|e| ca_err(&e))?;
        let der = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(leaf_key.serialize_der()));
        let signing_key = provider
            .key_provider
            .load_private_key(der)
            .map_err(|e| ca_err(&e))?;
        let cache = NonZeroUsize::new(cache)
            .ok_or_else(|| AuthorityError::Ca("tls.leaf_cache must be at least 1".into()))?;
        Ok(Self {
            issuer,
            ca_der,
            ca_not_after,
            leaf_key,
            signing_key,
            cache: Mutex::new(LruCache::new(cache)),
            metrics,
        })
    }

    /// The leaf for `name` (a DNS name or an IP literal): from the cache, or minted now.
    pub(crate) fn leaf(&self, name: &str) -> Result<Arc<CertifiedKey>, AuthorityError> {
        let name = name.trim_end_matches('.').to_ascii_lowercase();
        if let Some(hit) = self.lock().get(name.as_str()) {
            return Ok(hit.clone());
        }
        // Minted outside the lock: two clients racing on a new name both mint, one wins.
        let leaf = Arc::new(self.mint(&name)?);
        self.metrics.leaf_minted();
        let pushed = self
            .lock()
            .push(name.clone().into_boxed_str(), leaf.clone());
        if pushed.is_some_and(|(old, _)| *old != *name) {
            self.metrics.leaf_evicted();
        }
        Ok(leaf)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, LruCache<Box<str>, Arc<CertifiedKey>>> {
        self.cache.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn mint(&self, name: &str) -> Result<CertifiedKey, AuthorityError> {
        let leaf_err = |e: &dyn std::fmt::Display| AuthorityError::Leaf {
            name: name.to_owned(),
            error: e.to_string(),
        };
        let mut params = CertificateParams::new(vec![name.to_owned()]).map_err(|e| leaf_err(&e))?;
        let mut dn = DistinguishedName::new();
        dn.push(DnType::CommonName, name);
        params.distinguished_name = dn;
        let now = OffsetDateTime::now_utc();
        params.not_before = now - CLOCK_SKEW;
        // Never valid beyond the CA that signs it.
        params.not_after = (now + LEAF_VALIDITY).min(self.ca_not_after);
        params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        params.use_authority_key_identifier_extension = true;
        let cert = params
            .signed_by(&self.leaf_key, &self.issuer)
            .map_err(|e| leaf_err(&e))?;
        Ok(CertifiedKey::new(
            vec![cert.der().clone(), self.ca_der.clone()],
            self.signing_key.clone(),
        ))
    }
}

impl std::fmt::Debug for Authority {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Authority")
            .field("cached_leaves", &self.lock().len())
            .finish_non_exhaustive()
    }
}
