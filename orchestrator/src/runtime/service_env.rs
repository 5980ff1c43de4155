//! What every runtime gives each service of an environment besides its own configuration:
//! the variables that send its traffic through the sidecar, say who it is, point at the CA
//! files and carry the webhook secrets.

use std::net::Ipv4Addr;

use af_sidecar_api::config::ProxyListener;

use crate::plan::{EnvPlan, ServicePlan, short_digest};
use crate::trust::{self, TrustFiles};
use crate::webhook::WebhookSecrets;

/// What every service of the environment is given besides its own configuration.
#[derive(Debug, Clone, Copy)]
pub struct Provisions<'a> {
    /// The CA files.
    pub trust: &'a TrustFiles,
    /// The webhook secrets.
    pub webhooks: &'a WebhookSecrets,
}

impl Provisions<'_> {
    /// A digest of what the services are given: a service given something else is replaced.
    pub fn digest(&self) -> String {
        short_digest(format!("{}|{}", self.trust.digest(), self.webhooks.digest()).as_bytes())
    }
}

/// One variable of a service.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Variable {
    /// Its name.
    pub name: String,
    /// Its value.
    pub value: String,
    /// Whether the value is a secret of the environment's (a runtime that can keep it out of
    /// the service's definition does: a cluster puts it in a Secret).
    pub secret: bool,
}

/// The environment variables of a service as `NAME=value`, in the order of [`variables`].
pub fn environment(
    plan: &EnvPlan,
    service: &ServicePlan,
    sidecar: Ipv4Addr,
    provisions: Provisions<'_>,
) -> Vec<String> {
    variables(plan, service, sidecar, provisions)
        .into_iter()
        .map(|v| format!("{}={}", v.name, v.value))
        .collect()
}

/// The environment's secret variables every service gets (the webhook secrets), by name.
pub fn secrets(provisions: Provisions<'_>) -> Vec<Variable> {
    provisions
        .webhooks
        .variables()
        .iter()
        .filter_map(|pair| split(pair, true))
        .collect()
}

fn split(pair: &str, secret: bool) -> Option<Variable> {
    let (name, value) = pair.split_once('=')?;
    Some(Variable {
        name: name.to_owned(),
        value: value.to_owned(),
        secret,
    })
}

/// The environment variables of a service, in order: proxy, identity, CA files, webhook
/// secrets (marked secret), port, then the manifest's (which may override any of them: a
/// later variable of the same name wins).
pub fn variables(
    plan: &EnvPlan,
    service: &ServicePlan,
    sidecar: Ipv4Addr,
    provisions: Provisions<'_>,
) -> Vec<Variable> {
    let proxy = format!("http://{sidecar}:{}", ProxyListener::DEFAULT_PORT);
    let mut no_proxy = vec![
        "localhost".to_owned(),
        "127.0.0.1".to_owned(),
        "::1".to_owned(),
    ];
    no_proxy.extend(plan.services.iter().map(|s| s.name.clone()));
    let no_proxy = no_proxy.join(",");
    let mut env = vec![
        format!("HTTP_PROXY={proxy}"),
        format!("HTTPS_PROXY={proxy}"),
        format!("http_proxy={proxy}"),
        format!("https_proxy={proxy}"),
        format!("NO_PROXY={no_proxy}"),
        format!("no_proxy={no_proxy}"),
        format!("AF_ENV_ID={}", plan.env),
        format!("AF_SERVICE={}", service.name),
    ];
    env.extend(trust::variables());
    let mut vars: Vec<Variable> = env.iter().filter_map(|p| split(p, false)).collect();
    vars.extend(secrets(provisions));
    if let Some(port) = service.port {
        vars.extend(split(&format!("PORT={port}"), false));
    }
    vars.extend(service.env.iter().map(|(k, v)| Variable {
        name: k.clone(),
        value: v.clone(),
        secret: false,
    }));
    vars
}

#[cfg(test)]
mod tests {
    use std::time::SystemTime;

    use af_policy::egress::EgressSpec;

    use super::*;
    use crate::env_id::EnvId;
    use crate::plan::Kind;
    use crate::trust::EnvCa;

    #[test]
    fn a_service_gets_proxy_identity_ca_and_webhook_variables_before_its_own() {
        let env = EnvId::parse("shop-1").expect("id");
        let mut web = ServicePlan::new("web", Kind::Web, "/x");
        web.port = Some(8080);
        web.env
            .insert("SSL_CERT_FILE".to_owned(), "/mine.pem".to_owned());
        let plan =
            EnvPlan::new(env.clone(), "shop", vec![web], EgressSpec::default()).expect("plan");
        let ca = EnvCa::generate(&env, SystemTime::now()).expect("CA");
        let trust = TrustFiles::new("", &ca);
        let webhooks = WebhookSecrets::derive("0123456789abcdef0123");
        let provisions = Provisions {
            trust: &trust,
            webhooks: &webhooks,
        };
        let vars = environment(
            &plan,
            &plan.services[0],
            Ipv4Addr::new(10, 0, 0, 2),
            provisions,
        );
        let position = |prefix: &str| {
            vars.iter()
                .position(|v| v.starts_with(prefix))
                .unwrap_or_else(|| panic!("{prefix}: {vars:?}"))
        };
        for name in trust::BUNDLE_VARIABLES {
            assert!(
                vars.contains(&format!("{name}=/etc/af/ca-bundle.pem")),
                "{name}"
            );
        }
        assert!(vars.contains(&"AF_CA_CERT=/etc/af/ca.pem".to_owned()));
        assert!(vars.contains(&format!(
            "STRIPE_WEBHOOK_SECRET={}",
            webhooks.get(crate::webhook::Provider::Stripe)
        )));
        assert!(position("HTTP_PROXY=") < position("SSL_CERT_FILE=/etc/af"));
        assert!(position("AF_CA_CERT=") < position("SVIX_WEBHOOK_SECRET="));
        assert!(
            position("SSL_CERT_FILE=/etc/af") < position("SSL_CERT_FILE=/mine.pem"),
            "the manifest's own value comes last, so it wins"
        );
        let secret: Vec<String> = variables(
            &plan,
            &plan.services[0],
            Ipv4Addr::new(10, 0, 0, 2),
            provisions,
        )
        .into_iter()
        .filter(|v| v.secret)
        .map(|v| format!("{}={}", v.name, v.value))
        .collect();
        assert_eq!(
            secret,
            webhooks.variables(),
            "the webhook secrets, and only they"
        );
        let other = WebhookSecrets::derive("another-token-456789");
        let changed = Provisions {
            trust: &trust,
            webhooks: &other,
        };
        assert_ne!(provisions.digest(), changed.digest());
    }
}
