//! One Compose project to the services of an `af.yaml`: what has a meaning here is carried
//! over, everything else is listed with why, nothing is dropped silently.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use af_policy::egress::{EgressSpec, Mode};
use af_policy::manifest::{Capability, MANIFEST_VERSION, Resources, Service, ServiceKind};
use docker_compose_types::{
    BuildStep, Command, Compose, DependsOnOptions, Entrypoint, Environment, HealthcheckTest, Ports,
    Service as ComposeService, StringOrList,
};
use serde::Serialize;

/// What a Compose project becomes: the manifest's text, and what was not carried over.
#[derive(Debug, Clone, Serialize)]
pub struct Adoption {
    /// The project's name.
    pub name: String,
    /// The services, as af names them.
    pub services: Vec<String>,
    /// Every field not carried over, with why.
    pub left: Vec<Left>,
    /// Fields refused because a contained service cannot have them.
    pub refused: Vec<Left>,
    /// The `af.yaml` to write.
    #[serde(skip)]
    pub text: String,
}

/// One field of the Compose file that `af.yaml` does not hold.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Left {
    /// The service it belongs to (as Compose names it), or `None` for a top-level field.
    pub service: Option<String>,
    /// The field, as Compose spells it (`volumes`, `cap_add: NET_ADMIN`).
    pub field: String,
    /// Why.
    pub why: String,
}

/// Why each Compose field af does not carry is left out.
fn why_left(field: &str) -> &'static str {
    match field {
        "volumes" | "volumes_from" | "tmpfs" => {
            "af environments are throwaway: a service keeps no volume, and its files start from the image each time"
        }
        "networks" | "network_mode" | "links" | "hostname" | "domainname" | "mac_address" => {
            "every service is on the environment's one internal network, reached by its name; the sidecar is its only way out"
        }
        "extra_hosts" | "dns" | "dns_opt" | "dns_search" => {
            "the sidecar answers every name, so a service cannot be given other addresses or resolvers"
        }
        "pid" | "ipc" | "userns_mode" | "cgroup_parent" | "devices" | "runtime" | "sysctls"
        | "security_opt" => "it would share the host's or loosen the container's confinement",
        "container_name" => "af names containers per environment, so several can run side by side",
        "restart" => {
            "af restarts a service with af restart; a crash ends af up with the service's logs"
        }
        "labels" | "logging" | "stop_signal" | "stop_grace_period" | "init" | "user"
        | "working_dir" | "stdin_open" | "tty" | "shm_size" | "ulimits" | "group_add"
        | "read_only" | "mem_reservation" | "mem_swappiness" | "pull_policy" | "platform" => {
            "af.yaml has no field for it; the image's own setting applies"
        }
        "profiles" => "every service of af.yaml runs in every environment",
        "secrets" | "configs" => {
            "af.yaml has no secrets or configs; name a value under env or env_file"
        }
        "extends" | "include" => "af reads one file; write the extended service out in full",
        "expose" => "only the first port is carried: a service has one",
        "healthcheck" => "only an HTTP path a check polls is carried (health_path)",
        "deploy" => "only replicas and resource limits are carried",
        "build" => "only the context and Dockerfile are carried",
        "cap_drop" => "every capability is dropped already but those cap_add names",
        _ if field.starts_with("x-") => "an extension field, read by other tools",
        _ => "af.yaml has no field for it",
    }
}

/// The Compose service fields this translation reads.
const CARRIED: &[&str] = &[
    "build",
    "image",
    "command",
    "entrypoint",
    "environment",
    "env_file",
    "ports",
    "expose",
    "depends_on",
    "healthcheck",
    "cap_add",
    "cap_drop",
    "privileged",
    "deploy",
    "scale",
    "mem_limit",
];

