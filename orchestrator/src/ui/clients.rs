//! Which service a request came from. The journal names the client's address; the runtime's
//! status names each service's addresses now, so the page shows and filters by the service's
//! name. An address not known sends the runtime the question again at most once per
//! [`REFRESH`] (a restarted service has a new address), so a stream of records from a client
//! that is no service costs one status read per [`REFRESH`], not one per record.

use std::collections::HashMap;
use std::net::IpAddr;
use std::time::{Duration, Instant};

use af_sidecar_api::journal::{Entry, Record};
use serde_json::Value;
use tokio::sync::Mutex;

use super::Environment;
use crate::runtime::EnvStatus;

/// The shortest time between two status reads for addresses not known.
pub(super) const REFRESH: Duration = Duration::from_secs(2);

/// Service names by address, as the runtime's newest status gave them. Bounded by the
/// environment: each read replaces the whole map with the addresses its services hold now.
pub(super) struct Clients {
    environment: Option<Environment>,
    known: Mutex<Known>,
}

#[derive(Default)]
struct Known {
    names: HashMap<IpAddr, String>,
    asked: Option<Instant>,
}

impl Clients {
    /// Names from `environment`'s runtime; without one no client has a name.
    pub(super) fn new(environment: Option<Environment>) -> Self {
        Clients {
            environment,
            known: Mutex::new(Known::default()),
        }
    }

    /// `record` as the page reads it: its JSON with `service`, the name of the service whose
    /// address its client is, when one is.
    pub(super) async fn shown(&self, record: &Record) -> Value {
        let client = match &record.entry {
            Entry::Decision(d) => Some(d.client.ip()),
            _ => None,
        };
        let mut value = serde_json::to_value(record).unwrap_or(Value::Null);
        if let (Some(ip), Value::Object(fields)) = (client, &mut value)
            && let Some(name) = self.name(ip).await
        {
            fields.insert("service".to_owned(), Value::String(name));
        }
        value
    }

    /// The service at `ip`, asking the runtime again when it is not known and the last ask is
    /// older than [`REFRESH`].
    async fn name(&self, ip: IpAddr) -> Option<String> {
        let environment = self.environment.as_ref()?;
        let mut known = self.known.lock().await;
        if let Some(name) = known.names.get(&ip) {
            return Some(name.clone());
        }
        if known.asked.is_some_and(|at| at.elapsed() < REFRESH) {
            return None;
        }
        known.asked = Some(Instant::now());
        // A failed read keeps the names already known: the page still shows the address.
        if let Ok(status) = environment.runtime.status(&environment.env).await {
            known.names = by_address(&status);
        }
        known.names.get(&ip).cloned()
    }
}

/// Each service's addresses with its name; the sidecar's are left out (it makes no request
/// of itself).
fn by_address(status: &EnvStatus) -> HashMap<IpAddr, String> {
    status
        .services
        .iter()
        .flat_map(|s| s.addresses.iter().map(|ip| (*ip, s.name.clone())))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::env_id::EnvId;
    use crate::runtime::ServiceStatus;

    fn service(name: &str, addresses: &[&str]) -> ServiceStatus {
        ServiceStatus {
            name: name.to_owned(),
            state: "running".to_owned(),
            running: true,
            url: None,
            addresses: addresses
                .iter()
                .map(|a| a.parse().expect("an IP"))
                .collect(),
        }
    }

    #[test]
    fn every_address_of_every_service_names_it_and_the_sidecar_names_nothing() {
        let status = EnvStatus {
            env: EnvId::parse("shop-1a2b3c").expect("an id"),
            exists: true,
            sidecar: Some(service("sidecar", &["10.0.0.2"])),
            services: vec![
                service("web", &["10.0.0.3"]),
                service("worker", &["10.0.0.4", "10.0.0.5"]),
            ],
            journal: None,
            watched: None,
            on_loss: None,
            containment: None,
        };
        let names = by_address(&status);
        let name = |ip: &str| names.get(&ip.parse::<IpAddr>().expect("an IP")).cloned();
        assert_eq!(name("10.0.0.3").as_deref(), Some("web"));
        assert_eq!(name("10.0.0.4").as_deref(), Some("worker"));
        assert_eq!(name("10.0.0.5").as_deref(), Some("worker"));
        assert_eq!(name("10.0.0.2"), None);
        assert_eq!(names.len(), 3);
    }

    #[tokio::test]
    async fn without_a_runtime_a_record_is_shown_as_it_is() {
        let record = Record {
            seq: 7,
            at: "2026-12-02T10:00:00.000Z".to_owned(),
            env: "e".to_owned(),
            entry: Entry::Decision(af_sidecar_api::journal::DecisionRecord {
                host: "a.test".to_owned(),
                ..Default::default()
            }),
        };
        let shown = Clients::new(None).shown(&record).await;
        assert_eq!(shown["host"], "a.test");
        assert!(shown.get("service").is_none(), "{shown}");
    }
}
