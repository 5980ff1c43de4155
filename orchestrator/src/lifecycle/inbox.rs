//! `af inbox list|get|wait`: the messages the sidecar captured (capture mode and its SMTP
//! listener), read through its admin API. Each is a journal record of kind `message`:
//! `{seq, at, env, kind, via, client, host, rule, message: {provider, kind, from, to, subject,
//! text, html, links, code}}`. `to` and `subject` filters are case-insensitive substrings, as
//! the sidecar matches them.

use std::fmt::Write as _;
use std::io::Write;
use std::time::Duration;

use af_policy::error::{Report, codes};
use serde_json::Value;

use super::output::{Format, print_json};
use crate::admin::{self, InboxQuery};
use crate::env_id::EnvId;
use crate::runtime::{AdminEndpoint, Runtime};

/// How often `wait` asks for new messages.
pub const POLL: Duration = Duration::from_millis(500);

/// Run `af inbox list`: the newest `limit` matching messages (default and at most
/// [`admin::MAX_PAGE`]), oldest first.
pub async fn list(
    runtime: &dyn Runtime,
    env: &EnvId,
    query: InboxQuery,
    format: Format,
    out: &mut dyn Write,
) -> Result<Vec<Value>, Report> {
    let endpoint = endpoint(runtime, env).await?;
    let query = InboxQuery {
        limit: Some(query.limit.unwrap_or(admin::MAX_PAGE).min(admin::MAX_PAGE)),
        ..query
    };
    let records = admin::inbox(endpoint.addr, &endpoint.token, &query)
        .await
        .map_err(|e| e.report())?
        .records;
    match format {
        Format::Json => print_json(
            out,
            &serde_json::json!({ "env": env.as_str(), "records": records }),
        ),
        Format::Human if records.is_empty() => {
            let _ = writeln!(out, "env {env}: no captured messages");
        }
        Format::Human => {
            let _ = writeln!(
                out,
                "{:>5}  {:<8}  {:<9} {:<28} {:<40} CODE",
                "SEQ", "TIME", "PROVIDER", "TO", "SUBJECT"
            );
            for r in &records {
                let _ = writeln!(out, "{}", row(r));
            }
        }
    }
    Ok(records)
}

/// Run `af inbox get SEQ`: one message in full.
pub async fn get(
    runtime: &dyn Runtime,
    env: &EnvId,
    seq: u64,
    format: Format,
    out: &mut dyn Write,
) -> Result<Value, Report> {
    let endpoint = endpoint(runtime, env).await?;
    let record = admin::inbox_message(endpoint.addr, &endpoint.token, seq)
        .await
        .map_err(|e| e.report())?;
    print_record(&record, format, out);
    Ok(record)
}

/// What `af inbox wait` waits for.
#[derive(Debug, Clone)]
pub struct Wait {
    /// The recipient.
    pub to: String,
    /// The subject, if it matters.
    pub subject: Option<String>,
    /// How long to wait.
    pub timeout: Duration,
    /// How often to ask.
    pub poll: Duration,
}

/// Run `af inbox wait`: the newest matching message already captured, else the first to
/// arrive before the timeout (AF-RUN-050 if none does).
pub async fn wait(
    runtime: &dyn Runtime,
    env: &EnvId,
    wait: &Wait,
    format: Format,
    out: &mut dyn Write,
) -> Result<Value, Report> {
    let deadline = tokio::time::Instant::now() + wait.timeout;
    let endpoint = endpoint(runtime, env).await?;
    // What already arrived: the newest match; then only what arrives after it.
    let mut query = InboxQuery {
        since: None,
        limit: Some(1),
        to: Some(wait.to.clone()),
        subject: wait.subject.clone(),
    };
    let found = loop {
        let page = admin::inbox(endpoint.addr, &endpoint.token, &query)
            .await
            .map_err(|e| e.report())?;
        if let Some(record) = page.records.into_iter().next() {
            break record;
        }
        query.since = Some(page.next_since);
        let now = tokio::time::Instant::now();
        if now >= deadline {
            return Err(timed_out(env, wait));
        }
        tokio::time::sleep(wait.poll.min(deadline - now)).await;
    };
    print_record(&found, format, out);
    Ok(found)
}

async fn endpoint(runtime: &dyn Runtime, env: &EnvId) -> Result<AdminEndpoint, Report> {
    runtime.admin(env).await.map_err(|e| e.report())
}

fn timed_out(env: &EnvId, wait: &Wait) -> Report {
    let subject = wait
        .subject
        .as_deref()
        .map(|s| format!(" with subject {s:?}"))
        .unwrap_or_default();
    Report::new(
        &codes::RUN_INBOX_TIMEOUT,
        format!(
            "No message to {}{subject} was captured in env {env} within {}.",
            wait.to,
            humantime::format_duration(wait.timeout)
        ),
    )
}

