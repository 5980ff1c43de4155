//! The page's JSON endpoints, each read through the sidecar's admin API on the server side so
//! the admin token never reaches the browser: decisions, one decision explained, messages, one
//! message, the overview, and the live stream as server-sent events.

use std::convert::Infallible;
use std::pin::Pin;
use std::sync::Arc;

use af_policy::egress::{Catalogue, Explanation, Mode};
use af_policy::error::{CATALOGUE, Report, codes};
use af_sidecar_api::admin::{DecisionsQuery, InboxQuery, MAX_LIMIT};
use af_sidecar_api::journal::{DecisionRecord, Entry};
use bytes::Bytes;
use futures_util::{Stream, StreamExt};
use hyper::StatusCode;
use serde::{Deserialize, Serialize};

use super::clients::Clients;
use super::{Environment, Source, snippet};
use crate::admin;
use crate::containment::Containment;
use crate::listing::Listing;
use crate::runtime::{EnvStatus, RuntimeError};

/// What an endpoint could not answer: the status and the coded report the page shows.
#[derive(Debug)]
pub(super) struct Failure {
    /// The HTTP status.
    pub status: StatusCode,
    /// The report, as JSON `{code, statement, next}`.
    pub report: Report,
}

impl From<RuntimeError> for Failure {
    fn from(e: RuntimeError) -> Self {
        let status = match e {
            RuntimeError::AdminRefused(_) => StatusCode::NOT_FOUND,
            _ => StatusCode::BAD_GATEWAY,
        };
        Failure {
            status,
            report: e.report(),
        }
    }
}

/// `GET api/records`: the newest [`MAX_LIMIT`] decisions (oldest first), each with its
/// client's service, and the journal position the live stream resumes from.
pub(super) async fn records(
    source: &Source,
    clients: &Clients,
) -> Result<serde_json::Value, Failure> {
    let query = DecisionsQuery {
        limit: Some(MAX_LIMIT),
        newest: true,
        ..DecisionsQuery::default()
    };
    let page = admin::decisions(source.admin.addr, &source.admin.token, &query).await?;
    let mut records = Vec::with_capacity(page.records.len());
    for record in page
        .records
        .iter()
        .filter(|r| r.entry.as_decision().is_some())
    {
        records.push(clients.shown(record).await);
    }
    Ok(serde_json::json!({ "records": records, "since": page.committed }))
}

/// `GET api/har`: every decision in the journal as HAR 1.2, as `af net log --har` writes it.
pub(super) async fn har(source: &Source) -> Result<serde_json::Value, Failure> {
    let query = DecisionsQuery::default();
    let records = admin::all_decisions(source.admin.addr, &source.admin.token, &query).await?;
    serde_json::to_value(crate::har::har(&records, env!("CARGO_PKG_VERSION"))).map_err(internal)
}

/// What `GET api/records/{seq}` is asked.
#[derive(Debug, Default, Deserialize)]
pub(super) struct DetailQuery {
    /// The snippet's mode; by default the request's own, `allow` for a refusal.
    mode: Option<Mode>,
}

/// The coded refusal of a record, with its catalogue entry's meaning and `Next:` line.
#[derive(Serialize)]
struct Refusal {
    code: String,
    meaning: Option<&'static str>,
    next: Option<&'static str>,
}

/// The rule that would decide the request with the mode asked.
#[derive(Serialize)]
struct Snippet {
    mode: Mode,
    yaml: Option<String>,
    problem: Option<String>,
}

/// One decision in full: `GET api/records/{seq}`.
#[derive(Serialize)]
struct Detail {
    /// The record with its client's service, as [`Clients::shown`] gives it.
    record: serde_json::Value,
    url: String,
    explanation: Option<Explanation>,
    refusal: Option<Refusal>,
    snippet: Snippet,
}

