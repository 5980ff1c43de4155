//! A fake API server for the call-sequence tests: kube's own client over tower-test's mock
//! service, answering from an in-memory store of objects keyed by their paths, and recording
//! every call in order. It does what the tests need of a cluster and no more: create, read,
//! list by labels, replace, delete; a Service gets a cluster address; a namespace brings its
//! default service account; a pod
//! ends as the test says; a Deployment is available at once; a Job runs one pod and ends as
//! the test says; the batch group serves CronJob under the versions the test says; a
//! namespace's deletion completes at once, is held by a finalizer, or waits on pods a kubelet
//! holds past their deletion (until they are removed with grace 0).

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};

use http::{Request, Response};
use http_body_util::BodyExt;
use kube::Client;
use kube::client::Body;
use serde_json::{Value, json};

/// How pods end once created.
#[derive(Clone)]
pub(super) enum PodEnd {
    /// Every container exits 0; its log is the line the test set for it.
    Ran,
    /// Every container waits on this reason forever.
    Stuck(&'static str),
}

/// What a kubelet does with the pods of a deleted namespace.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Kubelet {
    /// Lets them go at once.
    LetsGo,
    /// Holds them past their deletion time, their containers stopped, until a delete with
    /// grace 0.
    HoldsStopped,
    /// Holds them past their deletion time, their containers still running.
    HoldsRunning,
}

/// How Jobs end once created: their condition, and the one pod each runs.
#[derive(Clone)]
pub(super) enum JobEnd {
    /// Its pod's containers exit 0; the Job completes.
    Complete,
    /// Its main container exits with this status; the Job fails.
    Failed(i32),
    /// Its gate exits 1; the main container never starts; the Job fails.
    GateFailed,
}

/// What the fake knows and has been asked.
pub(super) struct State {
    /// Objects by path (`/api/v1/namespaces/af-pr-42`).
    pub objects: BTreeMap<String, Value>,
    /// Every call, `METHOD /path`, in order.
    pub calls: Vec<String>,
    /// The log line of each probe container, by container name.
    pub logs: HashMap<String, String>,
    /// How created pods end.
    pub pods: PodEnd,
    /// A finalizer that keeps a deleted namespace terminating, if any.
    pub hold_namespaces: Option<&'static str>,
    /// What the kubelet does with a deleted namespace's pods.
    pub kubelet: Kubelet,
    /// Whether `networking.k8s.io/v1` serves NetworkPolicy.
    pub serves_network_policy: bool,
    /// How created Jobs end.
    pub jobs: JobEnd,
    /// The batch group versions that list cronjobs (`batch/v1` serves Jobs either way).
    pub cron_versions: Vec<&'static str>,
    /// Paths answered 403 Forbidden (a user without the right to read them).
    pub forbidden: Vec<String>,
    /// An init container whose pods admission refuses (PodSecurity refusing `NET_ADMIN`).
    pub refused_init: Option<&'static str>,
}

/// The fake API server.
#[derive(Clone)]
pub(super) struct Fake {
    /// Its state, shared with the task that answers.
    pub state: Arc<Mutex<State>>,
}

impl Fake {
    /// A cluster with the `default/kubernetes` Service and nothing else of ours.
    pub(super) fn new() -> Fake {
        let mut objects = BTreeMap::new();
        objects.insert(
            "/api/v1/namespaces/default/services/kubernetes".to_owned(),
            json!({
                "apiVersion": "v1", "kind": "Service",
                "metadata": {"name": "kubernetes", "namespace": "default"},
                "spec": {"clusterIP": "10.96.0.1", "clusterIPs": ["10.96.0.1"],
                         "ports": [{"name": "https", "port": 443, "protocol": "TCP"}]}
            }),
        );
        Fake {
            state: Arc::new(Mutex::new(State {
                objects,
                calls: Vec::new(),
                logs: HashMap::new(),
                pods: PodEnd::Ran,
                hold_namespaces: None,
                kubelet: Kubelet::LetsGo,
                serves_network_policy: true,
                jobs: JobEnd::Complete,
                cron_versions: vec!["batch/v1"],
                forbidden: Vec::new(),
                refused_init: None,
            })),
        }
    }