/// Turn `compose` (read from `compose_file`) into the `af.yaml` written in `manifest_dir`,
/// named `fallback_name` when the project names none.
pub fn adopt(
    compose: &Compose,
    compose_file: &Path,
    manifest_dir: &Path,
    fallback_name: &str,
) -> Adoption {
    let compose_dir = compose_file.parent().unwrap_or(Path::new("."));
    let mut left = Vec::new();
    let mut refused = Vec::new();
    let names: BTreeMap<&str, String> = compose
        .services
        .0
        .keys()
        .map(|name| (name.as_str(), af_name(name)))
        .collect();
    let mut services = Vec::new();
    for (name, service) in &compose.services.0 {
        let default = ComposeService::default();
        let service = service.as_ref().unwrap_or(&default);
        let mut one = One {
            compose: name,
            left: &mut left,
            refused: &mut refused,
        };
        services.push(one.service(
            &names[name.as_str()],
            service,
            &names,
            compose_dir,
            manifest_dir,
        ));
    }
    top_level_left(compose, &mut left);
    let name = compose
        .name
        .as_deref()
        .map_or_else(|| af_name(fallback_name), af_name);
    let egress = EgressSpec {
        default: Some(Mode::Block),
        ..EgressSpec::default()
    };
    let text = render(&name, &services, &egress, compose_file, &left, &refused);
    Adoption {
        name,
        services: services.iter().map(|s| s.name.clone()).collect(),
        left,
        refused,
        text,
    }
}

/// The fields of one service being translated, and where what is left goes.
struct One<'a> {
    compose: &'a str,
    left: &'a mut Vec<Left>,
    refused: &'a mut Vec<Left>,
}

