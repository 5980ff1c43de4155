//! The registry path on a real cluster: `af up` with a registry named (`AF_IMAGE_REPOSITORY`)
//! against a real registry the test starts (Debian's `docker-registry`, TLS from a test CA,
//! basic authentication), the nodes made to pull (`AF_KUBE_IMAGES=registry`, and the local
//! copies of what was pushed removed), then refused with a wrong password and with the
//! registry down, nothing created either time. No credential appears in anything af printed
//! or journaled.

#[allow(dead_code, reason = "shared with the other Kubernetes tests")]
mod cluster;
#[allow(dead_code, reason = "shared with the other Kubernetes tests")]
mod process;
mod registry;

use std::collections::BTreeSet;

use bollard::Docker;
use bollard::query_parameters::{ListImagesOptionsBuilder, RemoveImageOptionsBuilder};
use k8s_openapi::api::core::v1::{Event, Pod};
use kube::api::{Api, ListParams};

use cluster::World;
use registry::Registry;

/// The exit status of a runtime refusal (docs/errors.md).
const RUNTIME_EXIT: i32 = 4;

/// Every image reference the namespace's pods name (init containers too).
async fn pod_images(world: &World) -> BTreeSet<String> {
    Api::<Pod>::namespaced(world.client.clone(), &world.namespace())
        .list(&ListParams::default())
        .await
        .unwrap_or_else(|e| panic!("list pods: {e}"))
        .items
        .into_iter()
        .filter_map(|p| p.spec)
        .flat_map(|s| s.init_containers.into_iter().flatten().chain(s.containers))
        .filter_map(|c| c.image)
        .collect()
}

/// What the kubelet said of images in the namespace (reason `Pulled`: "Successfully pulled
/// image" or "already present on machine").
async fn pull_events(world: &World) -> Vec<String> {
    Api::<Event>::namespaced(world.client.clone(), &world.namespace())
        .list(&ListParams::default())
        .await
        .unwrap_or_else(|e| panic!("list events: {e}"))
        .items
        .into_iter()
        .filter(|e| e.reason.as_deref() == Some("Pulled"))
        .filter_map(|e| e.message)
        .collect()
}