    /// Run `f` on the state.
    pub(super) fn with<T>(&self, f: impl FnOnce(&mut State) -> T) -> T {
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        f(&mut state)
    }

    /// The calls so far.
    pub(super) fn calls(&self) -> Vec<String> {
        self.with(|s| s.calls.clone())
    }

    /// A kube client whose every request this fake answers.
    pub(super) fn client(&self) -> Client {
        let (service, mut handle) = tower_test::mock::pair::<Request<Body>, Response<Body>>();
        let fake = self.clone();
        tokio::spawn(async move {
            while let Some((request, respond)) = handle.next_request().await {
                let (parts, body) = request.into_parts();
                let body = body
                    .collect()
                    .await
                    .map(|b| b.to_bytes().to_vec())
                    .unwrap_or_default();
                let (status, reply) = fake.with(|s| s.answer(&parts, &body));
                let response = Response::builder()
                    .status(status)
                    .header("content-type", "application/json")
                    .body(Body::from(reply))
                    .unwrap_or_else(|_| Response::new(Body::from(Vec::new())));
                respond.send_response(response);
            }
        });
        Client::new(service, "default")
    }
}

/// Resource names that end a collection's path.
const COLLECTIONS: [&str; 16] = [
    "namespaces",
    "nodes",
    "pods",
    "networkpolicies",
    "services",
    "serviceaccounts",
    "endpoints",
    "configmaps",
    "deployments",
    "jobs",
    "cronjobs",
    "ingresses",
    "secrets",
    "persistentvolumeclaims",
    "storageclasses",
    "events",
];

impl State {
    fn answer(&mut self, parts: &http::request::Parts, body: &[u8]) -> (u16, Vec<u8>) {
        let path = parts.uri.path().trim_end_matches('/').to_owned();
        let query: HashMap<String, String> = parts
            .uri
            .query()
            .map(|q| serde_urlencoded::from_str(q).unwrap_or_default())
            .unwrap_or_default();
        let method = parts.method.as_str().to_owned();
        self.calls.push(format!("{method} {path}"));
        if self.forbidden.contains(&path) {
            return reply(
                403,
                &json!({"kind": "Status", "apiVersion": "v1", "status": "Failure",
                        "reason": "Forbidden", "code": 403, "message": format!("{path} is forbidden")}),
            );
        }
        let last = path.rsplit('/').next().unwrap_or_default();
        match (method.as_str(), last) {
            ("GET", "v1") if path == "/apis/networking.k8s.io/v1" => {
                let resources = if self.serves_network_policy {
                    json!([{"name": "networkpolicies", "singularName": "", "namespaced": true,
                            "kind": "NetworkPolicy", "verbs": ["create", "get", "list"]}])
                } else {
                    json!([])
                };
                reply(
                    200,
                    &json!({"kind": "APIResourceList", "groupVersion": "networking.k8s.io/v1", "resources": resources}),
                )
            }
            ("GET", "v1" | "v1beta1") if path.starts_with("/apis/batch/") => {
                let version = path.trim_start_matches("/apis/");
                let mut resources = Vec::new();
                if version == "batch/v1" {
                    resources.push(
                        json!({"name": "jobs", "singularName": "", "namespaced": true,
                                          "kind": "Job", "verbs": ["create", "get", "list"]}),
                    );
                }
                if self.cron_versions.contains(&version) {
                    resources.push(
                        json!({"name": "cronjobs", "singularName": "", "namespaced": true,
                                          "kind": "CronJob", "verbs": ["create", "get", "list"]}),
                    );
                }
                if resources.is_empty() {
                    return not_found(&path);
                }
                reply(
                    200,
                    &json!({"kind": "APIResourceList", "groupVersion": version, "resources": resources}),
                )
            }
            ("GET", "log") => {
                let container = query.get("container").cloned().unwrap_or_default();
                let line = self.logs.get(&container).cloned().unwrap_or_default();
                (200, format!("{line}\n").into_bytes())
            }
            ("GET", c) if COLLECTIONS.contains(&c) => {
                let selector = query.get("labelSelector").cloned().unwrap_or_default();
                let items: Vec<Value> = self
                    .objects
                    .iter()
                    .filter(|(k, _)| {
                        k.strip_prefix(&format!("{path}/"))
                            .is_some_and(|rest| !rest.contains('/'))
                    })
                    .map(|(_, v)| v.clone())
                    .filter(|v| matches(v, &selector))
                    .collect();
                reply(
                    200,
                    &json!({"apiVersion": "v1", "kind": "List", "metadata": {}, "items": items}),
                )
            }
            ("GET", _) => match self.objects.get(&path) {
                Some(v) => reply(200, v),
                None => not_found(&path),
            },
            ("POST", _) if query.get("dryRun").is_some_and(|d| d == "All") => {
                self.admit(&path, body)
            }
            ("POST", _) => self.create(&path, body),
            ("PUT", _) => {
                let Ok(mut object) = serde_json::from_slice::<Value>(body) else {
                    return reply(400, &json!({"kind": "Status", "code": 400}));
                };
                let Some(old) = self.objects.get(&path) else {
                    return not_found(&path);
                };
                let version = old["metadata"]["resourceVersion"]
                    .as_str()
                    .and_then(|v| v.parse::<u64>().ok())
                    .unwrap_or(0);
                object["metadata"]["resourceVersion"] = json!((version + 1).to_string());
                object["metadata"]["uid"] = old["metadata"]["uid"].clone();
                if path.contains("/deployments/") {
                    object["status"] = available(&object);
                }
                self.objects.insert(path, object.clone());
                reply(200, &object)
            }
            ("DELETE", _) => self.delete(&path, body),
            ("PATCH", _) => self.patch(&path, body),
            _ => reply(405, &json!({"kind": "Status", "code": 405})),
        }
    }

