//! `af inbox list|get|wait`: the messages the sidecar captured (capture mode and its SMTP
//! listener), read through its admin API. Each is a journal record of kind `message`:
//! `{seq, at, env, kind, via, client, host, rule, message: {provider, kind, from, to, subject,
//! text, html, links, code}}`. `to` and `subject` filters are case-insensitive substrings, as
//! the sidecar matches them.

use std::fmt::Write as _;
use std::io::Write;
use std::time::Duration;

use af_policy::error::{Report, codes};
use af_sidecar_api::admin::{InboxQuery, MAX_LIMIT};
use af_sidecar_api::journal::{MessageRecord, Record};

use super::output::{Format, print_json};
use super::table::{self, Column};
use crate::admin;
use crate::env_id::EnvId;
use crate::runtime::{AdminEndpoint, Runtime};

/// How often `wait` asks for new messages.
pub const POLL: Duration = Duration::from_millis(500);

/// Run `af inbox list`: the newest `limit` matching messages (default and at most
/// [`MAX_LIMIT`]), oldest first.
pub async fn list(
    runtime: &dyn Runtime,
    env: &EnvId,
    query: InboxQuery,
    format: Format,
    out: &mut dyn Write,
) -> Result<Vec<Record>, Report> {
    let endpoint = endpoint(runtime, env).await?;
    let query = InboxQuery {
        limit: Some(query.limit.unwrap_or(MAX_LIMIT).min(MAX_LIMIT)),
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
            let _ = write!(out, "{}", table(&records));
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
) -> Result<Record, Report> {
    let endpoint = endpoint(runtime, env).await?;
    let record = admin::inbox_message(endpoint.addr, &endpoint.token, seq)
        .await
        .map_err(|e| e.report())?
        .ok_or_else(|| {
            Report::new(
                &codes::RUN_INBOX_NO_MESSAGE,
                format!("Env {env} has no captured message {seq}: it never existed or was evicted with the oldest journal segment."),
            )
        })?;
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
) -> Result<Record, Report> {
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

fn print_record(record: &Record, format: Format, out: &mut dyn Write) {
    match format {
        Format::Json => print_json(out, record),
        Format::Human => {
            let _ = write!(out, "{}", show(record));
        }
    }
}

/// An optional text field, empty when absent.
fn text(field: &Option<String>) -> &str {
    field.as_deref().unwrap_or("")
}

/// The columns of `af inbox list`, each bounded so a line stays readable.
const COLUMNS: [Column; 6] = [
    Column::right("SEQ", 8),
    Column::left("TIME", 8),
    Column::left("PROVIDER", 10),
    Column::left("TO", 32),
    Column::left("SUBJECT", 48),
    Column::left("CODE", 12),
];

/// The messages as a table: seq, time, provider, to, subject, code.
pub fn table(records: &[Record]) -> String {
    let rows: Vec<Vec<String>> = records.iter().map(row).collect();
    table::render(&COLUMNS, &rows)
}

fn row(record: &Record) -> Vec<String> {
    let at = record.at.get(11..19).unwrap_or(&record.at);
    let (provider, to, subject, code) = match record.entry.as_message() {
        Some(MessageRecord { message: m, .. }) => (
            m.provider.as_str(),
            m.to.join(", "),
            text(&m.subject),
            text(&m.code),
        ),
        None => ("", String::new(), "", ""),
    };
    vec![
        record.seq.to_string(),
        at.to_owned(),
        provider.to_owned(),
        to,
        subject.to_owned(),
        code.to_owned(),
    ]
}

/// One message in full for a person: the code and the first link first, then who, what, every
/// link in the order given (best first) and the bodies.
pub fn show(record: &Record) -> String {
    let mut s = String::new();
    let Some(captured) = record.entry.as_message() else {
        let _ = writeln!(
            s,
            "record {} · {} is not a captured message",
            record.seq, record.at
        );
        return s;
    };
    let m = &captured.message;
    let rule = match text(&captured.rule) {
        "" => String::new(),
        rule => format!(", {rule}"),
    };
    let _ = writeln!(
        s,
        "message {} · {} · {} {} (via {} {}{rule})",
        record.seq,
        record.at,
        m.provider,
        m.kind.as_str(),
        captured.via,
        captured.host,
    );
    let fields = [
        ("code", text(&m.code).to_owned()),
        ("link", m.links.first().cloned().unwrap_or_default()),
        ("from", text(&m.from).to_owned()),
        ("to", m.to.join(", ")),
        ("subject", text(&m.subject).to_owned()),
    ];
    for (name, value) in fields {
        if !value.is_empty() {
            let _ = writeln!(s, "{name:<8} {value}");
        }
    }
    if m.links.len() > 1 {
        let _ = writeln!(s, "\nlinks");
        for (i, link) in m.links.iter().enumerate() {
            let _ = writeln!(s, "  {}. {link}", i + 1);
        }
    }
    for (name, body) in [("text", &m.text), ("html", &m.html)] {
        let value = text(body);
        if !value.is_empty() {
            let _ = writeln!(s, "\n{name}");
            for line in value.lines() {
                let _ = writeln!(s, "  {line}");
            }
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use af_sidecar_api::journal::{Entry, Message, MessageKind};

    use super::*;

    fn record() -> Record {
        let owned = |items: &[&str]| items.iter().map(|s| (*s).to_owned()).collect();
        Record {
            seq: 12,
            at: "2025-06-01T14:03:01.123Z".to_owned(),
            env: "shop-1".to_owned(),
            entry: Entry::Message(MessageRecord {
                via: "capture".to_owned(),
                client: "10.213.0.5:40000".parse().expect("addr"),
                host: "api.sendgrid.com".to_owned(),
                rule: Some("rules[0] api.sendgrid.com".to_owned()),
                message: Message {
                    provider: "sendgrid".to_owned(),
                    kind: MessageKind::Email,
                    from: Some("noreply@shop.test".to_owned()),
                    to: owned(&["alice@example.com", "bob@example.com"]),
                    subject: Some("Your sign-in code is 481516".to_owned()),
                    text: Some("Hello,\nuse 481516 or the link.".to_owned()),
                    html: None,
                    links: owned(&[
                        "https://shop.test/verify?t=1",
                        "https://shop.test/unsubscribe",
                    ]),
                    code: Some("481516".to_owned()),
                },
            }),
        }
    }

    #[test]
    fn a_row_has_seq_time_provider_recipients_subject_and_code() {
        let shown = table(&[record()]);
        let lines: Vec<&str> = shown.lines().collect();
        assert_eq!(
            lines,
            [
                "SEQ  TIME      PROVIDER  TO                                SUBJECT                      CODE",
                " 12  14:03:01  sendgrid  alice@example.com, bob@example.…  Your sign-in code is 481516  481516",
            ]
        );
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
