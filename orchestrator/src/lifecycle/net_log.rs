//! `af net log [--blocked] [--host H] [--follow | --har FILE] [--limit N] [-o json]`: the sidecar's
//! decisions, read through its admin API (never from container logs, so nothing is lost on a
//! restart).

use std::io::Write;
use std::path::Path;

use af_policy::error::{Report, codes};
use af_sidecar_api::admin::DecisionsQuery;
use af_sidecar_api::journal::{Entry, Outcome, Record};
use futures_util::StreamExt;

use super::output::{Format, print_json};
use crate::admin;
use crate::env_id::EnvId;
use crate::har;
use crate::runtime::Runtime;

/// Run `af net log`.
pub async fn run(
    runtime: &dyn Runtime,
    env: &EnvId,
    query: DecisionsQuery,
    follow: bool,
    format: Format,
    out: &mut dyn Write,
) -> Result<(), Report> {
    if follow {
        let endpoint = runtime.admin(env).await.map_err(|e| e.report())?;
        let mut stream = admin::follow(endpoint.addr, &endpoint.token, &query)
            .await
            .map_err(|e| e.report())?;
        while let Some(record) = stream.next().await {
            let record = record.map_err(|e| e.report())?;
            let written = match format {
                Format::Json => writeln!(
                    out,
                    "{}",
                    serde_json::to_string(&record).unwrap_or_default()
                ),
                Format::Human => writeln!(out, "{}", line(&record)),
            };
            if written.is_err() {
                break;
            }
            let _ = out.flush();
        }
        return Ok(());
    }
    let records = read(runtime, env, &query).await?;
    match format {
        Format::Json => print_json(
            out,
            &serde_json::json!({ "env": env.as_str(), "records": records }),
        ),
        Format::Human if records.is_empty() => {
            let _ = writeln!(out, "{}", nothing_to_show(&query));
        }
        Format::Human => {
            for r in &records {
                let _ = writeln!(out, "{}", line(r));
            }
        }
    }
    Ok(())
}

/// What an empty answer means, so it never reads as a command that did nothing.
fn nothing_to_show(query: &DecisionsQuery) -> String {
    let mut filters = Vec::new();
    if query.blocked == Some(true) {
        filters.push("--blocked".to_owned());
    }
    if let Some(host) = &query.host {
        filters.push(format!("--host {host}"));
    }
    if filters.is_empty() {
        "No decisions yet: the services have sent nothing out of the environment.".to_owned()
    } else {
        format!(
            "No decisions match {}; `af net log` alone shows every one.",
            filters.join(" ")
        )
    }
}

/// Run `af net log --har FILE`: the records `query` selects written to `path` as HAR 1.2 (the
/// file is made only once every record was read), then where they went.
pub async fn write_har(
    runtime: &dyn Runtime,
    env: &EnvId,
    query: DecisionsQuery,
    path: &Path,
    format: Format,
    out: &mut dyn Write,
) -> Result<(), Report> {
    let records = read(runtime, env, &query).await?;
    let doc = har::har(&records, env!("CARGO_PKG_VERSION"));
    let entries = doc.log.entries.len();
    let unwritable = |e: &dyn std::fmt::Display| {
        Report::new(
            &codes::RUN_OUTPUT_FILE,
            format!("The HAR file {} could not be written: {e}.", path.display()),
        )
    };
    let text = serde_json::to_vec_pretty(&doc).map_err(|e| unwritable(&e))?;
    std::fs::write(path, text).map_err(|e| unwritable(&e))?;
    match format {
        Format::Json => print_json(
            out,
            &serde_json::json!({ "env": env.as_str(), "har": path, "entries": entries }),
        ),
        Format::Human => {
            let _ = writeln!(out, "{entries} requests written to {}", path.display());
        }
    }
    Ok(())
}

