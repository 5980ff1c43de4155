//! The sidecar's configuration document for an environment, as every runtime writes it: built
//! from the plan, where the runtime put the sidecar ([`Placement`]) and the environment's
//! [`Secrets`]. The types are the contract's ([`af_sidecar_api::config`]); a runtime only
//! says where the document goes.
//!
//! The document holds the environment's secrets (the admin token, the CA's private key, test
//! credentials): a runtime keeps it where only the sidecar reads it, and reads the token and
//! CA back from there ([`Kept`]) for the next `af up` and for the admin API.

use std::collections::BTreeMap;
use std::fmt;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::time::SystemTime;

use af_sidecar_api::config::{Admin, GuardConfig, Inside, Limits, SidecarConfig, TlsConfig};
use ipnet::IpNet;
use serde::Deserialize;

use crate::env_id::EnvId;
use crate::plan::{EnvPlan, short_digest};
use crate::runtime::RuntimeError;
use crate::secret::{hex, random};
use crate::trust::EnvCa;
use crate::webhook::sign::hmac_sha256;

/// The sidecar's own name inside the environment, beside the services' names.
pub const ALIAS: &str = "af-sidecar";

/// Seconds a runtime lets the sidecar run after SIGTERM before it kills it (a stop, a
/// restart, a replacement): the document's drain deadline (left at its default), then up to
/// 2 s for the journal to commit, then a margin. Less, and the kill cuts the journal short.
pub const STOP_TIMEOUT_SECS: i32 = (Limits::DEFAULT_DRAIN_TIMEOUT_MS / 1000) as i32 + 2 + 3;

/// What only the sidecar holds and a later `af up` keeps: the admin token (the environment's
/// webhook secrets derive from it) and the environment CA.
#[derive(Clone)]
pub struct Secrets {
    /// The admin API's bearer token.
    pub token: String,
    /// The environment CA.
    pub ca: EnvCa,
}

impl fmt::Debug for Secrets {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Secrets")
            .field("ca", &self.ca)
            .finish_non_exhaustive()
    }
}

impl Secrets {
    /// The token the containment watchers report with: derived from the admin token, so it
    /// is as stable, and one-way, so a watcher's token opens nothing of the admin API.
    pub fn containment_token(&self) -> String {
        let mac = hmac_sha256(self.token.as_bytes(), &[b"af containment watchers"]);
        hex(&mac[..16])
    }

    /// The token and CA of `previous` (what the existing sidecar's document keeps), the CA only
    /// while it has at least two days left; whatever is missing is made anew.
    pub fn keep_or_make(
        previous: Option<&Kept>,
        env: &EnvId,
        now: SystemTime,
    ) -> Result<Secrets, RuntimeError> {
        let token = match previous.and_then(Kept::token) {
            Some(token) => token.to_owned(),
            None => new_token()?,
        };
        let ca = EnvCa::keep_or_renew(previous.and_then(Kept::ca), env, now)?;
        Ok(Secrets { token, ca })
    }
}

/// What a written document gives back: its admin section and its CA. Read without the rest,
/// so a document of another version still gives them.
#[derive(Debug, Clone, Deserialize)]
pub struct Kept {
    admin: Admin,
    #[serde(default)]
    tls: Option<TlsConfig>,
}

impl Kept {
    /// The token and CA of a document as the sidecar reads it, or `None` when it is not one.
    pub fn read(file: &[u8]) -> Option<Kept> {
        serde_json::from_slice(file).ok()
    }

    /// The admin token, if usable.
    pub fn token(&self) -> Option<&str> {
        Some(self.admin.token.as_str()).filter(|t| t.len() >= Admin::MIN_TOKEN_LEN)
    }

    /// The CA, if it reads back.
    fn ca(&self) -> Option<EnvCa> {
        let tls = self.tls.as_ref()?;
        EnvCa::from_pem(&tls.ca_cert_pem, &tls.ca_key_pem).ok()
    }
}

/// How the sidecar knows the environment's own names.
#[derive(Debug, Clone)]
pub enum InsideNames {
    /// Asked of the runtime's resolver (Docker's): the services' names and [`ALIAS`].
    Resolved,
    /// Given with the addresses the runtime made for them (a cluster's Services), answered by
    /// the sidecar itself and never asked of a resolver.
    Fixed(BTreeMap<String, Vec<IpAddr>>),
}