/// `GET api/records/{seq}`: the record, how the manifest's catalogue explains it (as
/// `af net explain` does), its refusal's catalogue entry and the rule snippet.
pub(super) async fn record(
    source: &Source,
    clients: &Clients,
    seq: u64,
    query: &DetailQuery,
) -> Result<serde_json::Value, Failure> {
    let q = DecisionsQuery {
        since: Some(seq.saturating_sub(1)),
        limit: Some(1),
        ..DecisionsQuery::default()
    };
    let page = admin::decisions(source.admin.addr, &source.admin.token, &q).await?;
    let no_decision = || Failure {
        status: StatusCode::NOT_FOUND,
        report: Report::new(
            &codes::NET_ADMIN_BAD_REQUEST,
            format!("The journal holds no decision {seq}."),
        )
        .with_next("Reload the page: the record may have been evicted."),
    };
    let record = page
        .records
        .into_iter()
        .find(|r| r.seq == seq)
        .ok_or_else(no_decision)?;
    let Entry::Decision(d) = &record.entry else {
        return Err(no_decision());
    };
    let url = url(d);
    let explanation = source.catalogue.as_ref().and_then(|c| explain(c, d, &url));
    let refusal = d.code.as_deref().map(|code| {
        let entry = CATALOGUE.iter().find(|c| c.code == code);
        Refusal {
            code: code.to_owned(),
            meaning: entry.map(|c| c.meaning),
            next: entry.map(|c| c.next),
        }
    });
    let mode = query.mode.unwrap_or_else(|| snippet::default_mode(d));
    let (yaml, problem) = match crate::suggest::rule_for(d, mode).map(snippet::yaml) {
        Ok(Ok(yaml)) => (Some(yaml), None),
        Ok(Err(problem)) => (None, Some(problem)),
        Err(why) => (None, Some(why.to_string())),
    };
    let detail = Detail {
        url,
        explanation,
        refusal,
        snippet: Snippet {
            mode,
            yaml,
            problem,
        },
        record: clients.shown(&record).await,
    };
    serde_json::to_value(detail).map_err(internal)
}

/// The URL a decision was about, as `af net explain` takes it.
fn url(d: &DecisionRecord) -> String {
    let scheme = if d.tls || d.port == 443 || d.via == "intercept" {
        "https"
    } else {
        "http"
    };
    let host = if d.host.contains(':') {
        format!("[{}]", d.host)
    } else {
        d.host.clone()
    };
    let path = if d.path.starts_with('/') {
        d.path.as_str()
    } else {
        "/"
    };
    format!("{scheme}://{host}:{}{path}", d.port)
}

/// How the catalogue decides the request; `None` for a record without a method or host.
fn explain(catalogue: &Catalogue, d: &DecisionRecord, url: &str) -> Option<Explanation> {
    let method = if d.method.is_empty() {
        "CONNECT"
    } else {
        &d.method
    };
    catalogue.explain(method, url).ok()
}

/// `GET api/messages`: the newest [`MAX_LIMIT`] captured messages, oldest first.
pub(super) async fn messages(source: &Source) -> Result<serde_json::Value, Failure> {
    let query = InboxQuery {
        limit: Some(MAX_LIMIT),
        ..InboxQuery::default()
    };
    let page = admin::inbox(source.admin.addr, &source.admin.token, &query).await?;
    Ok(serde_json::json!({ "records": page.records }))
}

/// `GET api/messages/{seq}`: one captured message, its links ranked by the sidecar
/// (verification first) and its code as `af inbox get` shows them.
pub(super) async fn message(source: &Source, seq: u64) -> Result<serde_json::Value, Failure> {
    let record = admin::inbox_message(source.admin.addr, &source.admin.token, seq).await?;
    serde_json::to_value(record).map_err(internal)
}

/// `GET api/overview`: the runtime and the environment's state, the sidecar's counters and
/// the catalogue in deciding order.
pub(super) async fn overview(source: &Source) -> Result<serde_json::Value, Failure> {
    let metrics = admin::metrics(source.admin.addr, &source.admin.token).await?;
    let counters: Vec<&str> = metrics
        .lines()
        .filter(|l| !l.trim().is_empty() && !l.starts_with('#'))
        .collect();
    let (runtime, env, status, status_error) = match &source.environment {
        Some(e) => {
            let (status, error) = status(e).await;
            (Some(e.runtime.name()), Some(e.env.as_str()), status, error)
        }
        None => (None, None, None, None),
    };
    Ok(serde_json::json!({
        "runtime": runtime,
        "location": source.environment.as_ref().and_then(|e| e.runtime.location()),
        "env": env,
        "status": status,
        "containment": status.as_ref().and_then(|s| s.containment.as_ref()).map(|c| {
            serde_json::json!({"held": c.held(), "line": c.line()})
        }),
        "status_error": status_error,
        "counters": counters,
        "catalogue": source.catalogue.as_ref().map(Listing::of),
    }))
}

