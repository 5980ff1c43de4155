//! `af webhook trigger PROVIDER EVENT`: build the provider's payload (with every `--set`),
//! choose the service and path, sign it with the environment's webhook secret (derived from
//! the sidecar's token, as every service's variables are) and have the sidecar deliver it,
//! since only the sidecar is on the environment's internal network.

use std::io::Write;
use std::time::{SystemTime, UNIX_EPOCH};

use af_policy::error::Report;
use af_sidecar_api::admin::{Delivered, Delivery};
use serde_json::{Value, json};

use super::output::{Format, print_json};
use crate::admin;
use crate::env_id::EnvId;
use crate::plan::EnvPlan;
use crate::runtime::Runtime;
use crate::webhook::{self, Ids, Provider, Target, WebhookError, WebhookSecrets, sign, target};

/// Lines of the service's answer shown.
const SHOWN_LINES: usize = 20;

/// What the user asked for.
#[derive(Debug, Clone)]
pub struct Trigger {
    /// The provider.
    pub provider: Provider,
    /// The event type (`payment_intent.succeeded`, `push`, `pull_request.closed`, ...).
    pub event: String,
    /// `path=value` changes to the payload.
    pub sets: Vec<String>,
    /// The service, if not the only web service.
    pub service: Option<String>,
    /// The path, if not the rule's `webhook_path` or `/webhooks/<provider>`.
    pub path: Option<String>,
}

/// A webhook ready to sign: its body, ids, time and target. Made before any runtime is
/// reached, so a bad `--set` or service refuses at once.
#[derive(Debug, Clone)]
pub struct Prepared {
    provider: Provider,
    event: String,
    ids: Ids,
    created: u64,
    body: String,
    target: Target,
}

impl Prepared {
    /// Build the payload and choose the target.
    pub fn new(plan: &EnvPlan, trigger: &Trigger, now: SystemTime) -> Result<Prepared, Report> {
        let ids = Ids::random().map_err(|e| e.report())?;
        let created = now.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
        let body = webhook::body(
            trigger.provider,
            &trigger.event,
            &trigger.sets,
            &ids,
            created,
        )
        .map_err(|e| e.report())?;
        let target = target::resolve(
            plan,
            trigger.provider,
            trigger.service.as_deref(),
            trigger.path.as_deref(),
        )
        .map_err(|e| e.report())?;
        Ok(Prepared {
            provider: trigger.provider,
            event: trigger.event.clone(),
            ids,
            created,
            body,
            target,
        })
    }

    /// The exact body that will be sent.
    pub fn body(&self) -> &str {
        &self.body
    }

    /// Where it goes.
    pub fn target(&self) -> &Target {
        &self.target
    }
}

/// Sign and deliver; the service's answer, or AF-RUN-051 when it is not 2xx.
pub async fn run(
    runtime: &dyn Runtime,
    env: &EnvId,
    prepared: &Prepared,
    format: Format,
    out: &mut dyn Write,
) -> Result<Delivered, Report> {
    let endpoint = runtime.admin(env).await.map_err(|e| e.report())?;
    let secrets = WebhookSecrets::derive(&endpoint.token);
    let p = prepared;
    let headers = sign::headers(
        p.provider,
        &p.event,
        secrets.get(p.provider),
        p.created,
        &p.body,
        &p.ids,
    )
    .map_err(|e| e.report())?;
    let delivery = Delivery {
        service: p.target.service.clone(),
        port: p.target.port,
        path: p.target.path.clone(),
        method: Delivery::DEFAULT_METHOD.to_owned(),
        headers: headers.into_iter().collect(),
        body: p.body.clone(),
    };
    let answer = admin::deliver(endpoint.addr, &endpoint.token, &delivery)
        .await
        .map_err(|e| e.report())?;
    if !(200..300).contains(&answer.status) {
        return Err(WebhookError::Rejected {
            target: p.target.to_string(),
            status: answer.status,
            body: first_lines(&answer.body),
        }
        .report());
    }
    match format {
        Format::Json => print_json(
            out,
            &json!({
                "env": env.as_str(),
                "provider": p.provider.name(),
                "event": p.event,
                "target": { "service": p.target.service, "port": p.target.port, "path": p.target.path },
                "request": {
                    "headers": delivery.headers,
                    "body": serde_json::from_str::<Value>(&p.body).unwrap_or(Value::Null),
                },
                "response": answer,
            }),
        ),
        Format::Human => {
            let _ = writeln!(out, "→ {} {} to {}", p.provider, p.event, p.target);
            let _ = writeln!(out, "← {}", answer.status);
            for line in first_lines(&answer.body).lines() {
                let _ = writeln!(out, "  {line}");
            }
        }
    }
    Ok(answer)
}

/// The first [`SHOWN_LINES`] lines of `body`, with a note of how many more there were.
fn first_lines(body: &str) -> String {
    let lines: Vec<&str> = body.lines().collect();
    let mut shown = lines
        .iter()
        .take(SHOWN_LINES)
        .copied()
        .collect::<Vec<_>>()
        .join("\n");
    if lines.len() > SHOWN_LINES {
        shown.push_str(&format!("\n… {} more lines", lines.len() - SHOWN_LINES));
    }
    shown
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_answers_are_cut_to_twenty_lines_with_a_count() {
        let body: String = (1..=25).map(|i| format!("line {i}\n")).collect();
        let shown = first_lines(&body);
        assert_eq!(shown.lines().count(), 21);
        assert!(shown.ends_with("line 20\n… 5 more lines"), "{shown}");
        assert_eq!(first_lines("ok"), "ok");
    }
}