/// Where the runtime put the sidecar, and what it resolves outside names with.
#[derive(Debug, Clone)]
pub struct Placement<'a> {
    /// The environment's own networks (or, on a cluster, its exact addresses).
    pub inside: Vec<IpNet>,
    /// How the environment's names are found.
    pub names: InsideNames,
    /// The sidecar's address on it: the DNS answer for every outside name.
    pub inside_addr: Ipv4Addr,
    /// Where the admin API listens: an address the orchestrator reaches and the services do
    /// not.
    pub admin: SocketAddr,
    /// The runtime's resolver for the environment's own names (Docker's `127.0.0.11:53`).
    pub inside_resolver: SocketAddr,
    /// The resolver outside names are resolved against.
    pub upstream_resolver: &'a str,
    /// Networks the guard may dial although private (tests only; empty by default).
    pub trusted_networks: &'a [IpNet],
}

/// The sidecar's configuration document. What it does not set is the contract's default.
pub fn document(plan: &EnvPlan, place: &Placement<'_>, secrets: &Secrets) -> SidecarConfig {
    let admin = Admin {
        listen: place.admin,
        token: secrets.token.clone(),
    };
    let mut doc = SidecarConfig::new(
        plan.env.to_string(),
        plan.egress.clone(),
        place.upstream_resolver.to_owned(),
        admin,
    );
    doc.inside = match &place.names {
        InsideNames::Resolved => Inside {
            subnets: place.inside.clone(),
            names: plan
                .services
                .iter()
                .map(|s| s.name.clone())
                .chain([ALIAS.to_owned()])
                .collect(),
            hosts: BTreeMap::new(),
        },
        InsideNames::Fixed(hosts) => Inside {
            subnets: place.inside.clone(),
            names: Vec::new(),
            hosts: hosts.clone(),
        },
    };
    doc.guard = GuardConfig {
        trusted_networks: place.trusted_networks.to_vec(),
    };
    let dns = &mut doc.listeners.dns;
    dns.inside_resolver = Some(place.inside_resolver);
    dns.answer_v4 = Some(place.inside_addr);
    doc.tls = Some(TlsConfig {
        extra_upstream_roots_pem: plan.upstream_roots_pem.clone(),
        ..TlsConfig::new(
            secrets.ca.cert_pem().to_owned(),
            secrets.ca.key_pem().to_owned(),
        )
    });
    let modes = &mut doc.modes;
    modes.packs.clone_from(&plan.modes.packs);
    modes.openapi.clone_from(&plan.modes.openapi);
    modes.credentials.clone_from(&plan.modes.credentials.0);
    modes.model.clone_from(&plan.modes.model);
    doc
}

/// The digest of a document without its tokens and the CA's key (the CA is still in it
/// through its certificate), and of what the runtime makes the sidecar from (`runtime`: its
/// image, networks, confinement). A sidecar with another digest is replaced.
pub fn digest(doc: &SidecarConfig, runtime: &str) -> String {
    let mut d = doc.clone();
    d.admin.token.clear();
    if let Some(containment) = &mut d.containment {
        containment.token.clear();
    }
    if let Some(tls) = &mut d.tls {
        tls.ca_key_pem.clear();
    }
    let text = serde_json::to_string(&d).unwrap_or_default();
    short_digest(format!("{text}|{runtime}").as_bytes())
}

/// The document as the sidecar reads it (JSON).
pub fn file_bytes(doc: &SidecarConfig) -> Vec<u8> {
    serde_json::to_vec_pretty(doc).unwrap_or_default()
}

/// A fresh admin token: 32 hex digits from the kernel's random source.
pub fn new_token() -> Result<String, RuntimeError> {
    random::<16>()
        .map(|bytes| hex(&bytes))
        .map_err(|e| RuntimeError::engine("make an admin token", e))
}

#[cfg(test)]
mod tests {
    use af_policy::egress::{EgressSpec, Mode, RuleSpec};
    use serde_json::json;

