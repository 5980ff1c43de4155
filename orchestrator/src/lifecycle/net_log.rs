//! `af net log [--blocked] [--follow] [--limit N] [-o json]`: the sidecar's decisions, read
//! through its admin API (never from container logs, so nothing is lost on a restart).

use std::io::Write;

use af_policy::error::Report;
use futures_util::StreamExt;
use serde_json::Value;

use super::output::{Format, print_json};
use crate::admin::{self, Query};
use crate::env_id::EnvId;
use crate::runtime::Runtime;

/// Run `af net log`.
pub async fn run(
    runtime: &dyn Runtime,
    env: &EnvId,
    query: Query,
    follow: bool,
    format: Format,
    out: &mut dyn Write,
) -> Result<(), Report> {
    let endpoint = runtime.admin(env).await.map_err(|e| e.report())?;
    if follow {
        let mut stream = admin::follow(endpoint.addr, &endpoint.token, &query)
            .await
            .map_err(|e| e.report())?;
        while let Some(record) = stream.next().await {
            let record = record.map_err(|e| e.report())?;
            let written = match format {
                Format::Json => writeln!(out, "{record}"),
                Format::Human => writeln!(out, "{}", line(&record)),
            };
            if written.is_err() {
                break;
            }
            let _ = out.flush();
        }
        return Ok(());
    }
    // `--limit N` shows the newest N, like `tail`, still oldest first.
    let records = match query.limit {
        Some(n) => admin::newest_decisions(endpoint.addr, &endpoint.token, &query, n)
            .await
            .map_err(|e| e.report())?,
        None => admin::all_decisions(endpoint.addr, &endpoint.token, &query)
            .await
            .map_err(|e| e.report())?,
    };
    match format {
        Format::Json => print_json(
            out,
            &serde_json::json!({ "env": env.as_str(), "records": records }),
        ),
        Format::Human => {
            for r in &records {
                let _ = writeln!(out, "{}", line(r));
            }
        }
    }
    Ok(())
}

/// One record as a line: `12 14:03:01 ✗ block  GET api.x.test:443/ (no rule) [proxy]`.
pub fn line(r: &Value) -> String {
    let s = |k: &str| r[k].as_str().unwrap_or("");
    let seq = r["seq"].as_u64().unwrap_or(0);
    let at = s("at").get(11..19).unwrap_or(s("at"));
    if s("kind") == "dns_sighting" {
        return format!(
            "{seq:>5} {at} · dns    {} {} → {} ({} {})",
            s("host"),
            s("qtype"),
            s("answer"),
            s("mode"),
            s("rule"),
        );
    }
    if s("kind") == "message" {
        let m = &r["message"];
        let to: Vec<&str> = m["to"]
            .as_array()
            .map(|a| a.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        return format!(
            "{seq:>5} {at} ✉ {:<6} {} → {} {:?} [{}]",
            m["provider"].as_str().unwrap_or(""),
            s("host"),
            to.join(", "),
            m["subject"].as_str().unwrap_or(""),
            s("via"),
        );
    }
    // Left the environment (✓), refused (✗), or answered in the sidecar (○: mock, capture,
    // synth; not allowed out, and no refusal code).
    let mark = match (
        r["allowed"].as_bool().unwrap_or(false),
        r["code"].is_string(),
    ) {
        (true, _) => "✓",
        (false, true) => "✗",
        (false, false) => "○",
    };
    let mode = r["mode"]
        .as_str()
        .unwrap_or(if r["allowed"].as_bool().unwrap_or(false) {
            "allow"
        } else {
            "block"
        });
    let status = r["status"]
        .as_u64()
        .map(|c| format!(" {c}"))
        .unwrap_or_default();
    let rule = match s("rule") {
        "" => "default".to_owned(),
        rule => rule.to_owned(),
    };
    // An IPv6 host in brackets, so its port stays readable: `[::1]:443`.
    let host = match s("host") {
        h if h.contains(':') => format!("[{h}]"),
        h => h.to_owned(),
    };
    format!(
        "{seq:>5} {at} {mark} {mode:<6} {} {host}:{}{}{status} ({rule}: {}) [{}]",
        s("method"),
        r["port"].as_u64().unwrap_or(0),
        s("path"),
        s("reason"),
        s("via"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn messages_and_local_answers_are_not_shown_as_blocked() {
        let message = json!({"seq": 7, "at": "2026-11-29T14:03:01.123Z", "kind": "message",
            "via": "smtp", "host": "smtp.example.test",
            "message": {"provider": "smtp", "to": ["ada@example.test"], "subject": "Hi"}});
        let shown = line(&message);
        assert!(shown.contains("✉ smtp"), "{shown}");
        assert!(shown.contains("ada@example.test"), "{shown}");
        assert!(!shown.contains("block"), "{shown}");
        let mocked = json!({"seq": 8, "at": "2026-11-29T14:03:02.000Z", "kind": "decision",
            "via": "intercept", "method": "GET", "host": "api.github.com", "port": 443,
            "path": "/user", "mode": "mock", "allowed": false, "status": 200, "code": null});
        assert!(line(&mocked).contains("○ mock"), "{}", line(&mocked));
        let refused = json!({"seq": 9, "at": "2026-11-29T14:03:03.000Z", "kind": "decision",
            "via": "proxy", "method": "GET", "host": "x.test", "port": 80, "path": "/",
            "mode": "block", "allowed": false, "status": 403, "code": "AF-NET-010"});
        assert!(line(&refused).contains("✗ block"), "{}", line(&refused));
        let v6 = json!({"seq": 10, "at": "2026-11-29T14:03:04.000Z", "kind": "decision",
            "via": "proxy", "method": "CONNECT", "host": "::1", "port": 443, "path": "",
            "mode": "block", "allowed": false, "status": 403, "code": "AF-NET-010"});
        assert!(line(&v6).contains("CONNECT [::1]:443 403"), "{}", line(&v6));
    }
}