/// The records `query` selects; `--limit N` keeps the newest N, like `tail`, still oldest
/// first.
async fn read(
    runtime: &dyn Runtime,
    env: &EnvId,
    query: &DecisionsQuery,
) -> Result<Vec<Record>, Report> {
    let endpoint = runtime.admin(env).await.map_err(|e| e.report())?;
    let records = match query.limit {
        Some(n) => admin::newest_decisions(endpoint.addr, &endpoint.token, query, n).await,
        None => admin::all_decisions(endpoint.addr, &endpoint.token, query).await,
    };
    records.map_err(|e| e.report())
}

/// One record as a line: `12 14:03:01 ✗ block    GET api.x.test:443/ 403 AF-NET-010 (default)
/// [proxy]`. The mark says how it ended: ✓ left (forwarded, or tunnelled), ○ answered in the
/// sidecar, ✗ refused or failed (with its code), ⚠ the opened TLS failed, ◇ a connection
/// opened for interception (its requests have their own lines), – ended before an answer.
pub fn line(r: &Record) -> String {
    let seq = r.seq;
    let at = r.at.get(11..19).unwrap_or(&r.at);
    let d = match &r.entry {
        Entry::DnsSighting(s) => {
            return format!(
                "{seq:>5} {at} · dns      {} {} → {} ({} {})",
                s.host, s.qtype, s.answer, s.mode, s.rule,
            );
        }
        Entry::Message(m) => {
            return format!(
                "{seq:>5} {at} ✉ {:<8} {} → {} {:?} [{}]",
                m.message.provider,
                m.host,
                m.message.to.join(", "),
                m.message.subject.as_deref().unwrap_or(""),
                m.via,
            );
        }
        Entry::Containment(c) if c.held => {
            return format!("{seq:>5} {at} ● containment held in {}", c.pod);
        }
        Entry::Containment(c) => {
            let what: Vec<&str> = c.breaches.iter().map(|b| b.what.as_str()).collect();
            return format!(
                "{seq:>5} {at} ✗ containment LOST in {}: {}",
                c.pod,
                what.join("; ")
            );
        }
        Entry::Decision(d) => d,
    };
    let outcome = d.outcome();
    let mark = match outcome {
        Outcome::Forwarded | Outcome::Tunnel => "✓",
        Outcome::Answered => "○",
        Outcome::Refused | Outcome::Failed => "✗",
        Outcome::HandshakeFailed => "⚠",
        Outcome::Opened => "◇",
        Outcome::Closed => "–",
    };
    let mode = d
        .mode
        .map_or(if d.allowed { "allow" } else { "block" }, |m| m.as_str());
    let status = d.status.map(|c| format!(" {c}")).unwrap_or_default();
    // What the client got. A tunnel's 200 says only that it was established: the line says
    // "tunnel", claiming nothing about what went on inside it.
    let result = match outcome {
        Outcome::Tunnel => " tunnel".to_owned(),
        Outcome::Opened => " opened for interception".to_owned(),
        Outcome::HandshakeFailed => " handshake failed".to_owned(),
        Outcome::Closed => format!("{status} closed"),
        Outcome::Forwarded | Outcome::Answered | Outcome::Refused | Outcome::Failed => status,
    };
    let code = d
        .code
        .as_deref()
        .map(|c| format!(" {c}"))
        .unwrap_or_default();
    let rule = match d.rule.as_deref() {
        None | Some("") => "default",
        Some(rule) => rule,
    };
    // An IPv6 host in brackets, so its port stays readable: `[::1]:443`.
    let host = match d.host.as_str() {
        h if h.contains(':') => format!("[{h}]"),
        h => h.to_owned(),
    };
    // A TLS connection names no method: the target stands alone rather than after a gap.
    let target = match &*d.method {
        "" => format!("{host}:{}{}", d.port, d.path),
        method => format!("{method} {host}:{}{}", d.port, d.path),
    };
    // The reason only when it says more than the rule does.
    let why = match &*d.reason {
        "" | "rule" | "default" => rule.to_owned(),
        reason => format!("{rule}: {reason}"),
    };
    format!(
        "{seq:>5} {at} {mark} {mode:<8} {target}{result}{code} ({why}) [{}]",
        d.via
    )
}

