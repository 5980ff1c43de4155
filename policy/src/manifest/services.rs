//! What the shape check cannot see about services: names, dependencies and fields that only
//! make sense together.

use std::collections::HashMap;

use super::model::{Service, ServiceKind};
use super::names::dns_label_problem;
use super::path::FieldPath;
use super::quantity;
use crate::error::{Report, codes};

/// Every problem with `services`, each at its path from the top of the manifest. A `None` is a
/// service whose shape was refused: the others are still checked, but a dependency is only
/// called missing when every service could be read, since it may name the unreadable one.
pub(crate) fn check(services: &[Option<Service>]) -> Vec<(FieldPath, Report)> {
    let list = FieldPath::root().key("services");
    let mut problems = Vec::new();
    let mut first_named: HashMap<&str, usize> = HashMap::new();
    let readable = services
        .iter()
        .enumerate()
        .filter_map(|(i, s)| Some((i, s.as_ref()?)));
    for (i, service) in readable {
        let at = list.index(i);
        if let Some(report) = dns_label_problem(&service.name, "service name") {
            problems.push((at.key("name"), report));
        }
        if first_named.contains_key(service.name.as_str()) {
            problems.push((
                at.key("name"),
                Report::new(
                    &codes::MAN_DUPLICATE,
                    format!("Two services are named {}.", service.name),
                ),
            ));
        } else {
            first_named.insert(&service.name, i);
        }
        problems.extend(check_fields(service, &at));
    }
    problems.extend(check_dependencies(services, &first_named, &list));
    problems
}

/// Fields of one service that depend on each other or on a notation.
fn check_fields(service: &Service, at: &FieldPath) -> Vec<(FieldPath, Report)> {
    let name = &service.name;
    let mut problems = Vec::new();
    let mut refuse = |path: FieldPath, code, statement: String, next: &str| {
        problems.push((path, Report::new(code, statement).with_next(next)));
    };
    if service.kind == ServiceKind::Web && service.port.is_none() {
        refuse(
            at.clone(),
            &codes::MAN_MISSING_KEY,
            format!("Service {name} is a web service but has no port."),
            "Give it a port, or set kind: worker.",
        );
    }
    match (&service.schedule, service.kind) {
        (None, ServiceKind::Cron) => refuse(
            at.clone(),
            &codes::MAN_MISSING_KEY,
            format!("Service {name} is a cron service but has no schedule."),
            "Add schedule: with five cron fields, e.g. \"*/15 * * * *\".",
        ),
        (Some(_), ServiceKind::Web | ServiceKind::Worker) => refuse(
            at.key("schedule"),
            &codes::MAN_WRONG_TYPE,
            format!("Service {name} has a schedule but is not a cron service."),
            "Set kind: cron, or remove the schedule.",
        ),
        (Some(schedule), ServiceKind::Cron) if schedule.split_whitespace().count() != 5 => refuse(
            at.key("schedule"),
            &codes::MAN_WRONG_TYPE,
            format!("The schedule {schedule:?} of service {name} is not five cron fields."),
            "Write minute, hour, day of month, month and day of week, e.g. \"*/15 * * * *\".",
        ),
        _ => {}
    }
    if let (ServiceKind::Cron, Some(replicas @ 2..)) = (service.kind, service.replicas) {
        refuse(
            at.key("replicas"),
            &codes::MAN_WRONG_TYPE,
            format!(
                "Service {name} is a cron service, which runs once per schedule, but asks for {replicas} replicas."
            ),
            "Remove replicas (a cron service runs one copy each time), or set kind: worker.",
        );
    }
    if let Some(image) = &service.image {
        if let Err(why) = image.parse::<oci_spec::distribution::Reference>() {
            refuse(
                at.key("image"),
                &codes::MAN_WRONG_TYPE,
                format!("The image {image:?} of service {name} is not an image reference ({why})."),
                "Write a reference as docker pull takes it, e.g. postgres:16 or registry.example.com/team/db:1.2.",
            );
        }
        if service.path != "." || service.dockerfile.is_some() {
            refuse(
                at.key("image"),
                &codes::MAN_WRONG_TYPE,
                format!("Service {name} names both an image and a build (path or dockerfile)."),
                "Keep image: to run that image as it is, or path:/dockerfile: to build one.",
            );
        }
    }
    if let Some(health_path) = &service.health_path {
        if !health_path.starts_with('/') {
            refuse(
                at.key("health_path"),
                &codes::MAN_WRONG_TYPE,
                format!("The health_path {health_path:?} of service {name} does not start with /."),
                "Write the path from its first slash, e.g. /healthz.",
            );
        }
        if service.port.is_none() {
            refuse(
                at.key("health_path"),
                &codes::MAN_WRONG_TYPE,
                format!("Service {name} has a health_path but no port to ask it on."),
                "Give the service a port, or remove health_path.",
            );
        }
    }
    for variable in service.env.keys().filter(|k| !is_env_name(k)) {
        refuse(
            at.key("env").key(variable.clone()),
            &codes::MAN_WRONG_TYPE,
            format!("The environment variable name {variable:?} of service {name} is not valid."),
            "Use letters, digits and underscores, not starting with a digit.",
        );
    }
    for (k, cap) in service.capabilities.iter().enumerate() {
        if let Some(why) = cap.refusal() {
            refuse(
                at.key("capabilities").index(k),
                &codes::MAN_CAPABILITY,
                format!("Service {name} asks for {cap}, and {why}."),
                "Remove it; if the service cannot run without it, it cannot run contained.",
            );
        }
    }
    let resources = at.key("resources");
    if let Some(Err(report)) = service
        .resources
        .cpu
        .as_deref()
        .map(|c| quantity::cpu(name, c))
    {
        problems.push((resources.key("cpu"), report));
    }
    if let Some(Err(report)) = service
        .resources
        .memory
        .as_deref()
        .map(|m| quantity::memory(name, m))
    {
        problems.push((resources.key("memory"), report));
    }
    problems
}

