//! Images a node could not pull, named per image: a pod whose container waits on
//! `ImagePullBackOff`, `ErrImageNeverPull` or `InvalidImageName` is refused (AF-RUN-012) with
//! the image and what the kubelet said of it, read from the pod's events ("Failed to pull
//! image …: unauthorized"), rather than left to a timeout. A first `ErrImagePull` is not: the
//! kubelet retries a network blip or a registry's 5xx, and backs off only once it failed.

use k8s_openapi::api::core::v1::{ContainerStatus, Event, Pod};
use kube::api::{Api, ListParams};
use kube::{Client, ResourceExt};

use crate::runtime::RuntimeError;

/// The waiting reasons of a container whose image the node does not have and will not get.
const UNPULLED: [&str; 3] = ["ImagePullBackOff", "ErrImageNeverPull", "InvalidImageName"];

/// A container of a pod whose image could not be pulled.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unpulled {
    /// The image it names.
    pub image: String,
    /// The waiting reason and the kubelet's message on it.
    pub said: String,
}

/// The first container (init containers first) of `pod` waiting on an image it cannot get.
pub fn unpulled(pod: &Pod) -> Option<Unpulled> {
    let (container, reason, message) = waiting_on(pod, &UNPULLED)?;
    let specified = pod
        .spec
        .iter()
        .flat_map(|s| s.init_containers.iter().flatten().chain(&s.containers))
        .find(|c| c.name == container.name)
        .and_then(|c| c.image.clone());
    Some(Unpulled {
        image: specified.unwrap_or_else(|| container.image.clone()),
        said: match message {
            Some(message) => format!("{reason}: {message}"),
            None => reason.to_owned(),
        },
    })
}

/// The first container of `pod` (init containers first) waiting on one of `reasons`: its
/// status, the reason and the kubelet's message.
pub fn waiting_on<'a>(
    pod: &'a Pod,
    reasons: &[&str],
) -> Option<(&'a ContainerStatus, &'a str, Option<&'a str>)> {
    let status = pod.status.as_ref()?;
    status
        .init_container_statuses
        .iter()
        .chain(status.container_statuses.iter())
        .flatten()
        .find_map(|c| {
            let waiting = c.state.as_ref()?.waiting.as_ref()?;
            let reason = waiting.reason.as_deref()?;
            reasons
                .contains(&reason)
                .then_some((c, reason, waiting.message.as_deref()))
        })
}

/// The refusal of `pod` (of `service`) when a container of it cannot get its image: the
/// kubelet's last "Failed to pull image" event on the pod, else the container's own state.
pub async fn refusal(client: &Client, pod: &Pod, service: &str) -> Option<RuntimeError> {
    let Unpulled { image, said } = unpulled(pod)?;
    let message = match pod.namespace() {
        Some(namespace) => last_failure(client, &namespace, &pod.name_any(), &image).await,
        None => None,
    };
    Some(RuntimeError::ImagePull {
        service: service.to_owned(),
        image,
        message: message.unwrap_or(said),
    })
}

/// What the newest event on `pod` said of failing to pull `image`.
async fn last_failure(client: &Client, namespace: &str, pod: &str, image: &str) -> Option<String> {
    let events: Api<Event> = Api::namespaced(client.clone(), namespace);
    let params = ListParams::default().fields(&format!("involvedObject.name={pod}"));
    let listed = events.list(&params).await.ok()?;
    listed
        .items
        .into_iter()
        .filter(|e| e.reason.as_deref() == Some("Failed"))
        .filter_map(|e| {
            let message = e.message?;
            message
                .contains(image)
                .then_some((e.last_timestamp.map(|t| t.0), message))
        })
        .max_by_key(|(at, _)| *at)
        .map(|(_, message)| message)
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::{
        Container, ContainerState, ContainerStateWaiting, ContainerStatus, PodSpec, PodStatus,
    };

    use super::*;

    fn waiting(name: &str, reason: &str, message: Option<&str>) -> ContainerStatus {
        ContainerStatus {
            name: name.to_owned(),
            image: "as-resolved".to_owned(),
            state: Some(ContainerState {
                waiting: Some(ContainerStateWaiting {
                    reason: Some(reason.to_owned()),
                    message: message.map(str::to_owned),
                }),
                ..ContainerState::default()
            }),
            ..ContainerStatus::default()
        }
    }

    fn pod(init: Vec<ContainerStatus>, main: Vec<ContainerStatus>) -> Pod {
        let container = |name: &str, image: &str| Container {
            name: name.to_owned(),
            image: Some(image.to_owned()),
            ..Container::default()
        };
        Pod {
            spec: Some(PodSpec {
                init_containers: Some(vec![container("af-gate", "registry.test/af@sha256:01")]),
                containers: vec![container("web", "registry.test/af@sha256:02")],
                ..PodSpec::default()
            }),
            status: Some(PodStatus {
                init_container_statuses: Some(init),
                container_statuses: Some(main),
                ..PodStatus::default()
            }),
            ..Pod::default()
        }
    }

    #[test]
    fn the_container_that_cannot_get_its_image_is_named_with_the_image_it_specifies() {
        let stuck = pod(
            vec![waiting("af-gate", "PodInitializing", None)],
            vec![waiting(
                "web",
                "ImagePullBackOff",
                Some("Back-off pulling image"),
            )],
        );
        assert_eq!(
            unpulled(&stuck),
            Some(Unpulled {
                image: "registry.test/af@sha256:02".to_owned(),
                said: "ImagePullBackOff: Back-off pulling image".to_owned(),
            })
        );
        let retrying = pod(vec![], vec![waiting("web", "ErrImagePull", None)]);
        assert_eq!(unpulled(&retrying), None, "the kubelet tries again first");
        let gate = pod(vec![waiting("af-gate", "ImagePullBackOff", None)], vec![]);
        assert_eq!(
            unpulled(&gate).map(|u| u.image),
            Some("registry.test/af@sha256:01".to_owned())
        );
        let crashing = pod(vec![], vec![waiting("web", "CrashLoopBackOff", None)]);
        assert_eq!(unpulled(&crashing), None, "not an image it lacks");
    }
}
