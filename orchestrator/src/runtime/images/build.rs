//! One image build on the daemon: its output streamed to the progress display line by line,
//! the last lines kept for the error when it fails.

use std::collections::{HashMap, VecDeque};

use bollard::Docker;
use bollard::query_parameters::BuildImageOptionsBuilder;
use futures_util::StreamExt;

use crate::runtime::{Phase, Progress, RuntimeError};

/// Lines of build output kept for an error.
const TAIL_LINES: usize = 20;

/// Build `tag` from the archived `context` with the Dockerfile named (`Dockerfile` if none),
/// labelled `labels`; `service` names what is built in the progress display and the error.
pub(super) async fn build(
    docker: &Docker,
    service: &str,
    tag: &str,
    dockerfile: Option<&str>,
    labels: &HashMap<String, String>,
    context: Vec<u8>,
    progress: &dyn Progress,
) -> Result<(), RuntimeError> {
    let options = BuildImageOptionsBuilder::default()
        .dockerfile(dockerfile.unwrap_or("Dockerfile"))
        .t(tag)
        .rm(true)
        .forcerm(true)
        .labels(labels)
        .build();
    let mut stream = docker.build_image(options, None, Some(bollard::body_full(context.into())));
    let mut tail: VecDeque<String> = VecDeque::with_capacity(TAIL_LINES);
    let keep = |line: &str, tail: &mut VecDeque<String>| {
        for l in line.lines().map(str::trim_end).filter(|l| !l.is_empty()) {
            if tail.len() == TAIL_LINES {
                tail.pop_front();
            }
            tail.push_back(l.to_owned());
            progress.phase(service, Phase::Building { line: l });
        }
    };
    while let Some(item) = stream.next().await {
        let info = match item {
            Ok(info) => info,
            Err(bollard::errors::Error::DockerStreamError { error }) => {
                keep(&error, &mut tail);
                return Err(build_failed(service, error, tail));
            }
            Err(e) => {
                let message = e.to_string();
                keep(&message, &mut tail);
                return Err(build_failed(service, message, tail));
            }
        };
        if let Some(line) = info.stream.as_deref() {
            keep(line, &mut tail);
        }
        if let Some(detail) = info.error_detail {
            let message = detail
                .message
                .unwrap_or_else(|| "the build failed".to_owned());
            keep(&message, &mut tail);
            return Err(build_failed(service, message, tail));
        }
    }
    Ok(())
}

fn build_failed(service: &str, message: String, tail: VecDeque<String>) -> RuntimeError {
    RuntimeError::ImageBuild {
        service: service.to_owned(),
        message: message.trim().to_owned(),
        tail: tail.into_iter().collect(),
    }
}
