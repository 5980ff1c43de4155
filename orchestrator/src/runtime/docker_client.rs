//! The connection to this machine's Docker daemon, shared by the image supply and the local
//! runtime: local defaults (`DOCKER_HOST` or the Unix socket), with the API version negotiated
//! so an older engine (20.10 speaks 1.41) is spoken to in its own version.

use std::time::Duration;

use bollard::Docker;

use crate::runtime::RuntimeError;

/// How long one Docker API call may take (builds and waits stream, so this bounds a silence).
const TIMEOUT: Duration = Duration::from_secs(600);

/// Connect and negotiate the API version.
pub async fn connect() -> Result<Docker, RuntimeError> {
    let docker = Docker::connect_with_local_defaults()
        .map_err(|e| RuntimeError::Unreachable(e.to_string()))?
        .with_timeout(TIMEOUT);
    let docker = docker
        .negotiate_version()
        .await
        .map_err(|e| RuntimeError::Unreachable(e.to_string()))?;
    docker
        .ping()
        .await
        .map_err(|e| RuntimeError::Unreachable(e.to_string()))?;
    Ok(docker)
}

/// Whether an engine error is "no such object".
pub fn is_not_found(err: &bollard::errors::Error) -> bool {
    matches!(
        err,
        bollard::errors::Error::DockerResponseServerError {
            status_code: 404,
            ..
        }
    )
}