impl One<'_> {
    fn leave(&mut self, field: impl Into<String>, why: impl Into<String>) {
        self.left.push(Left {
            service: Some(self.compose.to_owned()),
            field: field.into(),
            why: why.into(),
        });
    }

    fn refuse(&mut self, field: impl Into<String>, why: impl Into<String>) {
        self.refused.push(Left {
            service: Some(self.compose.to_owned()),
            field: field.into(),
            why: why.into(),
        });
    }

    fn service(
        &mut self,
        name: &str,
        c: &ComposeService,
        names: &BTreeMap<&str, String>,
        compose_dir: &Path,
        manifest_dir: &Path,
    ) -> Service {
        if name != self.compose {
            self.leave(
                "name",
                format!("renamed {name}: a service name is a DNS label (lowercase letters, digits, dashes)"),
            );
        }
        let mut service = Service {
            name: name.to_owned(),
            path: ".".to_owned(),
            dockerfile: None,
            image: None,
            entrypoint: Vec::new(),
            command: Vec::new(),
            kind: ServiceKind::Worker,
            schedule: None,
            port: None,
            health_path: None,
            health_timeout: None,
            env: BTreeMap::new(),
            env_file: Vec::new(),
            replicas: None,
            resources: Resources::default(),
            depends_on: Vec::new(),
            migrate: Vec::new(),
            capabilities: Vec::new(),
        };
        self.source(&mut service, c, compose_dir, manifest_dir);
        if let Some(command) = &c.command {
            service.command = self.words(
                "command",
                match command {
                    Command::Simple(s) => Words::Shell(s),
                    Command::Args(v) => Words::List(v),
                },
            );
        }
        if let Some(entrypoint) = &c.entrypoint {
            service.entrypoint = self.words(
                "entrypoint",
                match entrypoint {
                    Entrypoint::Simple(s) => Words::Shell(s),
                    Entrypoint::List(v) => Words::List(v),
                },
            );
        }
        service.env = self.environment(&c.environment);
        if let Some(files) = &c.env_file {
            service.env_file = match files {
                StringOrList::Simple(one) => vec![rebase(one, compose_dir, manifest_dir)],
                StringOrList::List(many) => many
                    .iter()
                    .map(|f| rebase(f, compose_dir, manifest_dir))
                    .collect(),
            };
        }
        self.ports(&mut service, c);
        self.health(&mut service, c);
        service.depends_on = self.depends_on(&c.depends_on, names);
        self.capabilities(&mut service, c);
        self.limits(&mut service, c);
        self.rest(c);
        service
    }

    /// Built from a context and Dockerfile, or run from an image.
    fn source(
        &mut self,
        service: &mut Service,
        c: &ComposeService,
        compose_dir: &Path,
        manifest_dir: &Path,
    ) {
        match &c.build_ {
            Some(BuildStep::Simple(context)) => {
                service.path = rebase(context, compose_dir, manifest_dir);
            }
            Some(BuildStep::Advanced(build)) => {
                service.path = rebase(&build.context, compose_dir, manifest_dir);
                service.dockerfile.clone_from(&build.dockerfile);
                let mut more = Vec::new();
                if build.args.is_some() {
                    more.push("args");
                }
                if build.target.is_some() {
                    more.push("target");
                }
                if build.dockerfile_inline.is_some() {
                    more.push("dockerfile_inline");
                }
                for field in more {
                    self.leave(format!("build.{field}"), why_left("build"));
                }
            }
            None => match &c.image {
                Some(image) => service.image = Some(image.clone()),
                None => self.leave(
                    "build",
                    "the service names neither a build nor an image; it is built from the directory of af.yaml",
                ),
            },
        }
        if c.build_.is_some() && c.image.is_some() {
            self.leave(
                "image",
                "with build, Compose only tags the image it builds under this name; af names its own",
            );
        }
    }

    fn words(&mut self, field: &str, words: Words<'_>) -> Vec<String> {
        match words {
            Words::List(list) => list.clone(),
            Words::Shell(line) => shlex::split(line).unwrap_or_else(|| {
                self.leave(
                    field,
                    format!(
                        "{line:?} cannot be split into words as a shell would; write it as a list"
                    ),
                );
                Vec::new()
            }),
        }
    }

    fn environment(&mut self, environment: &Environment) -> BTreeMap<String, String> {
        let pairs: Vec<(String, Option<String>)> = match environment {
            Environment::List(list) => list
                .iter()
                .map(|item| match item.split_once('=') {
                    Some((k, v)) => (k.to_owned(), Some(v.to_owned())),
                    None => (item.clone(), None),
                })
                .collect(),
            Environment::KvPair(map) => map
                .iter()
                .map(|(k, v)| (k.clone(), v.as_ref().map(ToString::to_string)))
                .collect(),
        };
        let mut env = BTreeMap::new();
        for (name, value) in pairs {
            let field = format!("environment.{name}");
            match value {
                None => self.leave(
                    field,
                    "its value comes from the shell that runs Compose; af.yaml holds values, or env_file names a file that does",
                ),
                Some(value) if value.contains('$') => self.leave(
                    field,
                    "its value is filled in from the shell or .env by Compose; af.yaml holds values as written",
                ),
                Some(_) if !is_env_name(&name) => self.leave(
                    field,
                    "not a variable name af sets (letters, digits and underscores, not starting with a digit)",
                ),
                Some(value) => {
                    env.insert(name, value);
                }
            }
        }
        env
    }

    /// The container port of `ports` (published: a web service) or `expose` (a worker that
    /// listens); a service has one.
    fn ports(&mut self, service: &mut Service, c: &ComposeService) {
        let published: Vec<Option<u16>> = match &c.ports {
            Ports::Short(list) => list.iter().map(|p| short_port(p)).collect(),
            Ports::Long(list) => list
                .iter()
                .map(|p| (p.protocol.as_deref().unwrap_or("tcp") == "tcp").then_some(p.target))
                .collect(),
        };
        let exposed: Vec<Option<u16>> = c.expose.iter().map(|p| short_port(p)).collect();
        let (field, kind, ports) = if published.is_empty() {
            ("expose", ServiceKind::Worker, exposed)
        } else {
            if !c.expose.is_empty() {
                self.leave(
                    "expose",
                    "the published port (ports) is the service's one port",
                );
            }
            ("ports", ServiceKind::Web, published)
        };
        let mut carried = false;
        for (i, port) in ports.into_iter().enumerate() {
            match port {
                Some(port) if !carried => {
                    service.port = Some(port);
                    service.kind = kind;
                    carried = true;
                }
                Some(port) => self.leave(
                    format!("{field}[{i}]"),
                    format!("a service has one port; {port} is not carried"),
                ),
                None => self.leave(
                    format!("{field}[{i}]"),
                    "not one TCP port (a range, UDP, or unreadable)",
                ),
            }
        }
    }

    /// A health check that polls an HTTP path on the service becomes its `health_path`.
    fn health(&mut self, service: &mut Service, c: &ComposeService) {
        let Some(check) = &c.healthcheck else { return };
        if check.disable {
            return;
        }
        let words: Vec<&str> = match &check.test {
            Some(HealthcheckTest::Single(line)) => line.split_whitespace().collect(),
            Some(HealthcheckTest::Multiple(list)) => {
                list.iter().flat_map(|w| w.split_whitespace()).collect()
            }
            None => Vec::new(),
        };
        let path = words
            .iter()
            .filter_map(|w| url::Url::parse(w.trim_matches(|c| c == '"' || c == '\'')).ok())
            .find(|u| {
                matches!(u.scheme(), "http" | "https")
                    && matches!(
                        u.host_str(),
                        Some("localhost" | "127.0.0.1" | "[::1]" | "0.0.0.0")
                    )
            })
            .map(|u| u.path().to_owned());
        match (path, service.port) {
            (Some(path), Some(_)) => service.health_path = Some(path),
            (Some(_), None) => self.leave(
                "healthcheck",
                "it polls an HTTP path, but the service has no port to ask it on",
            ),
            (None, _) => self.leave(
                "healthcheck",
                "it does not poll an HTTP path; af takes the service as ready when its port accepts",
            ),
        }
        if check.interval.is_some() || check.retries > 0 || check.start_period.is_some() {
            self.leave(
                "healthcheck.interval/retries/start_period",
                "a service has health_timeout (60 s unless set) to become ready",
            );
        }
    }

    fn depends_on(
        &mut self,
        depends_on: &DependsOnOptions,
        names: &BTreeMap<&str, String>,
    ) -> Vec<String> {
        let listed: Vec<(&str, Option<&str>)> = match depends_on {
            DependsOnOptions::Simple(list) => list.iter().map(|n| (n.as_str(), None)).collect(),
            DependsOnOptions::Conditional(map) => map
                .iter()
                .map(|(n, c)| (n.as_str(), Some(c.condition.as_str())))
                .collect(),
        };
        let mut out = Vec::new();
        for (name, condition) in listed {
            if condition == Some("service_completed_successfully") {
                self.leave(
                    format!("depends_on.{name}"),
                    "af waits for a service to be ready, not to finish; a one-off step before a service is its migrate",
                );
            }
            match names.get(name) {
                Some(af) => out.push(af.clone()),
                None => self.leave(
                    format!("depends_on.{name}"),
                    "no service of the Compose file has this name",
                ),
            }
        }
        out
    }

    fn capabilities(&mut self, service: &mut Service, c: &ComposeService) {
        for name in &c.cap_add {
            let bare = name.trim().trim_start_matches("CAP_").to_ascii_uppercase();
            let field = format!("cap_add: {name}");
            match serde_json::from_value::<Capability>(serde_json::Value::String(bare)) {
                Ok(cap) => match cap.refusal() {
                    Some(why) => self.refuse(field, format!("refused: {why}")),
                    None => service.capabilities.push(cap),
                },
                Err(_) if name.eq_ignore_ascii_case("ALL") => self.refuse(
                    field,
                    "refused: it would give back NET_RAW, NET_ADMIN and SYS_ADMIN, which go around the sidecar",
                ),
                Err(_) => self.leave(field, "not a Linux capability af knows"),
            }
        }
        if !c.cap_drop.is_empty() {
            self.leave("cap_drop", why_left("cap_drop"));
        }
        if c.privileged {
            self.refuse(
                "privileged",
                "refused: a privileged container holds every capability and the host's devices, so it could send around the sidecar",
            );
        }
    }

    fn limits(&mut self, service: &mut Service, c: &ComposeService) {
        if let Some(deploy) = &c.deploy {
            if let Some(replicas) = deploy.replicas {
                service.replicas = u32::try_from(replicas).ok().filter(|r| *r >= 1);
            }
            if let Some(limits) = deploy.resources.as_ref().and_then(|r| r.limits.as_ref()) {
                service.resources.cpu.clone_from(&limits.cpus);
                service.resources.memory = limits.memory.as_deref().and_then(|m| self.memory(m));
            }
            let mut rest = serde_json::to_value(deploy).unwrap_or_default();
            if let Some(map) = rest.as_object_mut() {
                map.remove("replicas");
                if let Some(resources) = map.get_mut("resources").and_then(|r| r.as_object_mut()) {
                    if let Some(limits) =
                        resources.get_mut("limits").and_then(|l| l.as_object_mut())
                    {
                        limits.remove("cpus");
                        limits.remove("memory");
                        if limits.is_empty() {
                            resources.remove("limits");
                        }
                    }
                    if resources.is_empty() {
                        map.remove("resources");
                    }
                }
                for (key, _) in map.iter().filter(|(_, v)| !is_empty_json(v)) {
                    self.leave(format!("deploy.{key}"), why_left("deploy"));
                }
            }
        }
        if c.scale > 0 && service.replicas.is_none() {
            service.replicas = u32::try_from(c.scale).ok();
        }
        if let Some(memory) = &c.mem_limit
            && service.resources.memory.is_none()
        {
            service.resources.memory = self.memory(memory);
        }
        // A limit af would refuse (none at all in Docker's words, such as 0, or finer than af
        // takes) is left out, with af's own reason.
        let (cpu, memory) = (
            service.resources.cpu.take(),
            service.resources.memory.take(),
        );
        for (field, cpu, memory) in [("cpus", cpu, None), ("memory", None, memory)] {
            let one = Resources { cpu, memory };
            match one.limits(&service.name) {
                Ok(_) => {
                    service.resources.cpu = service.resources.cpu.take().or(one.cpu);
                    service.resources.memory = service.resources.memory.take().or(one.memory);
                }
                Err(report) => self.leave(field, report.statement),
            }
        }
        // A replica count af would refuse is left out the same way.
        if let Some(replicas) = service.replicas.filter(|r| !(1..=64).contains(r)) {
            service.replicas = None;
            self.leave(
                "replicas",
                format!("{replicas} replicas: af runs 1 to 64 copies"),
            );
        }
    }

    /// Docker's memory notation (`256m`, `1g`, `512mb`: powers of 1024) in af's (`256Mi`).
    fn memory(&mut self, text: &str) -> Option<String> {
        let lower = text.trim().to_ascii_lowercase();
        let digits = lower.trim_end_matches(|c: char| c.is_ascii_alphabetic());
        let unit = match &lower[digits.len()..] {
            "" | "b" => "",
            "k" | "kb" => "Ki",
            "m" | "mb" => "Mi",
            "g" | "gb" => "Gi",
            _ => {
                self.leave(
                    "memory",
                    format!("{text:?} is not a memory size Docker writes (b, k, m, g)"),
                );
                return None;
            }
        };
        if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
            self.leave(
                "memory",
                format!("{text:?} is not a whole number of a unit"),
            );
            return None;
        }
        Some(format!("{digits}{unit}"))
    }

    /// Every field set that this translation does not read.
    fn rest(&mut self, c: &ComposeService) {
        let Ok(serde_json::Value::Object(fields)) = serde_json::to_value(c) else {
            return;
        };
        for (field, value) in fields {
            if CARRIED.contains(&field.as_str()) || is_empty_json(&value) {
                continue;
            }
            self.leave(field.clone(), why_left(&field));
        }
    }
}

