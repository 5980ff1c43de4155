//! What can go wrong in a runtime, each mapped to the product's error catalogue.

use af_policy::error::{Report, codes};

use crate::trust::TrustError;

/// A runtime failure. [`RuntimeError::report`] turns it into the coded refusal the user sees.
#[derive(Debug, thiserror::Error)]
pub enum RuntimeError {
    /// The container engine could not be reached.
    #[error("the Docker daemon could not be reached: {0}")]
    Unreachable(String),
    /// The cluster could not be reached (no kubeconfig, no such context, no answer).
    #[error("the cluster of context {context} could not be reached: {message}")]
    ClusterUnreachable {
        /// The kubeconfig context.
        context: String,
        /// Why.
        message: String,
    },
    /// The cluster's API server refused a request.
    #[error("the API server refused to {context}: {message}")]
    Api {
        /// What was being done.
        context: String,
        /// What the API server said.
        message: String,
    },
    /// The containment probe found routes out that do not pass the sidecar, or could not
    /// answer; nothing of the environment's services or sidecar was started.
    #[error("the cluster does not contain the environment")]
    NotContained {
        /// The namespace the probe ran in.
        namespace: String,
        /// Each route that got out, described.
        got_out: Vec<String>,
        /// Each route the probe could not answer for, with why.
        unanswered: Vec<String>,
        /// Each layer of containment not shown in force, and how (nothing was aimed outside
        /// from a pod that layer should have governed).
        layers: Vec<String>,
    },
    /// A pod's gate gave up: its own pod was not governed (a route got out, or the sidecar
    /// did not answer) in every round until its deadline; the service's process never ran.
    #[error("the pod of {service} was not governed: {route}")]
    Ungoverned {
        /// The service whose pod it was.
        service: String,
        /// The namespace.
        namespace: String,
        /// What the gate's last failed round found.
        route: String,
    },
    /// A pod's fence (the pod layer) could not be written: the kernel or the cluster's
    /// admission refused it; the service's process never ran.
    #[error("the pod of {service} could not write its fence: {why}")]
    Unfenced {
        /// The service whose pod it was.
        service: String,
        /// The namespace.
        namespace: String,
        /// What the fence or the cluster said.
        why: String,
    },
    /// An image did not build.
    #[error("image for {service} did not build: {message}")]
    ImageBuild {
        /// The service (or `sidecar`).
        service: String,
        /// What the build said.
        message: String,
        /// The last lines of the build log.
        tail: Vec<String>,
    },
    /// An image could not be pushed to the registry the user named, or its place there read.
    #[error("the image of {image} could not be pushed to {repository}: {message}")]
    ImagePush {
        /// Whose image (`sidecar`, `probe`, a service).
        image: String,
        /// The repository (`AF_IMAGE_REPOSITORY`).
        repository: String,
        /// What the registry or the daemon said; never a credential.
        message: String,
        /// What to do about it.
        next: String,
    },
    /// A service's prebuilt image is neither held nor pullable.
    #[error("the image {image} of {service} could not be found or pulled: {message}")]
    ImageMissing {
        /// The service.
        service: String,
        /// Its `image:`.
        image: String,
        /// What the daemon said; never a credential.
        message: String,
    },
    /// The nodes could not pull an image.
    #[error("the nodes could not pull {image} for {service}: {message}")]
    ImagePull {
        /// The service whose pod it was (`sidecar`, `probe`).
        service: String,
        /// The image reference.
        image: String,
        /// What the kubelet said (its event, else the container's waiting reason).
        message: String,
    },
    /// A registry cluster with no registry named.
    #[error("this cluster's nodes pull from a registry and none is named")]
    NoRegistry,
    /// The tool that copies images into the nodes (k3d, kind) could not do it.
    #[error("{tool} could not copy images into the cluster {cluster}: {message}")]
    ImageTool {
        /// `k3d` or `kind`.
        tool: &'static str,
        /// The cluster's name for the tool.
        cluster: String,
        /// Why.
        message: String,
    },
    /// A service did not become ready in time.
    #[error("{service} was not ready after {seconds} s")]
    NotReady {
        /// The service.
        service: String,
        /// How long it was given.
        seconds: u64,
        /// Its last log lines.
        tail: Vec<String>,
    },
    /// A stage of bringing an environment up or down did not finish in its time.
    #[error("{what} did not finish within {seconds} s ({state})")]
    Timeout {
        /// The stage ("the namespace af-pr-42 to be ready").
        what: String,
        /// How long it was given.
        seconds: u64,
        /// What it was still waiting on.
        state: String,
        /// The variable that sets its timeout.
        knob: &'static str,
    },
    /// A service stopped while starting.
    #[error("{service} exited with status {status}")]
    Exited {
        /// The service.
        service: String,
        /// Its exit status.
        status: i64,
        /// Its last log lines.
        tail: Vec<String>,
    },
    /// A migration failed.
    #[error("the migration of {service} exited with status {status}")]
    Migration {
        /// The service.
        service: String,
        /// Its exit status.
        status: i64,
        /// Its last log lines.
        tail: Vec<String>,
    },
    /// Something with our name is not ours.
    #[error("{class} {name} exists but was not made by af")]
    NotOurs {
        /// `container`, `network`, ...
        class: &'static str,
        /// Its name.
        name: String,
    },
    /// The environment does not exist.
    #[error("environment {0} does not exist")]
    NoEnvironment(String),
    /// A service that is not in the environment.
    #[error("environment {env} has no running service {service}")]
    NoService {
        /// The environment.
        env: String,
        /// The service.
        service: String,
    },
    /// The sidecar's admin API could not be reached.
    #[error("the sidecar's admin API could not be reached: {0}")]
    AdminUnreachable(String),
    /// The sidecar's admin API refused the request with its own coded report.
    #[error("{0}")]
    AdminRefused(Report),
    /// The environment CA or the CA bundle could not be made.
    #[error(transparent)]
    Trust(#[from] TrustError),
    /// The runtime cannot do that.
    #[error("{0}")]
    Unsupported(String),
    /// The runtime cannot run what the manifest asks for; refused before anything is made.
    #[error("{statement}")]
    CannotRun {
        /// What it cannot run, and that nothing was made.
        statement: String,
        /// What would run.
        next: String,
    },
    /// Teardown left objects behind.
    #[error("teardown left {} object(s) behind", .0.len())]
    TeardownIncomplete(Vec<(String, String)>),
    /// `up` stopped between two steps because the user asked it to (Ctrl-C).
    #[error("af up was interrupted {at}")]
    Interrupted {
        /// Where it stopped: `before starting web`, `while web was getting ready`, ...
        at: String,
    },
    /// The container engine stopped answering in the middle of `up`.
    #[error("the Docker daemon stopped answering while af up was trying to {0}")]
    DaemonLost(String),
    /// A restarted service's new pod could not be shown governed (its fence or its gate
    /// failed); its pods, the old ones included, were stopped rather than left running.
    #[error("{cause}")]
    StoppedUngoverned {
        /// Why the new pod was not governed.
        cause: Box<RuntimeError>,
        /// The service.
        service: String,
    },
    /// `af up` failed on a cluster after its namespace was there; says what became of it.
    #[error("{cause}")]
    FailedUp {
        /// Why `af up` failed.
        cause: Box<RuntimeError>,
        /// The environment's namespace.
        namespace: String,
        /// What became of it.
        fate: NamespaceFate,
    },
    /// Any other engine failure.
    #[error("{context}: {message}")]
    Engine {
        /// What was being done.
        context: String,
        /// What the engine said.
        message: String,
    },
}

/// What became of a namespace after `af up` failed in it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NamespaceFate {
    /// This `af up` made it and removed it again.
    Removed,
    /// This `af up` made it and kept it, as `AF_PRESERVE=1` asks.
    Preserved,
    /// It was there before this `af up` and stays.
    Existed,
    /// This `af up` made it and could not remove it, for this reason.
    NotRemoved(String),
}

