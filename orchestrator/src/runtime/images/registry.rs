//! Images through a registry the user names, for clusters whose nodes pull.
//!
//! The user names one repository (`AF_IMAGE_REPOSITORY=registry.example.com/team/af`), not a
//! registry and a name per image: every image af made is a tag in it, named by what it is and
//! its content (`sidecar-HEX`, `probe-HEX`, `service-HEX`, HEX the image's id), so one
//! repository made by hand (as ECR wants) is enough. An image is pushed through this machine's
//! Docker daemon with the user's own Docker credentials (`docker login`, a credential helper)
//! only when the registry does not hold its tag already, and the nodes are told its digest
//! (`REPOSITORY@sha256:…`), never a tag that could move. The environment variable rather than
//! a manifest field: the registry is where this user's (or this CI's) pushes go, not a property
//! of the repository's environments, like `AF_PROXY_IMAGE` and the kubeconfig.
//!
//! Credentials never reach output: [`Credentials`] prints as redacted, and every message a
//! registry or the daemon returns has the secret replaced before it is shown.

use std::fmt;
use std::path::Path;

use bollard::Docker;
use bollard::auth::DockerCredentials;
use bollard::errors::Error as DockerError;
use bollard::query_parameters::{PushImageOptionsBuilder, TagImageOptionsBuilder};
use docker_credential::{CredentialRetrievalError, DockerCredential};
use futures_util::StreamExt;

use crate::runtime::{Progress, RuntimeError};

/// The variable naming the repository.
pub const REPOSITORY_VAR: &str = "AF_IMAGE_REPOSITORY";
/// The variable naming the nodes' pull credentials.
pub const PULL_CREDENTIALS_VAR: &str = "AF_IMAGE_PULL_CREDENTIALS";
/// The key of Docker Hub in a Docker configuration.
const DOCKER_HUB_KEY: &str = "https://index.docker.io/v1/";

/// A repository in a registry: `HOST[:PORT]/PATH`, with no tag or digest.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Repository {
    name: String,
    host: String,
}

impl Repository {
    /// Read `text` as Docker reads a repository: the first component is the registry when it
    /// has a dot or a colon or is `localhost`; here it must be there, since nodes pulling from
    /// Docker Hub by default is never what a cluster's registry means.
    pub fn parse(text: &str) -> Result<Self, RuntimeError> {
        let text = text.trim();
        let refuse = |why: &str| RuntimeError::CannotRun {
            statement: format!("{REPOSITORY_VAR} {text:?} {why}; nothing was created."),
            next: format!(
                "Name a repository with its registry host and no tag, such as {REPOSITORY_VAR}=registry.example.com/team/af (af tags each image in it)."
            ),
        };
        let Some((host, path)) = text.split_once('/') else {
            return Err(refuse("names no registry host"));
        };
        if !(host.contains('.') || host.contains(':') || host == "localhost") {
            return Err(refuse("does not begin with a registry host"));
        }
        if path.contains('@') || path.contains(':') {
            return Err(refuse("names a tag or a digest"));
        }
        let component = |c: &str| {
            !c.is_empty()
                && c.bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b"._-".contains(&b))
                && c.bytes().next().is_some_and(|b| b.is_ascii_alphanumeric())
        };
        if !path.split('/').all(component) {
            return Err(refuse(
                "has a path component that is not lowercase letters, digits, dots, dashes and underscores",
            ));
        }
        Ok(Self {
            name: text.to_owned(),
            host: host.to_owned(),
        })
    }

    /// The registry's host (and port), as `docker login` names it.
    pub fn host(&self) -> &str {
        &self.host
    }

    /// The key of this registry in a Docker configuration's `auths`.
    fn config_key(&self) -> &str {
        match self.host.as_str() {
            "docker.io" | "index.docker.io" | "registry-1.docker.io" => DOCKER_HUB_KEY,
            host => host,
        }
    }
}

impl fmt::Display for Repository {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.name)
    }
}

/// Credentials for one registry, or none (an anonymous push, or nodes that pull on their own);
/// printed as redacted.
#[derive(Clone, Default)]
pub struct Credentials(Option<DockerCredentials>);

impl fmt::Debug for Credentials {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            Some(_) => f.write_str("Credentials(redacted)"),
            None => f.write_str("Credentials(none)"),
        }
    }
}

impl Credentials {
    /// No credentials.
    pub fn none() -> Self {
        Self(None)
    }

    /// Whether there are any.
    pub fn is_some(&self) -> bool {
        self.0.is_some()
    }