/// A command as Compose takes it: one line split as a shell would, or a list.
enum Words<'a> {
    Shell(&'a str),
    List(&'a Vec<String>),
}

fn top_level_left(compose: &Compose, left: &mut Vec<Left>) {
    let Ok(serde_json::Value::Object(fields)) = serde_json::to_value(compose) else {
        return;
    };
    for (field, value) in fields {
        if ["services", "name", "version"].contains(&field.as_str()) || is_empty_json(&value) {
            continue;
        }
        left.push(Left {
            service: None,
            why: why_left(&field).to_owned(),
            field,
        });
    }
}

fn is_empty_json(value: &serde_json::Value) -> bool {
    match value {
        serde_json::Value::Null | serde_json::Value::Bool(false) => true,
        serde_json::Value::Array(a) => a.is_empty(),
        serde_json::Value::Object(o) => o.is_empty(),
        serde_json::Value::Number(n) => n.as_i64() == Some(0),
        serde_json::Value::String(_) | serde_json::Value::Bool(true) => false,
    }
}

/// The container port of a short `ports` or `expose` entry (`8080:80`, `127.0.0.1:8080:80`,
/// `80`, `80/tcp`); `None` for a range, UDP, or anything else.
fn short_port(entry: &str) -> Option<u16> {
    let (port, protocol) = entry.split_once('/').unwrap_or((entry, "tcp"));
    if protocol != "tcp" {
        return None;
    }
    port.rsplit(':').next()?.parse().ok()
}

/// A Compose service or project name as a DNS label: lowercase, `_` and `.` as `-`, starting
/// with a letter (`s-` before one that does not), at most 63 characters.
fn af_name(name: &str) -> String {
    let label: String = name
        .chars()
        .map(|c| match c.to_ascii_lowercase() {
            c @ ('a'..='z' | '0'..='9' | '-') => c,
            _ => '-',
        })
        .collect();
    let label = label.trim_matches('-');
    let label = if label.is_empty() {
        "app".to_owned()
    } else if label.starts_with(|c: char| c.is_ascii_lowercase()) {
        label.to_owned()
    } else {
        format!("s-{label}")
    };
    label[..label.len().min(63)]
        .trim_end_matches('-')
        .to_owned()
}

fn is_env_name(name: &str) -> bool {
    let mut bytes = name.bytes();
    bytes
        .next()
        .is_some_and(|b| b.is_ascii_alphabetic() || b == b'_')
        && bytes.all(|b| b.is_ascii_alphanumeric() || b == b'_')
}

/// A path Compose reads relative to its file, as af.yaml in `manifest_dir` reads it.
fn rebase(path: &str, compose_dir: &Path, manifest_dir: &Path) -> String {
    let absolute =
        std::path::absolute(compose_dir.join(path)).unwrap_or_else(|_| PathBuf::from(path));
    let manifest_dir = std::path::absolute(manifest_dir).unwrap_or_default();
    let normal = normalize(&absolute);
    match normal.strip_prefix(normalize(&manifest_dir)) {
        Ok(inside) if inside.as_os_str().is_empty() => ".".to_owned(),
        Ok(inside) => inside.display().to_string(),
        Err(_) => normal.display().to_string(),
    }
}

/// `.` and `..` taken out of an absolute path, without asking the file system.
fn normalize(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for part in path.components() {
        match part {
            std::path::Component::CurDir => {}
            std::path::Component::ParentDir => {
                out.pop();
            }
            other => out.push(other),
        }
    }
    out
}

/// The written manifest: what `af.yaml` holds, in its order.
#[derive(Serialize)]
struct Written<'a> {
    version: u32,
    name: &'a str,
    services: &'a [Service],
    egress: &'a EgressSpec,
}