async fn status(e: &Environment) -> (Option<EnvStatus>, Option<Report>) {
    match e.runtime.status(&e.env).await {
        Ok(mut status) => {
            Containment::fill(e.runtime.as_ref(), &e.env, &mut status).await;
            (Some(status), None)
        }
        Err(err) => (None, Some(err.report())),
    }
}

/// Server-sent events: one `data:` event per journal record after `since`, as the sidecar's
/// follow stream gives them, each with its `id:` so a reconnecting browser resumes after it.
pub(super) type Events = Pin<Box<dyn Stream<Item = Result<Bytes, Infallible>> + Send>>;

/// `GET api/events?since=N`: the admin API's follow stream relayed as server-sent events, each
/// decision with its client's service. It ends when the follow stream does (the browser's
/// `EventSource` then reconnects).
pub(super) async fn events(
    source: &Source,
    clients: Arc<Clients>,
    since: u64,
) -> Result<Events, Failure> {
    let query = DecisionsQuery {
        since: Some(since),
        ..DecisionsQuery::default()
    };
    let follow = admin::follow(source.admin.addr, &source.admin.token, &query).await?;
    // A first comment flushes the head at once, so the browser sees the stream open.
    let open = futures_util::stream::once(async { Ok(Bytes::from_static(b": open\n\n")) });
    let records = follow
        .take_while(|r| std::future::ready(r.is_ok()))
        .filter_map(|r| std::future::ready(r.ok()))
        .then(move |r| {
            let clients = clients.clone();
            async move { event(r.seq, &clients.shown(&r).await) }
        })
        .map(Ok);
    Ok(Box::pin(open.chain(records)))
}

/// One record (`seq`, shown as `json`) as a server-sent event; JSON has no raw newline, so one
/// `data:` line holds it.
fn event(seq: u64, json: &serde_json::Value) -> Bytes {
    Bytes::from(format!("id: {seq}\ndata: {json}\n\n"))
}

fn internal(e: serde_json::Error) -> Failure {
    Failure {
        status: StatusCode::INTERNAL_SERVER_ERROR,
        report: Report::new(
            &codes::NET_ADMIN_UNREACHABLE,
            format!("The answer could not be encoded: {e}."),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use af_sidecar_api::journal::Record;

    #[test]
    fn a_record_is_one_event_with_its_seq_as_id() {
        let record = Record {
            seq: 42,
            at: "2026-12-01T10:00:00.000Z".to_owned(),
            env: "e".to_owned(),
            entry: Entry::Decision(DecisionRecord {
                host: "a.test".to_owned(),
                path: "/x\ny".to_owned(),
                ..DecisionRecord::default()
            }),
        };
        let json = serde_json::to_value(&record).expect("encodes");
        let text = String::from_utf8(event(record.seq, &json).to_vec()).expect("UTF-8");
        assert!(text.starts_with("id: 42\ndata: {"), "{text}");
        assert!(text.ends_with("}\n\n"), "{text}");
        assert_eq!(
            text.matches('\n').count(),
            3,
            "one id line, one data line: {text}"
        );
    }

    #[test]
    fn urls_are_rebuilt_as_explain_takes_them() {
        let d = |host: &str, port, path: &str, tls| DecisionRecord {
            host: host.to_owned(),
            port,
            path: path.to_owned(),
            tls,
            ..DecisionRecord::default()
        };
        assert_eq!(
            url(&d("a.test", 80, "/p?q=1", false)),
            "http://a.test:80/p?q=1"
        );
        assert_eq!(url(&d("a.test", 443, "", false)), "https://a.test:443/");
        assert_eq!(url(&d("::1", 8443, "/", true)), "https://[::1]:8443/");
    }
}
