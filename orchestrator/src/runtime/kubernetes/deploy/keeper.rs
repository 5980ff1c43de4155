//! The containment keeper: with `containment.on_loss: stop` (the default), a container of the
//! sidecar's pod (`af-probe keep`) that reads the watchers' reports on the pod's own loopback
//! and, once one says containment is lost, scales every service Deployment to zero and
//! suspends every cron service's CronJob. It is the one part of an environment that talks to
//! the API server: its service account may get and patch exactly those objects by name and
//! nothing else, its token is mounted into its own container only, and only the sidecar's
//! policy lets the API server's addresses through ([`super::super::policies`]).

use std::net::SocketAddr;

use k8s_openapi::api::core::v1::{
    Capabilities, ConfigMapProjection, Container, KeyToPath, ProjectedVolumeSource,
    SecurityContext, ServiceAccount, ServiceAccountTokenProjection, Volume, VolumeMount,
    VolumeProjection,
};
use k8s_openapi::api::rbac::v1::{PolicyRule, Role, RoleBinding, RoleRef, Subject};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use super::objects::stamp;
use af_policy::manifest::OnLoss;

use crate::plan::{EnvPlan, Kind};
use crate::runtime::kubernetes::names::{Names, kind};
use crate::runtime::kubernetes::probe::pod::BINARY;
use crate::runtime::kubernetes::pull_secret;
use crate::runtime::labels::SERVICE;

/// The keeper's name: its container, service account, role and binding.
pub const NAME: &str = "af-keeper";
/// Where its service account's token and the API server's CA are mounted.
const SA_DIR: &str = "/var/run/secrets/af-keeper";
/// The projected volume holding them.
const SA_VOLUME: &str = "af-keeper-token";
/// How long a token lives before the kubelet rotates it.
const TOKEN_SECONDS: i64 = 3600;

/// What the keeper is made from.
#[derive(Debug, Clone)]
pub struct Keeper {
    /// The image holding `af-probe`, and its pull policy.
    pub image: String,
    /// Its pull policy.
    pub pull_policy: String,
    /// The API server, as a pod dials it.
    pub api_server: SocketAddr,
    /// Seconds between reads of the watchers' reports.
    pub period_secs: u32,
}

/// What the keeper stops: `deployment:NAME` and `cronjob:NAME`, each service by the object
/// that runs it.
fn targets(plan: &EnvPlan) -> Vec<String> {
    plan.services
        .iter()
        .map(|s| match s.kind {
            Kind::Cron => format!("cronjob:{}", s.name),
            Kind::Web | Kind::Worker => format!("deployment:{}", s.name),
        })
        .collect()
}

fn meta(names: &Names) -> ObjectMeta {
    let mut labels = names.labels(kind::SIDECAR);
    labels.insert(SERVICE.to_owned(), "sidecar".to_owned());
    ObjectMeta {
        name: Some(NAME.to_owned()),
        namespace: Some(names.namespace().to_owned()),
        labels: Some(labels),
        ..ObjectMeta::default()
    }
}

/// Its service account, whose token is never mounted but where the keeper's container asks.
pub fn service_account(names: &Names, pull_secret: bool) -> ServiceAccount {
    stamp(ServiceAccount {
        metadata: meta(names),
        automount_service_account_token: Some(false),
        image_pull_secrets: pull_secret.then(|| vec![pull_secret::reference()]),
        ..ServiceAccount::default()
    })
}

/// Its role: get and patch the plan's Deployments and CronJobs, each by name (a rule without
/// names would cover every object of its kind, so a kind the plan does not run gets none).
pub fn role(names: &Names, plan: &EnvPlan) -> Role {
    let named = |kind: Kind| -> Vec<String> {
        plan.services
            .iter()
            .filter(|s| (s.kind == Kind::Cron) == (kind == Kind::Cron))
            .map(|s| s.name.clone())
            .collect()
    };
    let rule = |group: &str, resource: &str, names: Vec<String>| {
        (!names.is_empty()).then(|| PolicyRule {
            api_groups: Some(vec![group.to_owned()]),
            resources: Some(vec![resource.to_owned()]),
            resource_names: Some(names),
            verbs: vec!["get".to_owned(), "patch".to_owned()],
            ..PolicyRule::default()
        })
    };
    let rules: Vec<PolicyRule> = [
        rule("apps", "deployments", named(Kind::Web)),
        rule("batch", "cronjobs", named(Kind::Cron)),
    ]
    .into_iter()
    .flatten()
    .collect();
    stamp(Role {
        metadata: meta(names),
        rules: Some(rules),
    })
}

/// The binding of its role to its service account.
pub fn role_binding(names: &Names) -> RoleBinding {
    stamp(RoleBinding {
        metadata: meta(names),
        role_ref: RoleRef {
            api_group: Some("rbac.authorization.k8s.io".to_owned()),
            kind: "Role".to_owned(),
            name: NAME.to_owned(),
        },
        subjects: Some(vec![Subject {
            kind: "ServiceAccount".to_owned(),
            name: NAME.to_owned(),
            namespace: Some(names.namespace().to_owned()),
            ..Subject::default()
        }]),
    })
}