fn render(
    name: &str,
    services: &[Service],
    egress: &EgressSpec,
    compose_file: &Path,
    left: &[Left],
    refused: &[Left],
) -> String {
    let body = serde_saphyr::to_string(&Written {
        version: MANIFEST_VERSION,
        name,
        services,
        egress,
    })
    .unwrap_or_default();
    let mut text = format!(
        "# Written by af init from {}.\n# Check it with af validate; af up starts it.\n",
        compose_file.display()
    );
    if !left.is_empty() || !refused.is_empty() {
        text.push_str(
            "#\n# Not carried over from the Compose file (af init lists each with why):\n",
        );
        for l in refused.iter().chain(left) {
            let at = l
                .service
                .as_deref()
                .map_or_else(String::new, |s| format!("{s}: "));
            text.push_str(&format!("#   {at}{}: {}\n", l.field, l.why));
        }
    }
    text.push('\n');
    for line in body.lines() {
        if line == "egress:" {
            text.push_str(
                "# Every request out is refused until a rule lets it through. Run the services, then\n\
                 # af net suggest proposes rules from what they sent (af net log shows it).\n",
            );
        }
        text.push_str(line);
        text.push('\n');
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_ports_give_their_container_port() {
        assert_eq!(short_port("8080:80"), Some(80));
        assert_eq!(short_port("127.0.0.1:8080:80/tcp"), Some(80));
        assert_eq!(short_port("5432"), Some(5432));
        assert_eq!(short_port("53:53/udp"), None);
        assert_eq!(short_port("3000-3005"), None);
    }

    #[test]
    fn compose_names_become_dns_labels() {
        assert_eq!(af_name("My_Service.v2"), "my-service-v2");
        assert_eq!(af_name("web"), "web");
        assert_eq!(af_name("__"), "app");
        assert_eq!(af_name("0"), "s-0");
        assert_eq!(af_name(&"a".repeat(70)), "a".repeat(63));
    }

    #[test]
    fn paths_are_read_from_where_af_yaml_is() {
        let root = Path::new("/repo");
        assert_eq!(rebase(".", root, root), ".");
        assert_eq!(rebase("./web", root, root), "web");
        assert_eq!(rebase("../web", &root.join("deploy"), root), "web");
        assert_eq!(rebase("web", &root.join("deploy"), root), "deploy/web");
    }
}

#[cfg(test)]
mod properties {
    use super::*;
    use proptest::prelude::*;

    /// A Compose service as YAML, from parts a project may hold, odd ones among them.
    fn service() -> impl Strategy<Value = String> {
        let name = "[a-zA-Z0-9][a-zA-Z0-9_.-]{0,12}";
        let port = prop_oneof![
            Just("\"8080:80\"".to_owned()),
            Just("\"127.0.0.1:5432:5432/tcp\"".to_owned()),
            Just("\"53:53/udp\"".to_owned()),
            Just("\"3000-3005\"".to_owned()),
            Just("\"x\"".to_owned()),
            (1u16..).prop_map(|p| format!("\"{p}\"")),
        ];
        let env = ("[A-Za-z_.0-9-]{1,8}", "[ -~]{0,12}")
            .prop_map(|(k, v)| format!("      {k:?}: {v:?}\n"));
        let cap = prop_oneof![
            Just("CHOWN"),
            Just("NET_RAW"),
            Just("CAP_SYS_ADMIN"),
            Just("ALL"),
            Just("NOT_ONE"),
            Just("setuid"),
        ];
        let command = "[ -~]{0,20}";
        (
            name,
            proptest::collection::vec(port, 0..3),
            proptest::collection::vec(env, 0..3),
            proptest::collection::vec(cap, 0..3),
            command,
            any::<bool>(),
            prop_oneof![Just("build: ."), Just("image: redis:7"), Just("")],
            proptest::option::of("[0-9]{1,4}[kmgKMG]?b?"),
        )
            .prop_map(
                |(name, ports, env, caps, command, privileged, source, memory)| {
                    let mut yaml = format!("  {name:?}:\n    {source}\n");
                    if !ports.is_empty() {
                        yaml.push_str(&format!("    ports: [{}]\n", ports.join(", ")));
                    }
                    if !env.is_empty() {
                        yaml.push_str("    environment:\n");
                        yaml.push_str(&env.concat());
                    }
                    if !caps.is_empty() {
                        yaml.push_str(&format!("    cap_add: [{}]\n", caps.join(", ")));
                    }
                    yaml.push_str(&format!(
                        "    command: {command:?}\n    privileged: {privileged}\n"
                    ));
                    if let Some(memory) = memory {
                        yaml.push_str(&format!("    mem_limit: {memory:?}\n"));
                    }
                    yaml
                },
            )
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        /// Whatever a Compose file holds that the model reads, the af.yaml written from it is
        /// one af reads as written, or names two services alike (which af init refuses).
        #[test]
        fn what_is_written_is_a_manifest_af_reads(services in proptest::collection::vec(service(), 1..4)) {
            let text = format!("services:\n{}", services.concat());
            let Ok(compose) = serde_saphyr::from_str::<Compose>(&text) else {
                return Ok(());
            };
            let adoption = adopt(&compose, Path::new("/repo/compose.yaml"), Path::new("/repo"), "repo");
            let read = af_policy::manifest::Manifest::from_bytes(
                adoption.text.as_bytes(),
                Path::new("af.yaml"),
            );
            let names: std::collections::BTreeSet<&String> = adoption.services.iter().collect();
            if names.len() == adoption.services.len() {
                prop_assert!(read.is_ok(), "{}\n{:?}", adoption.text, read.err().map(|e| e.to_string()));
            }
            for left in adoption.left.iter().chain(&adoption.refused) {
                prop_assert!(!left.why.is_empty());
            }
        }
    }
}