fn print_record(record: &Value, format: Format, out: &mut dyn Write) {
    match format {
        Format::Json => print_json(out, record),
        Format::Human => {
            let _ = write!(out, "{}", show(record));
        }
    }
}

/// A text field of a message (empty when absent).
fn text<'a>(m: &'a Value, key: &str) -> &'a str {
    m[key].as_str().unwrap_or("")
}

/// A list field of a message as text items.
fn items<'a>(m: &'a Value, key: &str) -> Vec<&'a str> {
    m[key]
        .as_array()
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default()
}

/// `text` cut to `width` characters, ending in `…` when cut.
fn clip(text: &str, width: usize) -> String {
    if text.chars().count() <= width {
        return text.to_owned();
    }
    let mut cut: String = text.chars().take(width.saturating_sub(1)).collect();
    cut.push('…');
    cut
}

/// One message as a table row: seq, time, provider, to, subject, code.
pub fn row(record: &Value) -> String {
    let m = &record["message"];
    let at = text(record, "at");
    format!(
        "{:>5}  {:<8}  {:<9} {:<28} {:<40} {}",
        record["seq"].as_u64().unwrap_or(0),
        at.get(11..19).unwrap_or(at),
        clip(text(m, "provider"), 9),
        clip(&items(m, "to").join(", "), 28),
        clip(text(m, "subject"), 40),
        text(m, "code"),
    )
}

/// One message in full for a person: the code and the first link first, then who, what, every
/// link in the order given (best first) and the bodies.
pub fn show(record: &Value) -> String {
    let m = &record["message"];
    let mut s = String::new();
    let rule = match text(record, "rule") {
        "" => String::new(),
        rule => format!(", {rule}"),
    };
    let _ = writeln!(
        s,
        "message {} · {} · {} {} (via {} {}{rule})",
        record["seq"].as_u64().unwrap_or(0),
        text(record, "at"),
        text(m, "provider"),
        text(m, "kind"),
        text(record, "via"),
        text(record, "host"),
    );
    let links = items(m, "links");
    let fields = [
        ("code", text(m, "code").to_owned()),
        ("link", links.first().copied().unwrap_or("").to_owned()),
        ("from", text(m, "from").to_owned()),
        ("to", items(m, "to").join(", ")),
        ("subject", text(m, "subject").to_owned()),
    ];
    for (name, value) in fields {
        if !value.is_empty() {
            let _ = writeln!(s, "{name:<8} {value}");
        }
    }
    if links.len() > 1 {
        let _ = writeln!(s, "\nlinks");
        for (i, link) in links.iter().enumerate() {
            let _ = writeln!(s, "  {}. {link}", i + 1);
        }
    }
    for body in ["text", "html"] {
        let value = text(m, body);
        if !value.is_empty() {
            let _ = writeln!(s, "\n{body}");
            for line in value.lines() {
                let _ = writeln!(s, "  {line}");
            }
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn record() -> Value {
        json!({
            "seq": 12, "at": "2025-06-01T14:03:01.123Z", "env": "shop-1", "kind": "message",
            "via": "capture", "client": "10.213.0.5:40000", "host": "api.sendgrid.com",
            "rule": "rules[0] api.sendgrid.com",
            "message": {
                "provider": "sendgrid", "kind": "email", "from": "noreply@shop.test",
                "to": ["alice@example.com", "bob@example.com"],
                "subject": "Your sign-in code is 481516",
                "text": "Hello,\nuse 481516 or the link.", "html": null,
                "links": ["https://shop.test/verify?t=1", "https://shop.test/unsubscribe"],
                "code": "481516",
            },
        })
    }

    #[test]
    fn a_row_has_seq_time_provider_recipients_subject_and_code() {
        let line = row(&record());
        assert!(line.starts_with("   12  14:03:01  sendgrid "), "{line}");
        assert!(line.contains(" alice@example.com, bob@exam… "), "{line}");
        assert!(line.contains("Your sign-in code is 481516"), "{line}");
        assert!(line.ends_with(" 481516"), "{line}");
    }

    #[test]
    fn a_shown_message_leads_with_its_code_and_first_link_and_keeps_link_order() {
        let text = show(&record());
        let lines: Vec<&str> = text.lines().collect();
        assert!(lines[0].starts_with("message 12 · 2025-06-01T14:03:01.123Z · sendgrid email"));
        assert_eq!(lines[1], "code     481516");
        assert_eq!(lines[2], "link     https://shop.test/verify?t=1");
        assert!(text.contains("to       alice@example.com, bob@example.com"));
        let verify = text
            .find("1. https://shop.test/verify")
            .expect("first link");
        let unsubscribe = text
            .find("2. https://shop.test/unsubscribe")
            .expect("second");
        assert!(verify < unsubscribe);
        assert!(text.contains("\ntext\n  Hello,\n  use 481516 or the link.\n"));
        assert!(!text.contains("\nhtml"), "no empty html section");
    }
}