    /// As the daemon takes them with a pull or a push.
    pub(super) fn docker(&self) -> Option<DockerCredentials> {
        self.0.clone()
    }

    /// The credentials Docker holds for `repository`'s registry (`docker login`, a credential
    /// store or helper), or none when it holds none.
    pub fn of_docker(repository: &Repository) -> Result<Self, RuntimeError> {
        Self::read(
            repository,
            docker_credential::get_credential(repository.config_key()),
            "this machine's Docker configuration",
        )
    }

    /// The credentials a Docker configuration file at `path` holds for `repository`'s
    /// registry; it must hold some.
    pub fn of_file(repository: &Repository, path: &Path) -> Result<Self, RuntimeError> {
        let unreadable = |why: String| RuntimeError::CannotRun {
            statement: format!(
                "{PULL_CREDENTIALS_VAR} names {}, which {why}; nothing was created.",
                path.display()
            ),
            next: format!(
                "Name a Docker configuration file (config.json) holding credentials for {}, or docker (the ones that push), or none (the nodes pull on their own).",
                repository.host()
            ),
        };
        let file =
            std::fs::File::open(path).map_err(|e| unreadable(format!("cannot be read ({e})")))?;
        let found = Self::read(
            repository,
            docker_credential::get_credential_from_reader(
                std::io::BufReader::new(file),
                repository.config_key(),
            ),
            &path.display().to_string(),
        )?;
        if !found.is_some() {
            return Err(unreadable("holds none for it".to_owned()));
        }
        Ok(found)
    }

    fn read(
        repository: &Repository,
        found: Result<DockerCredential, CredentialRetrievalError>,
        source: &str,
    ) -> Result<Self, RuntimeError> {
        let host = repository.host().to_owned();
        let credentials = match found {
            Ok(DockerCredential::UsernamePassword(username, password)) => DockerCredentials {
                username: Some(username),
                password: Some(password),
                serveraddress: Some(host),
                ..DockerCredentials::default()
            },
            Ok(DockerCredential::IdentityToken(token)) => DockerCredentials {
                identitytoken: Some(token),
                serveraddress: Some(host),
                ..DockerCredentials::default()
            },
            Err(
                CredentialRetrievalError::NoCredentialConfigured
                | CredentialRetrievalError::ConfigNotFound
                | CredentialRetrievalError::ConfigReadError,
            ) => return Ok(Self(None)),
            // A store that holds nothing for this registry says so (docker-credential-helpers'
            // own words): no credentials, as Docker itself takes it.
            Err(CredentialRetrievalError::HelperFailure { stdout, stderr, .. })
                if [&stdout, &stderr]
                    .iter()
                    .any(|said| said.contains("credentials not found")) =>
            {
                return Ok(Self(None));
            }
            // The helper's own output may hold a secret: only its name is said.
            Err(CredentialRetrievalError::HelperFailure { helper, .. }) => {
                return Err(unreadable_credentials(
                    repository,
                    format!("the credential helper {helper} of {source} failed"),
                ));
            }
            Err(other) => {
                return Err(unreadable_credentials(
                    repository,
                    format!("{source} could not be read: {other}"),
                ));
            }
        };
        Ok(Self(Some(credentials)))
    }

    /// A Docker configuration (`.dockerconfigjson`) holding these credentials for `repository`'s
    /// registry, as a pull secret carries them; `None` without credentials, or with an identity
    /// token, which a kubelet cannot use.
    pub fn docker_config_json(&self, repository: &Repository) -> Option<Vec<u8>> {
        use base64::Engine as _;
        let credentials = self.0.as_ref()?;
        let (username, password) = (
            credentials.username.as_ref()?,
            credentials.password.as_ref()?,
        );
        let auth =
            base64::engine::general_purpose::STANDARD.encode(format!("{username}:{password}"));
        let config = serde_json::json!({"auths": {repository.host(): {
            "username": username, "password": password, "auth": auth}}});
        serde_json::to_vec(&config).ok()
    }

    /// `message` with every secret these credentials hold replaced.
    pub fn scrub(&self, message: &str) -> String {
        let Some(credentials) = &self.0 else {
            return message.to_owned();
        };
        [
            &credentials.password,
            &credentials.identitytoken,
            &credentials.auth,
        ]
        .into_iter()
        .flatten()
        .filter(|secret| !secret.is_empty())
        .fold(message.to_owned(), |text, secret| {
            text.replace(secret.as_str(), "[redacted]")
        })
    }
}