    use super::*;
    use crate::modes::Credentials;

    fn plan() -> EnvPlan {
        let mut mock = RuleSpec::new("api.stripe.com", Mode::Mock);
        mock.fixtures = Some("mocks/stripe.yaml".to_owned());
        let egress = EgressSpec {
            rules: vec![mock],
            ..EgressSpec::default()
        };
        let mut plan = EnvPlan::new(
            EnvId::parse("shop-1").expect("id"),
            "shop",
            Vec::new(),
            egress,
        )
        .expect("plan");
        plan.modes
            .packs
            .insert("mocks/stripe.yaml".to_owned(), json!({"routes": []}));
        plan.modes.credentials =
            Credentials([("STRIPE_TEST_KEY".to_owned(), "sk_test_1".to_owned())].into());
        plan
    }

    fn doc(plan: &EnvPlan, secrets: &Secrets) -> SidecarConfig {
        let place = Placement {
            inside: vec!["10.213.0.0/24".parse().expect("net")],
            names: InsideNames::Resolved,
            inside_addr: Ipv4Addr::new(10, 213, 0, 2),
            admin: SocketAddr::from(([10, 213, 1, 2], 9901)),
            inside_resolver: SocketAddr::from(([127, 0, 0, 11], 53)),
            upstream_resolver: "127.0.0.11:53",
            trusted_networks: &[],
        };
        document(plan, &place, secrets)
    }

    fn secrets(plan: &EnvPlan) -> Secrets {
        Secrets::keep_or_make(None, &plan.env, SystemTime::now()).expect("secrets")
    }

    /// What the runtime reads back from the file it wrote.
    fn kept(doc: &SidecarConfig) -> Kept {
        Kept::read(&file_bytes(doc)).expect("a document")
    }

    #[test]
    fn the_watchers_token_is_stable_apart_from_the_admin_token_and_kept_out_of_the_digest() {
        let plan = plan();
        let secrets = secrets(&plan);
        let token = secrets.containment_token();
        assert_eq!(token, secrets.containment_token());
        assert_eq!(token.len(), 32);
        assert_ne!(token, secrets.token);
        assert!(!token.contains(&secrets.token) && !secrets.token.contains(&token));
        let mut with = doc(&plan, &secrets);
        with.containment = Some(af_sidecar_api::config::Containment::new(token));
        let mut other = with.clone();
        if let Some(c) = &mut other.containment {
            c.token = "another-token-0123456789".to_owned();
        }
        assert_eq!(digest(&with, "img"), digest(&other, "img"));
    }

    #[test]
    fn the_document_carries_the_ca_the_modes_inputs_and_the_smtp_listener() {
        let plan = plan();
        let s = secrets(&plan);
        let d = doc(&plan, &s);
        let tls = d.tls.as_ref().expect("tls");
        assert_eq!(tls.ca_cert_pem, s.ca.cert_pem());
        assert_eq!(tls.ca_key_pem, s.ca.key_pem());
        assert_eq!(tls.leaf_cache, 1024);
        assert_eq!(d.modes.packs["mocks/stripe.yaml"], json!({"routes": []}));
        assert!(d.modes.openapi.is_empty());
        assert_eq!(d.modes.credentials["STRIPE_TEST_KEY"], "sk_test_1");
        let smtp: Vec<String> = d
            .listeners
            .smtp
            .listen
            .iter()
            .map(|a| a.to_string())
            .collect();
        assert_eq!(smtp, ["0.0.0.0:25", "0.0.0.0:587", "0.0.0.0:2525"]);
        assert_eq!(
            d.listeners.dns.answer_v4,
            Some(Ipv4Addr::new(10, 213, 0, 2))
        );
        assert_eq!(d.admin.token, s.token);
        assert_eq!(
            d.egress.rules[0].fixtures.as_deref(),
            Some("mocks/stripe.yaml")
        );
    }