impl NamespaceFate {
    /// The sentence that ends the failure's statement.
    fn sentence(&self, namespace: &str) -> String {
        match self {
            NamespaceFate::Removed => format!(
                "The namespace {namespace} this `af up` made was removed again (AF_PRESERVE=1 keeps it for inspection)."
            ),
            NamespaceFate::Preserved => format!(
                "The namespace {namespace} is kept for inspection (AF_PRESERVE=1); `af down` removes it."
            ),
            NamespaceFate::Existed => format!(
                "The namespace {namespace} was there before this `af up` and stays; `af down` removes it."
            ),
            NamespaceFate::NotRemoved(why) => format!(
                "The namespace {namespace} this `af up` made could not be removed ({why}); `af down` removes it."
            ),
        }
    }
}

impl RuntimeError {
    /// An engine failure while doing `context`.
    pub fn engine(context: impl Into<String>, err: impl std::fmt::Display) -> Self {
        RuntimeError::Engine {
            context: context.into(),
            message: err.to_string(),
        }
    }

    /// The same failure seen after the engine stopped answering: what `up` was doing when it
    /// failed, without the engine's own words (they only say that a connection broke).
    pub fn daemon_lost(self) -> Self {
        match self {
            RuntimeError::Engine { context, .. } => RuntimeError::DaemonLost(context),
            RuntimeError::ImageBuild { service, .. } => {
                RuntimeError::DaemonLost(format!("build the image of {service}"))
            }
            RuntimeError::NotReady { service, .. } | RuntimeError::Exited { service, .. } => {
                RuntimeError::DaemonLost(format!("start {service}"))
            }
            RuntimeError::Migration { service, .. } => {
                RuntimeError::DaemonLost(format!("migrate {service}"))
            }
            other @ (RuntimeError::Interrupted { .. } | RuntimeError::DaemonLost(_)) => other,
            _ => RuntimeError::DaemonLost("make the environment".to_owned()),
        }
    }