/// Missing dependencies, and every dependency cycle (named, at the entry that closes it).
fn check_dependencies(
    services: &[Option<Service>],
    index: &HashMap<&str, usize>,
    list: &FieldPath,
) -> Vec<(FieldPath, Report)> {
    let mut problems = Vec::new();
    // edges[v] = (position in depends_on, service it names)
    let complete = services.iter().all(Option::is_some);
    let name = |i: usize| services[i].as_ref().map_or("", |s| s.name.as_str());
    let mut edges: Vec<Vec<(usize, usize)>> = vec![Vec::new(); services.len()];
    for (i, service) in services.iter().enumerate() {
        let Some(service) = service else { continue };
        for (k, dependency) in service.depends_on.iter().enumerate() {
            match index.get(dependency.as_str()) {
                Some(&j) => edges[i].push((k, j)),
                None if !complete => {}
                None => problems.push((
                    list.index(i).key("depends_on").index(k),
                    Report::new(
                        &codes::MAN_MISSING_DEPENDENCY,
                        format!(
                            "Service {} depends on {dependency}, which the manifest does not declare.",
                            service.name
                        ),
                    ),
                )),
            }
        }
    }

    // Depth-first search without recursion, so a long chain cannot exhaust the stack.
    #[derive(Clone, Copy, PartialEq)]
    enum Mark {
        New,
        OnPath,
        Done,
    }
    let mut mark = vec![Mark::New; services.len()];
    for start in 0..services.len() {
        if mark[start] != Mark::New {
            continue;
        }
        mark[start] = Mark::OnPath;
        let mut path: Vec<(usize, usize)> = vec![(start, 0)];
        while let Some((v, next)) = path.last_mut() {
            let v = *v;
            let Some(&(k, w)) = edges[v].get(*next) else {
                mark[v] = Mark::Done;
                path.pop();
                continue;
            };
            *next += 1;
            match mark[w] {
                Mark::New => {
                    mark[w] = Mark::OnPath;
                    path.push((w, 0));
                }
                Mark::OnPath => {
                    let from = path.iter().position(|(u, _)| *u == w).unwrap_or_default();
                    let mut cycle: Vec<&str> = path[from..].iter().map(|(u, _)| name(*u)).collect();
                    cycle.push(name(w));
                    problems.push((
                        list.index(v).key("depends_on").index(k),
                        Report::new(
                            &codes::MAN_CYCLE,
                            format!(
                                "The services' depends_on form a cycle: {}.",
                                cycle.join(" → ")
                            ),
                        ),
                    ));
                }
                Mark::Done => {}
            }
        }
    }
    problems
}

fn is_env_name(name: &str) -> bool {
    !name.is_empty()
        && !name.starts_with(|c: char| c.is_ascii_digit())
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
}