    #[test]
    fn the_upstream_roots_the_manifest_names_reach_the_sidecar_and_its_digest() {
        let mut plan = plan();
        let s = secrets(&plan);
        let without = doc(&plan, &s);
        assert_eq!(
            without.tls.as_ref().expect("tls").extra_upstream_roots_pem,
            None
        );
        let internal = Secrets::keep_or_make(None, &plan.env, SystemTime::now()).expect("a CA");
        plan.upstream_roots_pem = Some(internal.ca.cert_pem().to_owned());
        let with = doc(&plan, &s);
        let carried = with
            .tls
            .as_ref()
            .expect("tls")
            .extra_upstream_roots_pem
            .as_deref();
        assert_eq!(carried, Some(internal.ca.cert_pem()));
        let read_back = Kept::read(&file_bytes(&with)).expect("a document");
        assert_eq!(
            read_back
                .tls
                .and_then(|t| t.extra_upstream_roots_pem)
                .as_deref(),
            Some(internal.ca.cert_pem()),
            "the file the sidecar reads carries them"
        );
        assert_ne!(
            digest(&with, "img"),
            digest(&without, "img"),
            "other roots replace the sidecar"
        );
    }

    #[test]
    fn a_second_up_keeps_the_token_and_ca_so_the_digest_is_unchanged() {
        let plan = plan();
        let first = secrets(&plan);
        let written = doc(&plan, &first);
        let kept = Secrets::keep_or_make(Some(&kept(&written)), &plan.env, SystemTime::now())
            .expect("kept");
        assert_eq!(kept.token, first.token);
        assert_eq!(kept.ca, first.ca);
        let again = doc(&plan, &kept);
        assert_eq!(digest(&again, "img"), digest(&written, "img"));
    }

    #[test]
    fn the_digest_ignores_the_secrets_but_not_the_ca_or_the_inputs() {
        let plan = plan();
        let a = secrets(&plan);
        let b = Secrets {
            token: "another-token-0123456789".to_owned(),
            ca: a.ca.clone(),
        };
        let base = digest(&doc(&plan, &a), "img");
        assert_eq!(base, digest(&doc(&plan, &b), "img"), "token");
        let renewed = secrets(&plan);
        assert_ne!(base, digest(&doc(&plan, &renewed), "img"), "a new CA");
        let mut changed = plan.clone();
        changed
            .modes
            .credentials
            .0
            .insert("STRIPE_TEST_KEY".to_owned(), "sk_test_2".to_owned());
        assert_ne!(base, digest(&doc(&changed, &a), "img"), "a new credential");
    }

    #[test]
    fn an_expiring_or_unreadable_stored_ca_is_replaced_and_the_token_kept() {
        let plan = plan();
        let now = SystemTime::now();
        let old = Secrets {
            token: "kept-token-0123456789abcdef".to_owned(),
            ca: EnvCa::generate(
                &plan.env,
                now - std::time::Duration::from_secs(6 * 24 * 3600),
            )
            .expect("old CA"),
        };
        let written = doc(&plan, &old);
        let next = Secrets::keep_or_make(Some(&kept(&written)), &plan.env, now).expect("renewed");
        assert_eq!(next.token, old.token);
        assert_ne!(next.ca, old.ca);
        assert!(next.ca.is_fresh(now));

        let mut broken = written.clone();
        if let Some(tls) = &mut broken.tls {
            tls.ca_key_pem = "garbage".to_owned();
        }
        broken.admin.token = "short".to_owned();
        let fresh = Secrets::keep_or_make(Some(&kept(&broken)), &plan.env, now).expect("fresh");
        assert_ne!(fresh.token, "short");
        assert_eq!(fresh.token.len(), 32);
        assert!(!format!("{fresh:?}").contains(&fresh.token));
    }

    #[test]
    fn a_document_of_another_version_still_gives_back_its_token_and_ca() {
        let plan = plan();
        let s = secrets(&plan);
        let mut newer = doc(&plan, &s);
        newer.version = 2;
        let file = String::from_utf8(file_bytes(&newer))
            .expect("UTF-8")
            .replacen('{', "{\"a_later_section\": {},", 1);
        let kept = Kept::read(file.as_bytes()).expect("kept");
        let again = Secrets::keep_or_make(Some(&kept), &plan.env, SystemTime::now()).expect("s");
        assert_eq!((again.token, again.ca), (s.token, s.ca));
        assert!(Kept::read(b"not json").is_none());
    }
}