/// Wait for the kubelet to say it pulled every one of `images`. A kubelet writes its events at
/// a limited rate, so on a busy node they arrive well after the pods run.
async fn wait_pulled(world: &World, images: &BTreeSet<String>) {
    let said = |events: &[String], image: &str| {
        events
            .iter()
            .any(|m| m.starts_with(&format!("Successfully pulled image \"{image}\"")))
    };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(180);
    loop {
        let events = pull_events(world).await;
        let missing: Vec<&String> = images.iter().filter(|i| !said(&events, i)).collect();
        if missing.is_empty() {
            return;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the node pulled {missing:?}: {events:#?}"
        );
        tokio::time::sleep(std::time::Duration::from_secs(2)).await;
    }
}

/// Untag every local reference to the repository (tags and digests), so a node that wants one
/// of its images must pull it; the images themselves stay under af's own tags.
async fn forget_pushed(docker: &Docker, repository: &str) -> usize {
    let images = docker
        .list_images(Some(ListImagesOptionsBuilder::default().all(true).build()))
        .await
        .unwrap_or_else(|e| panic!("docker images: {e}"));
    let mine: Vec<String> = images
        .into_iter()
        .flat_map(|i| i.repo_tags.into_iter().chain(i.repo_digests))
        .filter(|r| {
            r.starts_with(&format!("{repository}:")) || r.starts_with(&format!("{repository}@"))
        })
        .collect();
    for reference in &mine {
        // Untagging an image's last tag in the repository takes its digests with it.
        match docker
            .remove_image(
                reference,
                Some(RemoveImageOptionsBuilder::default().noprune(true).build()),
                None,
            )
            .await
        {
            Ok(_)
            | Err(bollard::errors::Error::DockerResponseServerError {
                status_code: 404, ..
            }) => {}
            Err(e) => panic!("docker rmi {reference}: {e}"),
        }
    }
    let left = docker.inspect_image(&mine[0]).await.map(|_| "still there");
    assert!(left.is_err(), "{} {left:?}", mine[0]);
    mine.len()
}

#[tokio::test]
async fn images_go_through_a_registry_by_digest_and_a_bad_registry_creates_nothing() {
    let world = World::enforced("registry", 5).await;
    let mut registry =
        Registry::start(&std::env::temp_dir().join(format!("af-registry-{}", world.env)));
    let repository = registry.repository();
    let good = registry.docker_config("good", &registry.password.clone());
    let wrong = registry.docker_config("wrong", "not-the-password");
    let vars = |config: &std::path::Path| -> Vec<(String, String)> {
        vec![
            ("AF_KUBE_IMAGES".to_owned(), "registry".to_owned()),
            ("AF_IMAGE_REPOSITORY".to_owned(), repository.clone()),
            ("DOCKER_CONFIG".to_owned(), config.display().to_string()),
            // Teardown's pace is not what this test is about (a loaded node takes longer).
            ("AF_KUBE_DOWN_TIMEOUT".to_owned(), "300".to_owned()),
        ]
    };
    let run = |args: &'static [&'static str], config: &std::path::Path| {
        let extra = vars(config);
        let world = &world;
        async move {
            let extra: Vec<(&str, &str)> = extra
                .iter()
                .map(|(k, v)| (k.as_str(), v.as_str()))
                .collect();
            world.af(args, &extra).await
        }
    };
    let mut printed = String::new();

    // The first up pushes every image it made and the pods run them by digest.
    let up = run(&["up"], &good).await;
    printed.push_str(&up.stdout);
    printed.push_str(&up.stderr);
    assert_eq!(
        up.code,
        0,
        "{}{}\nregistry:\n{}",
        up.stdout,
        up.stderr,
        registry.log()
    );
    for what in ["probe", "sidecar", "web"] {
        assert!(
            up.stderr.contains(&format!("{what}: pushed {repository}:")),
            "{what} pushed: {}",
            up.stderr
        );
    }
    let docker = Docker::connect_with_local_defaults().unwrap_or_else(|e| panic!("{e}"));
    let images = pod_images(&world).await;
    let digest_prefix = format!("{repository}@sha256:");
    assert!(!images.is_empty());
    for image in &images {
        assert!(image.starts_with(&digest_prefix), "by digest: {images:?}");
        let digest = &image[repository.len() + 1..];
        assert_eq!(
            registry.manifest_status(digest),
            "200",
            "the registry holds {image}"
        );
        // The digest is the one the push recorded for the image af made.
        let inspected = docker
            .inspect_image(image)
            .await
            .unwrap_or_else(|e| panic!("{image} is the pushed image here: {e}"));
        assert!(
            inspected.repo_digests.unwrap_or_default().contains(image),
            "{image}"
        );
    }

    // The nodes must pull: the namespace goes, every local reference to the repository goes.
    let down = run(&["down"], &good).await;
    assert_eq!(down.code, 0, "{}{}", down.stdout, down.stderr);
    assert!(forget_pushed(&docker, &repository).await >= 3);
    let pushes_before = registry.log().matches("http.request.method=PUT").count();

    // The second up pushes nothing, and the kubelet pulls each image with the pull secret.
    let again = run(&["up"], &good).await;
    printed.push_str(&again.stdout);
    printed.push_str(&again.stderr);
    assert_eq!(
        again.code,
        0,
        "{}{}\nregistry:\n{}",
        again.stdout,
        again.stderr,
        registry.log()
    );
    assert!(!again.stderr.contains(": pushed "), "{}", again.stderr);
    for what in ["probe", "sidecar", "web"] {
        assert!(
            again.stderr.contains(&format!("{what}: {repository}:"))
                && again.stderr.contains("is in the registry already"),
            "{what}: {}",
            again.stderr
        );
    }
    assert_eq!(
        registry.log().matches("http.request.method=PUT").count(),
        pushes_before,
        "nothing was pushed"
    );
    let running = pod_images(&world).await;
    assert!(
        running.len() >= 3,
        "the probe's, the sidecar's and web's: {running:?}"
    );
    // The kubelet says it pulled each (the local copies are only under af's own tags).
    wait_pulled(&world, &running).await;
    let reads: [&'static [&'static str]; 2] =
        [&["net", "log", "-o", "json"], &["status", "-o", "json"]];
    for args in reads {
        let read = run(args, &good).await;
        assert_eq!(read.code, 0, "{}{}", read.stdout, read.stderr);
        printed.push_str(&read.stdout);
        printed.push_str(&read.stderr);
    }
    let down = run(&["down"], &good).await;
    assert_eq!(down.code, 0, "{}{}", down.stdout, down.stderr);
    printed.push_str(&down.stdout);
    printed.push_str(&down.stderr);

    // A wrong password is refused, the registry named, and nothing is created.
    let refused = run(&["up"], &wrong).await;
    printed.push_str(&refused.stdout);
    printed.push_str(&refused.stderr);
    assert_eq!(
        refused.code, RUNTIME_EXIT,
        "{}{}",
        refused.stdout, refused.stderr
    );
    assert!(refused.stderr.contains("AF-RUN-011"), "{}", refused.stderr);
    assert!(refused.stderr.contains(&repository), "{}", refused.stderr);
    assert!(
        refused.stderr.contains("refused the credentials"),
        "{}",
        refused.stderr
    );
    assert!(world.read_namespace().await.is_none(), "nothing created");

    // A registry that is down gets the same.
    registry.stop();
    let down_registry = run(&["up"], &good).await;
    printed.push_str(&down_registry.stdout);
    printed.push_str(&down_registry.stderr);
    assert_eq!(
        down_registry.code, RUNTIME_EXIT,
        "{}{}",
        down_registry.stdout, down_registry.stderr
    );
    assert!(
        down_registry.stderr.contains("AF-RUN-011"),
        "{}",
        down_registry.stderr
    );
    assert!(
        down_registry.stderr.contains(&registry.host),
        "{}",
        down_registry.stderr
    );
    assert!(world.read_namespace().await.is_none(), "nothing created");

    // Not one credential in anything af printed or journaled, in any spelling.
    let auth = |password: &str| {
        use base64::Engine as _;
        base64::engine::general_purpose::STANDARD.encode(format!("{}:{password}", registry::USER))
    };
    for secret in [
        registry.password.clone(),
        auth(&registry.password),
        "not-the-password".to_owned(),
        auth("not-the-password"),
    ] {
        assert!(!printed.contains(&secret), "a credential was printed");
    }
}