#[cfg(test)]
mod tests {
    use af_sidecar_api::Mode;
    use af_sidecar_api::journal::{DecisionRecord, Message, MessageKind, MessageRecord};

    use super::*;

    fn record(seq: u64, at: &str, entry: Entry) -> Record {
        Record {
            seq,
            at: at.to_owned(),
            env: "e".to_owned(),
            entry,
        }
    }

    fn decision(via: &str, method: &str, host: &str, port: u16, path: &str) -> DecisionRecord {
        DecisionRecord {
            via: via.to_owned().into(),
            method: method.to_owned().into(),
            host: host.to_owned(),
            port,
            path: path.to_owned(),
            ..DecisionRecord::default()
        }
    }

    #[test]
    fn an_empty_journal_says_so_and_names_the_filters_that_found_nothing() {
        let all = DecisionsQuery::default();
        assert!(nothing_to_show(&all).starts_with("No decisions yet"));
        let filtered = DecisionsQuery {
            blocked: Some(true),
            host: Some("api.example.test".to_owned()),
            ..DecisionsQuery::default()
        };
        assert_eq!(
            nothing_to_show(&filtered),
            "No decisions match --blocked --host api.example.test; `af net log` alone shows every one."
        );
    }

    #[test]
    fn messages_and_local_answers_are_not_shown_as_blocked() {
        let message = record(
            7,
            "2026-11-29T14:03:01.123Z",
            Entry::Message(MessageRecord {
                via: "smtp".to_owned(),
                client: "10.0.0.5:4000".parse().expect("addr"),
                host: "smtp.example.test".to_owned(),
                rule: None,
                message: Message {
                    provider: "smtp".to_owned(),
                    kind: MessageKind::Email,
                    from: None,
                    to: vec!["ada@example.test".to_owned()],
                    subject: Some("Hi".to_owned()),
                    text: None,
                    html: None,
                    links: Vec::new(),
                    code: None,
                },
            }),
        );
        let shown = line(&message);
        assert!(shown.contains("✉ smtp"), "{shown}");
        assert!(shown.contains("ada@example.test"), "{shown}");
        assert!(!shown.contains("block"), "{shown}");
        let mocked = record(
            8,
            "2026-11-29T14:03:02.000Z",
            Entry::Decision(DecisionRecord {
                mode: Some(Mode::Mock),
                status: Some(200),
                ..decision("intercept", "GET", "api.github.com", 443, "/user")
            }),
        );
        assert!(line(&mocked).contains("○ mock"), "{}", line(&mocked));
        let refused = record(
            9,
            "2026-11-29T14:03:03.000Z",
            Entry::Decision(DecisionRecord {
                mode: Some(Mode::Block),
                status: Some(403),
                code: Some("AF-NET-010".into()),
                ..decision("proxy", "GET", "x.test", 80, "/")
            }),
        );
        assert!(line(&refused).contains("✗ block"), "{}", line(&refused));
        let v6 = record(
            10,
            "2026-11-29T14:03:04.000Z",
            Entry::Decision(DecisionRecord {
                mode: Some(Mode::Block),
                status: Some(403),
                code: Some("AF-NET-010".into()),
                ..decision("proxy", "CONNECT", "::1", 443, "")
            }),
        );
        assert!(line(&v6).contains("CONNECT [::1]:443 403"), "{}", line(&v6));
    }