    /// A dry-run create: the object as admission would make it (a pod gets its service
    /// account's image pull secrets), stored nowhere.
    fn admit(&mut self, collection: &str, body: &[u8]) -> (u16, Vec<u8>) {
        let Ok(mut object) = serde_json::from_slice::<Value>(body) else {
            return reply(400, &json!({"kind": "Status", "code": 400}));
        };
        if let Some(namespace) = collection
            .strip_suffix("/pods")
            .filter(|_| object["spec"]["imagePullSecrets"].is_null())
        {
            let account = self
                .objects
                .get(&format!("{namespace}/serviceaccounts/default"))
                .map(|a| a["imagePullSecrets"].clone())
                .unwrap_or(Value::Null);
            object["spec"]["imagePullSecrets"] = account;
        }
        reply(201, &object)
    }

    fn create(&mut self, collection: &str, body: &[u8]) -> (u16, Vec<u8>) {
        let Ok(mut object) = serde_json::from_slice::<Value>(body) else {
            return reply(400, &json!({"kind": "Status", "code": 400}));
        };
        if let Some(refused) = self.refused_init {
            let inits = object["spec"]["initContainers"].as_array().cloned();
            if inits.into_iter().flatten().any(|c| c["name"] == refused) {
                return reply(
                    403,
                    &json!({"kind": "Status", "apiVersion": "v1", "status": "Failure",
                            "reason": "Forbidden", "code": 403,
                            "message": format!("pods is forbidden: violates PodSecurity \"baseline:latest\": non-default capabilities (container \"{refused}\" must not include \"NET_ADMIN\")")}),
                );
            }
        }
        let name = object["metadata"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        let path = format!("{collection}/{name}");
        if self.objects.contains_key(&path) {
            return reply(
                409,
                &json!({"kind": "Status", "apiVersion": "v1", "status": "Failure",
                        "reason": "AlreadyExists", "code": 409, "message": format!("{name} already exists")}),
            );
        }
        object["metadata"]["resourceVersion"] = json!("1");
        object["metadata"]["uid"] = json!(format!("uid-{}", self.objects.len()));
        if collection == "/api/v1/namespaces" {
            object["status"] = json!({"phase": "Active"});
            self.objects.insert(
                format!("{path}/serviceaccounts/default"),
                json!({"apiVersion": "v1", "kind": "ServiceAccount",
                       "metadata": {"name": "default", "namespace": name}}),
            );
        }
        if collection.ends_with("/pods") {
            object["status"] = self.pod_status(&object);
        }
        if collection.ends_with("/deployments") {
            object["status"] = available(&object);
        }
        if collection.ends_with("/services") && object["spec"]["clusterIP"].is_null() {
            let ip = format!("10.96.1.{}", self.objects.len() % 250 + 2);
            object["spec"]["clusterIP"] = json!(ip);
            object["spec"]["clusterIPs"] = json!([ip]);
        }
        if collection.ends_with("/jobs") {
            self.run_job(collection, &mut object);
        }
        self.objects.insert(path, object.clone());
        reply(201, &object)
    }

    /// Give the Job the selector the API server would, and its one pod, ended as `jobs` says.
    fn run_job(&mut self, collection: &str, job: &mut Value) {
        let name = job["metadata"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        let uid = job["metadata"]["uid"].clone();
        job["spec"]["selector"] = json!({"matchLabels": {"controller-uid": uid}});
        let mut labels = job["spec"]["template"]["metadata"]["labels"].clone();
        labels["controller-uid"] = uid.clone();
        labels["job-name"] = json!(name);
        let main = job["spec"]["template"]["spec"]["containers"][0]["name"].clone();
        let ended = |code: i32| json!({"terminated": {"exitCode": code}});
        let (condition, gate, container) = match self.jobs {
            JobEnd::Complete => ("Complete", ended(0), ended(0)),
            JobEnd::Failed(code) => ("Failed", ended(0), ended(code)),
            JobEnd::GateFailed => (
                "Failed",
                json!({"terminated": {"exitCode": 1, "message": "direct TCP to 198.51.100.10:8443 connected"}}),
                json!({"waiting": {"reason": "PodInitializing"}}),
            ),
        };
        job["status"] = json!({"conditions": [{"type": condition, "status": "True",
            "reason": if condition == "Failed" { "BackoffLimitExceeded" } else { "" }}]});
        let namespace = collection
            .strip_prefix("/apis/batch/v1/namespaces/")
            .and_then(|rest| rest.split('/').next())
            .unwrap_or_default();
        let status = |name: &Value, state: &Value| {
            json!({"name": name, "image": "", "imageID": "", "ready": false,
                   "restartCount": 0, "state": state})
        };
        let pod = format!("{name}-{}", self.objects.len());
        self.objects.insert(
            format!("/api/v1/namespaces/{namespace}/pods/{pod}"),
            json!({"apiVersion": "v1", "kind": "Pod",
                   "metadata": {"name": pod, "namespace": namespace, "labels": labels},
                   "status": {"phase": if condition == "Complete" { "Succeeded" } else { "Failed" },
                              "initContainerStatuses": [status(&json!("af-gate"), &gate)],
                              "containerStatuses": [status(&main, &container)]}}),
        );
    }

    /// A JSON merge patch; a Deployment's template patched is rolled out at once: its
    /// generation bumped, its pods replaced by one Running and Ready, its status available.
    fn patch(&mut self, path: &str, body: &[u8]) -> (u16, Vec<u8>) {
        let Ok(patch) = serde_json::from_slice::<Value>(body) else {
            return reply(400, &json!({"kind": "Status", "code": 400}));
        };
        let Some(object) = self.objects.get_mut(path) else {
            return not_found(path);
        };
        merge(object, &patch);
        let object = object.clone();
        if path.contains("/deployments/") {
            self.roll(path, &object);
        }
        reply(200, &self.objects.get(path).cloned().unwrap_or(object))
    }

    /// What the Deployment and ReplicaSet controllers would do with `deployment`'s new template.
    fn roll(&mut self, path: &str, deployment: &Value) {
        let generation = deployment["metadata"]["generation"].as_i64().unwrap_or(1) + 1;
        let Some(namespace) = path
            .strip_prefix("/apis/apps/v1/namespaces/")
            .and_then(|rest| rest.split('/').next())
            .map(str::to_owned)
        else {
            return;
        };
        let pods = format!("/api/v1/namespaces/{namespace}/pods/");
        let selector = &deployment["spec"]["selector"]["matchLabels"];
        let selects = |pod: &Value| {
            selector.as_object().is_some_and(|labels| {
                labels
                    .iter()
                    .all(|(k, v)| pod["metadata"]["labels"][k] == *v)
            })
        };
        self.objects
            .retain(|k, v| !(k.starts_with(&pods) && selects(v)));
        let name = format!(
            "{}-{generation}",
            deployment["metadata"]["name"].as_str().unwrap_or("pod")
        );
        let template = &deployment["spec"]["template"];
        let statuses: Vec<Value> = template["spec"]["containers"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|c| {
                json!({"name": c["name"], "image": "", "imageID": "", "ready": true,
                       "restartCount": 0, "state": {"running": {}}})
            })
            .collect();
        self.objects.insert(
            format!("{pods}{name}"),
            json!({"apiVersion": "v1", "kind": "Pod",
                   "metadata": {"name": name, "namespace": namespace,
                                "labels": template["metadata"]["labels"],
                                "creationTimestamp": "2026-12-01T00:00:00Z"},
                   "spec": template["spec"],
                   "status": {"phase": "Running", "containerStatuses": statuses,
                              "conditions": [{"type": "Ready", "status": "True"}]}}),
        );
        if let Some(d) = self.objects.get_mut(path) {
            d["metadata"]["generation"] = json!(generation);
            d["status"] = json!({"observedGeneration": generation, "replicas": 1,
                                 "updatedReplicas": 1, "readyReplicas": 1,
                                 "availableReplicas": 1});
        }
    }

    fn pod_status(&self, pod: &Value) -> Value {
        let names: Vec<String> = pod["spec"]["containers"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|c| c["name"].as_str().map(str::to_owned))
            .collect();
        let (phase, state) = match &self.pods {
            PodEnd::Ran => ("Succeeded", json!({"terminated": {"exitCode": 0}})),
            PodEnd::Stuck(reason) => ("Pending", json!({"waiting": {"reason": reason}})),
        };
        let statuses: Vec<Value> = names
            .iter()
            .map(|n| {
                json!({"name": n, "image": "", "imageID": "", "ready": false,
                           "restartCount": 0, "state": state})
            })
            .collect();
        json!({"phase": phase, "podIP": "10.244.0.99", "containerStatuses": statuses})
    }

    fn delete(&mut self, path: &str, body: &[u8]) -> (u16, Vec<u8>) {
        let Some(object) = self.objects.get(path).cloned() else {
            return not_found(path);
        };
        let namespace = path
            .strip_prefix("/api/v1/namespaces/")
            .filter(|rest| !rest.contains('/'));
        if namespace.is_some() && self.kubelet != Kubelet::LetsGo {
            return self.hold_pods(path, object);
        }
        if let Some((ns_path, _)) = path.split_once("/pods/") {
            let grace = serde_json::from_slice::<Value>(body)
                .ok()
                .and_then(|o| o["gracePeriodSeconds"].as_u64());
            let held = object["metadata"]["deletionTimestamp"].is_string();
            if held && grace != Some(0) {
                return reply(200, &object);
            }
            self.objects.remove(path);
            let emptied = !self
                .objects
                .keys()
                .any(|k| k.starts_with(&format!("{ns_path}/pods/")));
            if held && emptied {
                let inside = format!(
                    "/namespaces/{}/",
                    ns_path.trim_start_matches("/api/v1/namespaces/")
                );
                self.objects
                    .retain(|k, _| k != ns_path && !k.contains(&inside));
            }
            return reply(200, &object);
        }
        match (namespace, self.hold_namespaces) {
            (Some(_), Some(finalizer)) => {
                let mut held = object.clone();
                held["metadata"]["deletionTimestamp"] = json!("2026-12-01T00:00:00Z");
                held["spec"] = json!({"finalizers": ["kubernetes"]});
                held["status"] = json!({"phase": "Terminating", "conditions": [{
                    "type": "NamespaceFinalizersRemaining", "status": "True",
                    "reason": "SomeFinalizersRemain",
                    "message": format!("Some content in the namespace has finalizers remaining: {finalizer} in 1 resource instances")
                }]});
                self.objects.insert(path.to_owned(), held.clone());
                reply(200, &held)
            }
            (Some(ns), None) => {
                let inside = |k: &String| {
                    k.starts_with(&format!("{path}/")) || k.contains(&format!("/namespaces/{ns}/"))
                };
                self.objects.retain(|k, _| k != path && !inside(k));
                reply(200, &object)
            }
            (None, _) => {
                self.objects.remove(path);
                reply(200, &object)
            }
        }
    }
}

impl State {
    /// A namespace deleted while the kubelet holds its pods: it and they are marked deleted
    /// (long ago), its other content goes, and it stays while any pod does.
    fn hold_pods(&mut self, path: &str, object: Value) -> (u16, Vec<u8>) {
        const LONG_AGO: &str = "2026-12-01T00:00:00Z";
        let pods = format!("{path}/pods/");
        let state = match self.kubelet {
            Kubelet::HoldsRunning => json!({"running": {}}),
            _ => json!({"terminated": {"exitCode": 0}}),
        };
        let inside = format!(
            "/namespaces/{}/",
            path.trim_start_matches("/api/v1/namespaces/")
        );
        self.objects
            .retain(|k, _| !k.contains(&inside) || k.starts_with(&pods));
        for (_, pod) in self
            .objects
            .iter_mut()
            .filter(|(k, _)| k.starts_with(&pods))
        {
            pod["metadata"]["deletionTimestamp"] = json!(LONG_AGO);
            for status in pod["status"]["containerStatuses"]
                .as_array_mut()
                .into_iter()
                .flatten()
            {
                status["state"] = state.clone();
            }
        }
        let mut held = object;
        held["metadata"]["deletionTimestamp"] = json!(LONG_AGO);
        held["status"] = json!({"phase": "Terminating", "conditions": [{
            "type": "NamespaceContentRemaining", "status": "True",
            "reason": "SomeResourcesRemain",
            "message": "Some resources are remaining: pods. has 1 resource instances"
        }]});
        self.objects.insert(path.to_owned(), held.clone());
        reply(200, &held)
    }
}

/// The status of `deployment` with every replica it asks for updated and available.
fn available(deployment: &Value) -> Value {
    let n = deployment["spec"]["replicas"].as_u64().unwrap_or(1);
    json!({"replicas": n, "updatedReplicas": n, "availableReplicas": n, "readyReplicas": n})
}

/// RFC 7386: `patch` merged into `target`, `null` removing a key.
fn merge(target: &mut Value, patch: &Value) {
    let Some(fields) = patch.as_object() else {
        *target = patch.clone();
        return;
    };
    if !target.is_object() {
        *target = json!({});
    }
    for (k, v) in fields {
        if v.is_null() {
            if let Some(map) = target.as_object_mut() {
                map.remove(k);
            }
        } else {
            merge(&mut target[k], v);
        }
    }
}

fn matches(object: &Value, selector: &str) -> bool {
    selector.split(',').filter(|s| !s.is_empty()).all(|term| {
        let (k, v) = term.split_once('=').unwrap_or((term, ""));
        object["metadata"]["labels"][k].as_str() == Some(v)
    })
}

fn reply(status: u16, body: &Value) -> (u16, Vec<u8>) {
    (status, serde_json::to_vec(body).unwrap_or_default())
}

fn not_found(path: &str) -> (u16, Vec<u8>) {
    reply(
        404,
        &json!({"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "NotFound",
                "code": 404, "message": format!("{path} not found")}),
    )
}