impl Keeper {
    /// Its container in the sidecar's pod: `af-probe keep`, reading the admin API on the pod's
    /// loopback with the token of the sidecar's own document (`document`), and the API server
    /// with its own service account's token. No capability, a nobody user, a read-only root.
    pub fn container(
        &self,
        names: &Names,
        plan: &EnvPlan,
        admin: SocketAddr,
        config_volume: &str,
        document: &str,
    ) -> Container {
        let config_dir = "/etc/af";
        let mut args = vec![
            "keep".to_owned(),
            admin.to_string(),
            self.period_secs.to_string(),
            self.api_server.to_string(),
            names.namespace().to_owned(),
            format!("{config_dir}/{document}"),
            SA_DIR.to_owned(),
        ];
        args.extend(targets(plan));
        Container {
            name: NAME.to_owned(),
            image: Some(self.image.clone()),
            image_pull_policy: Some(self.pull_policy.clone()),
            command: Some(vec![BINARY.to_owned()]),
            args: Some(args),
            volume_mounts: Some(vec![
                VolumeMount {
                    name: config_volume.to_owned(),
                    mount_path: config_dir.to_owned(),
                    read_only: Some(true),
                    ..VolumeMount::default()
                },
                VolumeMount {
                    name: SA_VOLUME.to_owned(),
                    mount_path: SA_DIR.to_owned(),
                    read_only: Some(true),
                    ..VolumeMount::default()
                },
            ]),
            security_context: Some(SecurityContext {
                allow_privilege_escalation: Some(false),
                privileged: Some(false),
                read_only_root_filesystem: Some(true),
                run_as_user: Some(65534),
                run_as_non_root: Some(true),
                capabilities: Some(Capabilities {
                    drop: Some(vec!["ALL".to_owned()]),
                    add: None,
                }),
                ..SecurityContext::default()
            }),
            ..Container::default()
        }
    }

    /// The projected volume of its token and the API server's CA (`kube-root-ca.crt`, which
    /// every namespace has).
    pub fn volume() -> Volume {
        Volume {
            name: SA_VOLUME.to_owned(),
            projected: Some(ProjectedVolumeSource {
                sources: Some(vec![
                    VolumeProjection {
                        service_account_token: Some(ServiceAccountTokenProjection {
                            path: "token".to_owned(),
                            expiration_seconds: Some(TOKEN_SECONDS),
                            ..ServiceAccountTokenProjection::default()
                        }),
                        ..VolumeProjection::default()
                    },
                    VolumeProjection {
                        config_map: Some(ConfigMapProjection {
                            name: "kube-root-ca.crt".to_owned(),
                            items: Some(vec![KeyToPath {
                                key: "ca.crt".to_owned(),
                                path: "ca.crt".to_owned(),
                                ..KeyToPath::default()
                            }]),
                            optional: Some(false),
                        }),
                        ..VolumeProjection::default()
                    },
                ]),
                // Readable by the keeper's nobody user; no other container mounts it.
                default_mode: Some(0o444),
                ..ProjectedVolumeSource::default()
            }),
            ..Volume::default()
        }
    }
}

/// The annotation `af-probe keep` writes on what it stopped: when, and what got through.
pub const STOPPED: &str = "dev.antifailure.stopped";

/// The sidecar Deployment's annotation saying what a loss of containment does (`stop`,
/// `keep`), read by `af status`.
pub const ON_LOSS: &str = "dev.antifailure.on-loss";

/// Its value for `on_loss`.
pub fn on_loss(on_loss: OnLoss) -> &'static str {
    match on_loss {
        OnLoss::Stop => "stop",
        OnLoss::Keep => "keep",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::ServicePlan;

    #[test]
    fn the_keeper_writes_the_annotation_af_status_reads() {
        assert_eq!(STOPPED, af_fixtures::keep::STOPPED);
    }

    #[test]
    fn the_keepers_role_names_every_object_it_may_touch_and_nothing_else() {
        let env = crate::env_id::EnvId::parse("pr-1").expect("id");
        let mut report = ServicePlan::new("report", Kind::Cron, "/src");
        report.schedule = Some("* * * * *".to_owned());
        let plan = EnvPlan::new(
            env.clone(),
            "shop",
            vec![
                ServicePlan::new("web", Kind::Web, "/src"),
                ServicePlan::new("worker", Kind::Worker, "/src"),
                report,
            ],
            Default::default(),
        )
        .expect("plan");
        let names = Names::new(crate::runtime::kubernetes::names::DEFAULT_PREFIX, &env);
        let rules = role(&names, &plan).rules.expect("rules");
        let seen: Vec<(String, Vec<String>, Vec<String>)> = rules
            .iter()
            .map(|r| {
                (
                    r.resources.clone().unwrap_or_default().join(","),
                    r.resource_names.clone().unwrap_or_default(),
                    r.verbs.clone(),
                )
            })
            .collect();
        let verbs = vec!["get".to_owned(), "patch".to_owned()];
        assert_eq!(
            seen,
            [
                (
                    "deployments".to_owned(),
                    vec!["web".to_owned(), "worker".to_owned()],
                    verbs.clone()
                ),
                ("cronjobs".to_owned(), vec!["report".to_owned()], verbs),
            ]
        );
        let only_web = EnvPlan::new(
            env,
            "shop",
            vec![ServicePlan::new("web", Kind::Web, "/src")],
            Default::default(),
        )
        .expect("plan");
        let rules = role(&names, &only_web).rules.expect("rules");
        assert_eq!(
            rules.len(),
            1,
            "no rule without names: it would cover every CronJob"
        );
        assert_eq!(targets(&only_web), ["deployment:web"]);
    }
}
