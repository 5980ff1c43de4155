//! Where a webhook goes: which service, on its port, at which path.

use super::{Provider, WebhookError};
use crate::plan::{EnvPlan, Kind};

/// A service's port and path to deliver to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    /// The service name.
    pub service: String,
    /// Its port.
    pub port: u16,
    /// The path, from `/`.
    pub path: String,
}

impl std::fmt::Display for Target {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}{}", self.service, self.port, self.path)
    }
}

/// The target: `service` (default: the only web service with a port) and `path` (default:
/// the `webhook_path` of the first egress rule for a host of the provider's domain, else
/// `/webhooks/<provider>`).
pub fn resolve(
    plan: &EnvPlan,
    provider: Provider,
    service: Option<&str>,
    path: Option<&str>,
) -> Result<Target, WebhookError> {
    let names = || {
        plan.services
            .iter()
            .map(|s| s.name.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    };
    let chosen = match service {
        Some(name) => plan.service(name).ok_or_else(|| {
            WebhookError::target(
                format!("There is no service {name}; the services are {}", names()),
                "Pass --service with one of the services named above.",
            )
        })?,
        None => {
            let web: Vec<_> = plan
                .services
                .iter()
                .filter(|s| s.kind == Kind::Web && s.port.is_some())
                .collect();
            match web.as_slice() {
                [only] => *only,
                [] => {
                    return Err(WebhookError::target(
                        format!(
                            "No web service has a port to deliver to; the services are {}",
                            names()
                        ),
                        "Pass --service NAME of a service with a port, or give the receiving service `kind: web` and a `port` in af.yaml.",
                    ));
                }
                several => {
                    let listed: Vec<&str> = several.iter().map(|s| s.name.as_str()).collect();
                    return Err(WebhookError::target(
                        format!(
                            "Several web services could take the webhook ({})",
                            listed.join(", ")
                        ),
                        "Pass --service NAME with the one that receives it.",
                    ));
                }
            }
        }
    };
    let port = chosen.port.ok_or_else(|| {
        WebhookError::target(
            format!("Service {} has no port to deliver to", chosen.name),
            "Give it a port in af.yaml or pass another --service.",
        )
    })?;
    let path = match path {
        Some(p) if p.starts_with('/') => p.to_owned(),
        Some(p) => {
            return Err(WebhookError::target(
                format!("--path {p:?} must start with /"),
                "Give the path from its first slash, e.g. --path /webhooks/stripe.",
            ));
        }
        None => configured_path(plan, provider)
            .unwrap_or_else(|| format!("/webhooks/{}", provider.name())),
    };
    Ok(Target {
        service: chosen.name.clone(),
        port,
        path,
    })
}

/// The `webhook_path` of the first rule whose host pattern is in the provider's domain
/// (`api.stripe.com`, `*.stripe.com`, `api.stripe.com:443`, ...).
fn configured_path(plan: &EnvPlan, provider: Provider) -> Option<String> {
    let domain = provider.domain();
    let subdomain = format!(".{domain}");
    plan.egress.rules.iter().find_map(|rule| {
        let host = pattern_name(&rule.host).to_ascii_lowercase();
        let host = host.trim_end_matches('.');
        let host = host.strip_prefix("*.").unwrap_or(host);
        let ours = host == domain || host.ends_with(&subdomain);
        ours.then(|| rule.webhook_path.clone()).flatten()
    })
}

/// A rule's host pattern without its `:port`.
fn pattern_name(pattern: &str) -> &str {
    match pattern.rsplit_once(':') {
        Some((name, port)) if !name.contains(':') && port.bytes().all(|b| b.is_ascii_digit()) => {
            name
        }
        _ => pattern,
    }
}

#[cfg(test)]
mod tests {
    use af_policy::egress::{EgressSpec, Mode, RuleSpec};

    use super::*;
    use crate::env_id::EnvId;
    use crate::plan::ServicePlan;

    fn plan(services: Vec<ServicePlan>, rules: Vec<RuleSpec>) -> EnvPlan {
        let egress = EgressSpec {
            rules,
            ..EgressSpec::default()
        };
        EnvPlan::new(EnvId::parse("t").expect("id"), "p", services, egress).expect("plan")
    }

    fn web(name: &str, port: u16) -> ServicePlan {
        let mut s = ServicePlan::new(name, Kind::Web, "/x");
        s.port = Some(port);
        s
    }

    #[test]
    fn the_only_web_service_and_the_rules_webhook_path_are_the_defaults() {
        let worker = ServicePlan::new("jobs", Kind::Worker, "/x");
        let mut stripe = RuleSpec::new("api.stripe.com:443", Mode::Mock);
        stripe.webhook_path = Some("/hooks/stripe".to_owned());
        let p = plan(vec![worker, web("web", 8080)], vec![stripe]);
        let t = resolve(&p, Provider::Stripe, None, None).expect("target");
        assert_eq!(t.to_string(), "web:8080/hooks/stripe");
        let gh = resolve(&p, Provider::Github, None, None).expect("github");
        assert_eq!(
            gh.path, "/webhooks/github",
            "no github rule: the default path"
        );
        let given = resolve(&p, Provider::Github, Some("web"), Some("/gh")).expect("given");
        assert_eq!(given.path, "/gh");
    }

    #[test]
    fn a_wildcard_rule_of_the_domain_names_the_path_and_other_domains_do_not() {
        let mut other = RuleSpec::new("api.notstripe.com", Mode::Allow);
        other.webhook_path = Some("/wrong".to_owned());
        let mut svix = RuleSpec::new("*.svix.com", Mode::Capture);
        svix.webhook_path = Some("/svix".to_owned());
        let p = plan(vec![web("api", 3000)], vec![other, svix]);
        assert_eq!(
            resolve(&p, Provider::Stripe, None, None)
                .expect("stripe")
                .path,
            "/webhooks/stripe"
        );
        assert_eq!(
            resolve(&p, Provider::Svix, None, None).expect("svix").path,
            "/svix"
        );
    }

    #[test]
    fn no_or_several_web_services_or_an_unknown_one_are_refused_with_the_names() {
        let p = plan(vec![web("a", 1), web("b", 2)], Vec::new());
        let err = resolve(&p, Provider::Stripe, None, None).expect_err("several");
        assert!(err.to_string().contains("(a, b)"), "{err}");
        assert_eq!(
            resolve(&p, Provider::Stripe, Some("b"), None)
                .expect("b")
                .port,
            2
        );
        let err = resolve(&p, Provider::Stripe, Some("zz"), None).expect_err("unknown");
        assert!(err.to_string().contains("the services are a, b"), "{err}");
        let err = resolve(&p, Provider::Stripe, Some("a"), Some("hooks")).expect_err("path");
        assert!(err.to_string().contains("must start with /"), "{err}");
        let none = plan(vec![ServicePlan::new("w", Kind::Worker, "/x")], Vec::new());
        let err = resolve(&none, Provider::Stripe, None, None).expect_err("none");
        assert!(err.to_string().contains("No web service"), "{err}");
        let next = err.report().next;
        assert!(next.contains("--service NAME"), "{next}");
        assert!(!next.contains("--set"), "{next}");
        let err = resolve(&none, Provider::Stripe, Some("w"), None).expect_err("no port");
        assert!(err.to_string().contains("has no port"), "{err}");
    }
}