/// What the daemon said in an error, without bollard's wording around it.
pub(super) fn daemon_said(err: &DockerError) -> String {
    match err {
        DockerError::DockerResponseServerError { message, .. } => message.clone(),
        DockerError::DockerStreamError { error } => error.clone(),
        other => other.to_string(),
    }
}

fn unreadable_credentials(repository: &Repository, why: String) -> RuntimeError {
    RuntimeError::ImagePush {
        image: "af's images".to_owned(),
        repository: repository.to_string(),
        message: why,
        next: format!("Run `docker login {}` and af up again.", repository.host()),
    }
}

/// The registry af pushes to: a repository and the credentials that push there.
#[derive(Debug, Clone)]
pub struct Registry {
    /// Where the images go.
    pub repository: Repository,
    /// Who pushes.
    pub credentials: Credentials,
}

impl Registry {
    /// Put the image `local` (on this machine's daemon, of `what`, a `kind` of image) in the
    /// repository unless it holds it already; returns the reference the nodes pull,
    /// `REPOSITORY@DIGEST`.
    pub async fn publish(
        &self,
        docker: &Docker,
        what: &str,
        kind: &str,
        local: &str,
        progress: &dyn Progress,
    ) -> Result<String, RuntimeError> {
        let inspected = docker
            .inspect_image(local)
            .await
            .map_err(|e| RuntimeError::engine(format!("inspect the {what} image"), e))?;
        let id = inspected.id.unwrap_or_default();
        let hex = id.strip_prefix("sha256:").unwrap_or(&id);
        let tag = format!("{kind}-{hex}");
        let remote = format!("{}:{tag}", self.repository);
        if let Some(digest) = self.held(docker, what, &remote).await? {
            progress.step(&format!("{what}: {remote} is in the registry already"));
            return Ok(format!("{}@{digest}", self.repository));
        }
        let options = TagImageOptionsBuilder::default()
            .repo(&self.repository.name)
            .tag(&tag)
            .build();
        docker
            .tag_image(local, Some(options))
            .await
            .map_err(|e| RuntimeError::engine(format!("tag the {what} image {remote}"), e))?;
        progress.begin(&format!("pushing {what} to {remote}"))?;
        let options = PushImageOptionsBuilder::default().tag(&tag).build();
        let mut pushing = docker.push_image(
            &self.repository.name,
            Some(options),
            self.credentials.0.clone(),
        );
        let (mut sent, mut there) = (0, 0);
        while let Some(item) = pushing.next().await {
            let info = item.map_err(|e| self.refused(what, &e))?;
            match info.status.as_deref() {
                Some("Pushed") => sent += 1,
                Some(s) if s == "Layer already exists" || s.starts_with("Mounted from") => {
                    there += 1;
                }
                _ => {}
            }
        }
        let digest = self.held(docker, what, &remote).await?.ok_or_else(|| {
            self.failed(
                what,
                "the registry does not hold the image after its push".to_owned(),
            )
        })?;
        progress.step(&format!(
            "{what}: pushed {remote} ({digest}; {sent} layer(s) sent, {there} there already)"
        ));
        Ok(format!("{}@{digest}", self.repository))
    }

    /// The digest the registry holds for `remote`, or `None` when it holds no such tag.
    async fn held(
        &self,
        docker: &Docker,
        what: &str,
        remote: &str,
    ) -> Result<Option<String>, RuntimeError> {
        match docker
            .inspect_registry_image(remote, self.credentials.0.clone())
            .await
        {
            Ok(found) => Ok(found.descriptor.digest),
            Err(DockerError::DockerResponseServerError {
                status_code: 404, ..
            }) => Ok(None),
            Err(e) => Err(self.refused(what, &e)),
        }
    }

    /// The refusal of a registry that answered `err`: its credentials refused or missing, or
    /// the registry not reached.
    fn refused(&self, what: &str, err: &DockerError) -> RuntimeError {
        let message = daemon_said(err);
        let host = self.repository.host();
        let lowered = message.to_lowercase();
        let next = if lowered.contains("unauthorized")
            || lowered.contains("denied")
            || lowered.contains("no basic auth credentials")
            || lowered.contains("authentication required")
        {
            if self.credentials.is_some() {
                format!(
                    "The registry refused the credentials Docker holds for {host}: run `docker login {host}` with an account that may push to {}, then af up again.",
                    self.repository
                )
            } else {
                format!(
                    "Docker holds no credentials for {host}: run `docker login {host}`, then af up again."
                )
            }
        } else {
            format!(
                "Check that {host} answers from this machine's Docker daemon (`docker pull {host}/…` shows the same), and that the daemon trusts its certificate (/etc/docker/certs.d/{host}/ca.crt), then af up again."
            )
        };
        RuntimeError::ImagePush {
            image: what.to_owned(),
            repository: self.repository.to_string(),
            message: self.credentials.scrub(&message),
            next,
        }
    }