    #[test]
    fn a_line_names_the_rule_once_and_leaves_no_gap_for_a_missing_method() {
        let by_default = record(
            11,
            "2026-11-29T14:03:05.000Z",
            Entry::Decision(DecisionRecord {
                mode: Some(Mode::Block),
                rule: Some("default".into()),
                reason: "default".into(),
                status: Some(403),
                code: Some("AF-NET-010".into()),
                ..decision("proxy", "GET", "api.x.test", 443, "/")
            }),
        );
        assert_eq!(
            line(&by_default),
            "   11 14:03:05 ✗ block    GET api.x.test:443/ 403 AF-NET-010 (default) [proxy]"
        );
        let tls = record(
            12,
            "2026-11-29T14:03:06.000Z",
            Entry::Decision(DecisionRecord {
                mode: Some(Mode::Allow),
                rule: Some("rules[0] api.x.test".into()),
                reason: "rule".into(),
                allowed: true,
                ..decision("tls", "", "api.x.test", 443, "")
            }),
        );
        assert_eq!(
            line(&tls),
            "   12 14:03:06 ✓ allow    api.x.test:443 tunnel (rules[0] api.x.test) [tls]"
        );
        let guarded = record(
            13,
            "2026-11-29T14:03:07.000Z",
            Entry::Decision(DecisionRecord {
                mode: Some(Mode::Allow),
                rule: Some("rules[0] api.x.test".into()),
                reason: "guard:private".into(),
                status: Some(403),
                code: Some("AF-NET-011".into()),
                ..decision("proxy", "CONNECT", "api.x.test", 443, "")
            }),
        );
        assert_eq!(
            line(&guarded),
            "   13 14:03:07 ✗ allow    CONNECT api.x.test:443 403 AF-NET-011 (rules[0] api.x.test: guard:private) [proxy]"
        );
    }

    #[test]
    fn a_line_says_how_it_ended_not_only_whether_it_left() {
        let at = "2026-11-29T14:03:08.000Z";
        let mock = |outcome, status, code: Option<&'static str>, reason: &str| DecisionRecord {
            mode: Some(Mode::Mock),
            rule: Some("rules[0] api.github.com".into()),
            reason: reason.to_owned().into(),
            outcome: Some(outcome),
            status,
            code: code.map(Into::into),
            ..decision("proxy", "CONNECT", "api.github.com", 443, "")
        };
        let refused_cert = record(
            14,
            at,
            Entry::Decision(mock(
                Outcome::HandshakeFailed,
                Some(200),
                Some("AF-NET-045"),
                "client_rejected_certificate",
            )),
        );
        assert_eq!(
            line(&refused_cert),
            "   14 14:03:08 ⚠ mock     CONNECT api.github.com:443 handshake failed AF-NET-045 (rules[0] api.github.com: client_rejected_certificate) [proxy]"
        );
        let opened = record(
            15,
            at,
            Entry::Decision(DecisionRecord {
                intercepted: true,
                ..mock(Outcome::Opened, Some(200), None, "rule")
            }),
        );
        assert_eq!(
            line(&opened),
            "   15 14:03:08 ◇ mock     CONNECT api.github.com:443 opened for interception (rules[0] api.github.com) [proxy]"
        );
        let answered = record(
            16,
            at,
            Entry::Decision(DecisionRecord {
                method: "GET".into(),
                path: "/user".to_owned(),
                via: "intercept".into(),
                ..mock(Outcome::Answered, Some(200), None, "rule")
            }),
        );
        assert_eq!(
            line(&answered),
            "   16 14:03:08 ○ mock     GET api.github.com:443/user 200 (rules[0] api.github.com) [intercept]"
        );
        let gone = record(
            17,
            at,
            Entry::Decision(DecisionRecord {
                mode: Some(Mode::Allow),
                allowed: true,
                outcome: Some(Outcome::Closed),
                reason: "client_gone".into(),
                ..decision("proxy", "GET", "api.x.test", 80, "/slow")
            }),
        );
        assert_eq!(
            line(&gone),
            "   17 14:03:08 – allow    GET api.x.test:80/slow closed (default: client_gone) [proxy]"
        );
    }
}