    /// The coded refusal the user reads.
    pub fn report(&self) -> Report {
        match self {
            RuntimeError::Unreachable(m) => Report::new(
                &codes::RUN_DOCKER_UNREACHABLE,
                format!("The Docker daemon could not be reached: {m}."),
            ),
            RuntimeError::ClusterUnreachable { context, message } => Report::new(
                &codes::RUN_CLUSTER_UNREACHABLE,
                format!("The cluster of kubeconfig context {context} could not be reached: {message}."),
            )
            .with_next("Check KUBECONFIG and runtime.kubeconfig_context, and that the cluster answers `kubectl --context CONTEXT get --raw /version`."),
            RuntimeError::Api { context, message } => Report::new(
                &codes::RUN_CLUSTER_UNREACHABLE,
                format!("The API server refused to {context}: {message}."),
            ),
            RuntimeError::NotContained { namespace, got_out, unanswered, layers } => {
                let mut found = layers.clone();
                if !got_out.is_empty() {
                    found.push(format!("got out: {}", got_out.join("; ")));
                }
                if !unanswered.is_empty() {
                    found.push(format!("could not be answered: {}", unanswered.join("; ")));
                }
                Report::new(
                    &codes::RUN_NOT_CONTAINING,
                    format!(
                        "The cluster does not contain the environment: from a pod under the services' rules in {namespace}, {}. No sidecar and no service was started.",
                        found.join("; and ")
                    ),
                )
                .with_next("Containment needs both layers: a CNI that enforces NetworkPolicy, and admission that lets each pod's `af-fence` init container (NET_ADMIN alone) write its own rules. Fix what is named, then run `af up` again.")
            }
            RuntimeError::Ungoverned { service, namespace, route } => Report::new(
                &codes::RUN_NOT_CONTAINING,
                format!(
                    "The pod of {service} in {namespace} was not governed before its gate gave up: {route}; {service}'s own process never started."
                ),
            )
            .with_next("The cluster's policies reach new pods late or not at all: use a CNI that enforces NetworkPolicy (raise AF_KUBE_GATE_TIMEOUT if it is only slow), then `af up` again."),
            RuntimeError::Unfenced { service, namespace, why } => Report::new(
                &codes::RUN_NOT_CONTAINING,
                format!(
                    "The pod of {service} in {namespace} could not write its own fence, the pod layer of containment: {why}; {service}'s own process never started."
                ),
            )
            .with_next("Let af's init container `af-fence` (root with NET_ADMIN alone) write nftables rules in the pod's network namespace: allow it in the cluster's admission for af's namespaces, on nodes whose kernel has nf_tables, then `af up` again."),
            RuntimeError::ImageBuild { service, message, tail } => Report::new(
                &codes::RUN_IMAGE_BUILD,
                format!("The image of {service} did not build: {message}.{}", lines(tail)),
            ),
            RuntimeError::ImagePush { image, repository, message, next } => Report::new(
                &codes::RUN_IMAGE_PUSH,
                format!("The image of {image} could not be pushed to {repository}: {message}; nothing was created on the cluster."),
            )
            .with_next(next.clone()),
            RuntimeError::ImageMissing { service, image, message } => Report::new(
                &codes::RUN_IMAGE_MISSING,
                format!("The image {image} of service {service} is not on this machine's Docker daemon and could not be pulled: {message}; nothing was started."),
            ),
            RuntimeError::ImagePull { service, image, message } => Report::new(
                &codes::RUN_IMAGE_PULL,
                format!("The cluster's nodes could not pull {image} for {service}: {message}."),
            ),
            RuntimeError::NoRegistry => Report::new(
                &codes::RUN_NO_REGISTRY,
                "This cluster's nodes pull their images from a registry, and no registry is named to push af's images to; nothing was created.".to_owned(),
            ),
            RuntimeError::ImageTool { tool, cluster, message } => Report::new(
                &codes::RUN_IMAGE_TOOL,
                format!("{tool} could not copy images into the cluster {cluster}: {message}; nothing was created."),
            ),
            RuntimeError::NotReady { service, seconds, tail } => Report::new(
                &codes::RUN_NOT_READY,
                format!("{service} was not ready after {seconds} s.{}", lines(tail)),
            )
            .with_next(format!(
                "Check that {service} listens on its port (and answers its health_path); raise health_timeout if it needs longer."
            )),
            RuntimeError::Timeout { what, seconds, state, knob } => Report::new(
                &codes::RUN_NOT_READY,
                format!("{what} did not finish within {seconds} s ({state})."),
            )
            .with_next(format!("Look at what the cluster says (`kubectl get events -n NAMESPACE`), or raise {knob}.")),
            RuntimeError::Exited { service, status, tail } => Report::new(
                &codes::RUN_EXITED,
                format!("{service} exited with status {status} while starting.{}", lines(tail)),
            ),
            RuntimeError::Migration { service, status, tail } => Report::new(
                &codes::RUN_MIGRATION,
                format!(
                    "The migration of {service} exited with status {status}; {service} was not started.{}",
                    lines(tail)
                ),
            ),
            RuntimeError::NotOurs { class, name } => Report::new(
                &codes::RUN_NOT_OURS,
                format!("The {class} {name} has af's name but not its label dev.antifailure.managed=true, so it is somebody else's; nothing was touched."),
            )
            .with_next(format!("Remove or rename the {class} {name} yourself, or use another environment id with --env.")),
            RuntimeError::NoEnvironment(env) => Report::new(
                &codes::RUN_NO_ENVIRONMENT,
                format!("Environment {env} does not exist on this runtime."),
            ),
            RuntimeError::NoService { env, service } => Report::new(
                &codes::RUN_NO_ENVIRONMENT,
                format!("Environment {env} has no running service {service}."),
            )
            .with_next("Run `af status` to see the services, or `af up` to start them."),
            RuntimeError::AdminUnreachable(m) => Report::new(
                &codes::NET_ADMIN_UNREACHABLE,
                format!("The sidecar's admin API could not be reached: {m}."),
            ),
            RuntimeError::AdminRefused(report) => report.clone(),
            RuntimeError::Trust(e) => Report::new(&codes::RUN_TRUST, format!("{e}.")),
            RuntimeError::Unsupported(m) => Report::new(&codes::RUN_UNSUPPORTED, m.clone()),
            RuntimeError::CannotRun { statement, next } => {
                Report::new(&codes::RUN_UNSUPPORTED, statement.clone()).with_next(next.clone())
            }
            RuntimeError::TeardownIncomplete(left) => {
                let names: Vec<String> = left.iter().map(|(n, why)| format!("{n} ({why})")).collect();
                Report::new(
                    &codes::RUN_TEARDOWN_INCOMPLETE,
                    format!("Teardown left {} object(s) behind: {}.", left.len(), names.join("; ")),
                )
            }
            RuntimeError::Interrupted { at } => Report::new(
                &codes::RUN_INTERRUPTED,
                format!("af up was interrupted (Ctrl-C) and stopped {at}; what it had made is left in place."),
            ),
            RuntimeError::DaemonLost(context) => Report::new(
                &codes::RUN_DOCKER_UNREACHABLE,
                format!("The Docker daemon stopped answering while af up was trying to {context}; what af up had made is left in place."),
            )
            .with_next("When `af doctor` reaches Docker again, run af down to remove it, or af up to finish it."),
            RuntimeError::StoppedUngoverned { cause, service } => {
                let mut report = cause.report();
                report.statement = format!(
                    "{} So {service} is stopped (its Deployment scaled to 0): its old pod would have kept running beside a new one nothing could show governed.",
                    report.statement
                );
                report.next = format!(
                    "{} `af up` starts {service} again once that is fixed.",
                    report.next
                );
                report
            }
            RuntimeError::FailedUp { cause, namespace, fate } => {
                let mut report = cause.report();
                report.statement = format!("{} {}", report.statement, fate.sentence(namespace));
                report
            }
            RuntimeError::Engine { context, message } => Report::new(
                &codes::RUN_DOCKER_UNREACHABLE,
                format!("The Docker daemon refused to {context}: {message}."),
            )
            .with_next("Run `af doctor` to check the Docker daemon, then try again."),
        }
    }
}