    fn failed(&self, what: &str, message: String) -> RuntimeError {
        RuntimeError::ImagePush {
            image: what.to_owned(),
            repository: self.repository.to_string(),
            message,
            next: "Run af up again; if it repeats, push the image by hand to see what the registry says."
                .to_owned(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_repository_is_a_registry_host_and_a_path_without_tag() {
        let ok = Repository::parse(" 10.250.0.1:5443/team/af ").expect("parsed");
        assert_eq!(ok.host(), "10.250.0.1:5443");
        assert_eq!(ok.to_string(), "10.250.0.1:5443/team/af");
        assert_eq!(
            Repository::parse("123456789012.dkr.ecr.eu-west-1.amazonaws.com/af")
                .expect("ecr")
                .host(),
            "123456789012.dkr.ecr.eu-west-1.amazonaws.com"
        );
        assert_eq!(
            Repository::parse("docker.io/team/af")
                .expect("hub")
                .config_key(),
            DOCKER_HUB_KEY
        );
        for bad in [
            "af",
            "team/af",
            "registry.example.com/team/af:latest",
            "registry.example.com/team/af@sha256:00",
            "registry.example.com/Team/af",
            "registry.example.com/",
            "registry.example.com//af",
        ] {
            let refused = Repository::parse(bad).expect_err(bad);
            let report = refused.report();
            assert_eq!(report.code.code, "AF-RUN-044", "{bad}");
            assert!(report.statement.contains(REPOSITORY_VAR), "{report:?}");
            assert!(
                report.next.contains("registry.example.com/team/af"),
                "{report:?}"
            );
        }
    }

    #[test]
    fn credentials_are_never_printed_and_are_scrubbed_from_messages() {
        let repository = Repository::parse("registry.example.com/af").expect("parsed");
        let found = Credentials::read(
            &repository,
            Ok(DockerCredential::UsernamePassword(
                "robot".to_owned(),
                "hunter2-secret".to_owned(),
            )),
            "test",
        )
        .expect("read");
        assert_eq!(format!("{found:?}"), "Credentials(redacted)");
        assert_eq!(
            found.scrub("denied for robot:hunter2-secret"),
            "denied for robot:[redacted]"
        );
        let json = found.docker_config_json(&repository).expect("a config");
        let config: serde_json::Value = serde_json::from_slice(&json).expect("json");
        assert_eq!(
            config["auths"]["registry.example.com"]["auth"],
            "cm9ib3Q6aHVudGVyMi1zZWNyZXQ="
        );
        assert!(
            Credentials::none()
                .docker_config_json(&repository)
                .is_none()
        );
    }

    #[test]
    fn a_store_with_nothing_for_the_registry_means_no_credentials() {
        let repository = Repository::parse("registry.example.com/af").expect("parsed");
        let none = Credentials::read(
            &repository,
            Err(CredentialRetrievalError::HelperFailure {
                helper: "docker-credential-desktop".to_owned(),
                stdout: "credentials not found in native keychain\n".to_owned(),
                stderr: String::new(),
            }),
            "test",
        )
        .expect("anonymous, as Docker takes it");
        assert!(!none.is_some());
    }

    #[test]
    fn a_failing_helper_is_named_without_what_it_printed() {
        let repository = Repository::parse("registry.example.com/af").expect("parsed");
        let refused = Credentials::read(
            &repository,
            Err(CredentialRetrievalError::HelperFailure {
                helper: "docker-credential-pass".to_owned(),
                stdout: "the-token-itself".to_owned(),
                stderr: "the-token-itself".to_owned(),
            }),
            "this machine's Docker configuration",
        )
        .expect_err("refused");
        let report = refused.report();
        assert_eq!(report.code.code, "AF-RUN-011");
        assert!(
            report.statement.contains("docker-credential-pass"),
            "{report:?}"
        );
        assert!(!format!("{report:?}").contains("the-token-itself"));
        assert!(report.next.contains("docker login registry.example.com"));
    }
}
