//! The cluster a kubeconfig context names: the client, the words `af up` uses to say where it
//! runs, and how the API server's refusals become coded errors.

use std::fmt;

use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Client, Config};

use crate::runtime::RuntimeError;

/// Which cluster, as the user should read it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClusterId {
    /// The kubeconfig context (the current one when the manifest names none).
    pub context: String,
    /// The API server's URL.
    pub server: String,
}

impl fmt::Display for ClusterId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "kubeconfig context {}, API server {}",
            self.context, self.server
        )
    }
}

/// A client for `context`, or the kubeconfig's current context when `None` (KUBECONFIG, else
/// `~/.kube/config`). Nothing is asked of the API server yet.
pub async fn connect(context: Option<&str>) -> Result<(Client, ClusterId), RuntimeError> {
    let shown = context.unwrap_or("(current)").to_owned();
    let unreachable = |message: String| RuntimeError::ClusterUnreachable {
        context: shown.clone(),
        message,
    };
    let kubeconfig = Kubeconfig::read().map_err(|e| unreachable(e.to_string()))?;
    let name = context
        .map(str::to_owned)
        .or_else(|| kubeconfig.current_context.clone())
        .ok_or_else(|| {
            unreachable("the kubeconfig has no current context and the manifest names none".into())
        })?;
    let options = KubeConfigOptions {
        context: Some(name.clone()),
        ..KubeConfigOptions::default()
    };
    let config = Config::from_custom_kubeconfig(kubeconfig, &options)
        .await
        .map_err(|e| unreachable(e.to_string()))?;
    let server = config.cluster_url.to_string();
    let client = Client::try_from(config).map_err(|e| unreachable(e.to_string()))?;
    Ok((
        client,
        ClusterId {
            context: name,
            server: server.trim_end_matches('/').to_owned(),
        },
    ))
}

/// The coded error for a failed request while doing `context` ("create namespace af-pr-42").
pub fn refused(context: impl Into<String>) -> impl FnOnce(kube::Error) -> RuntimeError {
    move |e| RuntimeError::Api {
        context: context.into(),
        message: match e {
            kube::Error::Api(status) => format!("{} ({})", status.message, status.code),
            other => other.to_string(),
        },
    }
}

/// Whether the API server answered `code` (404 not found, 409 conflict).
pub fn is_status(e: &kube::Error, code: u16) -> bool {
    matches!(e, kube::Error::Api(status) if status.code == code)
}