fn lines(tail: &[String]) -> String {
    if tail.is_empty() {
        return String::new();
    }
    let mut out = String::from(" Last lines:");
    for l in tail {
        out.push_str("\n    ");
        out.push_str(l);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_restart_whose_new_pod_was_never_governed_says_the_service_is_stopped() {
        let cause = RuntimeError::Ungoverned {
            service: "web".to_owned(),
            namespace: "af-pr-42".to_owned(),
            route: "TCP to 198.51.100.10:443 got out".to_owned(),
        };
        let report = RuntimeError::StoppedUngoverned {
            cause: Box::new(cause),
            service: "web".to_owned(),
        }
        .report();
        assert_eq!(report.code.code, "AF-RUN-043");
        assert!(
            report.statement.contains("TCP to 198.51.100.10:443 got out")
                && report
                    .statement
                    .ends_with("So web is stopped (its Deployment scaled to 0): its old pod would have kept running beside a new one nothing could show governed."),
            "{report}"
        );
        assert!(
            report
                .next
                .ends_with("`af up` starts web again once that is fixed."),
            "{report}"
        );
    }

    #[test]
    fn a_step_failing_because_the_daemon_went_away_says_so_without_the_engines_words() {
        let seen = RuntimeError::engine(
            "create the sidecar",
            "error in the hyper legacy client: client error (Connect)",
        );
        let report = seen.daemon_lost().report();
        assert_eq!(report.code.code, "AF-RUN-001");
        assert!(
            report
                .statement
                .contains("while af up was trying to create the sidecar"),
            "{report}"
        );
        assert!(!report.statement.contains("hyper"), "{report}");
        assert!(report.next.contains("af down"), "{report}");
        let waited = RuntimeError::NotReady {
            service: "web".to_owned(),
            seconds: 30,
            tail: Vec::new(),
        };
        assert!(
            waited
                .daemon_lost()
                .report()
                .statement
                .contains("trying to start web")
        );
    }

    #[test]
    fn an_interrupted_up_stays_interrupted_when_the_daemon_is_also_gone() {
        let stopped = RuntimeError::Interrupted {
            at: "before networks".to_owned(),
        };
        assert_eq!(stopped.daemon_lost().report().code.code, "AF-RUN-032");
    }
}
