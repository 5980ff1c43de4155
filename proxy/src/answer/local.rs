//! Answering a request in the sidecar (mock, capture, synth): read the body within the mode's
//! cap, check it for live secrets, make the answer, journal what was captured. Synth asks its
//! model endpoint, when one is configured ([`model_client`](crate::answer::modes::model_client)).

use crate::answer::modes::model_client::CallJournal;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::SystemTime;

use af_policy::egress::Mode;
use af_policy::error::codes;
use bytes::Bytes;
use http::{HeaderValue, Request, Response, StatusCode};
use http_body_util::{BodyExt, Either, Full, Limited};
use hyper::body::Body;
use hyper::body::Incoming;

use crate::answer::body::ProxyBody;
use crate::answer::modes::capture::{self, Captured};
use crate::answer::modes::{Answer, Exchange, mock, synth};
use crate::answer::refusal::live_credential;
use crate::answer::refusal::{self, Refusal};
use crate::answer::refuse::refuse;
use crate::decide::Ticket;
use crate::decide::tripwire;
use crate::record::journal::{Entry, MessageRecord};
use crate::record::message::Message;
use crate::state::State;

/// Answer `req` in `mode` and close the ticket.
pub(crate) async fn answer(
    state: &Arc<State>,
    mode: Mode,
    req: Request<Incoming>,
    ticket: Ticket,
) -> Response<ProxyBody> {
    let cap = match mode {
        Mode::Capture => state.modes.capture_body_bytes,
        _ => state.modes.mock_body_bytes,
    };
    let (parts, body) = req.into_parts();
    // Room for the whole body is taken before it is read (its declared length, else the cap),
    // so concurrent requests cannot hold more than `modes.buffered_body_bytes` together.
    let declared = body.size_hint().exact().map_or(cap, |n| n as usize);
    let kib = u32::try_from(declared.min(cap).div_ceil(1024).max(1)).unwrap_or(u32::MAX);
    let Ok(_room) = state.modes.buffered.clone().acquire_many_owned(kib).await else {
        return refuse(ticket, &unavailable());
    };
    let body: Bytes = match Limited::new(body, cap).collect().await {
        Ok(collected) => collected.to_bytes(),
        Err(e) => {
            let refusal = if e.is::<http_body_util::LengthLimitError>() {
                Refusal::new(
                    StatusCode::PAYLOAD_TOO_LARGE,
                    &codes::NET_BODY_TOO_LARGE,
                    "body_too_large",
                    format!(
                        "The request body to {} is larger than the {} KiB {mode} mode reads",
                        ticket.host(),
                        cap / 1024
                    ),
                )
            } else {
                Refusal::new(
                    StatusCode::BAD_REQUEST,
                    &codes::NET_BAD_REQUEST,
                    "client_gone",
                    format!("The request body could not be read: {e}"),
                )
            };
            return refuse(ticket, &refusal);
        }
    };
    if let Some(hit) = tripwire::scan_body(&body) {
        return refuse(ticket, &live_credential(&hit));
    }
    let host = ticket.host().to_owned();
    let exchange = Exchange {
        method: &parts.method,
        host: &host,
        path: parts.uri.path(),
        query: parts.uri.query(),
        headers: &parts.headers,
        body: &body,
    };
    match dispatch(state, mode, &ticket, &exchange).await {
        Ok((made, messages)) => {
            record_messages(state, &ticket, ticket.client(), messages);
            let up = body.len() as u64;
            let down = made.body.len() as u64;
            let status = made.status.as_u16();
            let resp = response(made, mode, ticket.rule_label());
            ticket.answered(status, up, down);
            resp
        }
        Err(refusal) => refuse(ticket, &refusal),
    }
}

/// The answer the mode makes, and the messages capture recorded.
async fn dispatch(
    state: &State,
    mode: Mode,
    ticket: &Ticket,
    exchange: &Exchange<'_>,
) -> Result<(Answer, Vec<Message>), Box<Refusal>> {
    let rule = ticket.rule().map(|id| state.catalogue.rule(id));
    let modes = &state.modes;
    let pack = modes
        .packs
        .for_rule(rule.and_then(|r| r.fixtures.as_deref()), exchange.host);
    match mode {
        Mode::Synth => {
            let doc = rule
                .and_then(|r| r.openapi.as_deref())
                .and_then(|name| modes.openapi.get(name));
            let offline = synth::answer(doc, pack, exchange);
            let made = match &modes.model {
                Some(model) => {
                    let to = CallJournal {
                        journal: state.journal.clone(),
                        on_behalf: ticket.on_behalf(),
                    };
                    model.answer(doc, exchange, offline, to).await
                }
                None => offline,
            };
            Ok((made, Vec::new()))
        }
        Mode::Capture => {
            // A rule naming the host itself (not a pattern) may capture any request generically.
            let named_exactly = rule.is_some_and(|r| !r.host.contains('*'));
            match capture::capture(exchange, named_exactly, SystemTime::now()) {
                Captured::Messages { answer, messages } => Ok((answer, messages)),
                Captured::NoHandler => Err(Box::new(Refusal::new(
                    StatusCode::NOT_IMPLEMENTED,
                    &codes::NET_CAPTURE_NO_HANDLER,
                    "capture_no_handler",
                    format!(
                        "{} {}{} is under capture but no provider handler answers it, and its rule does not name the host exactly",
                        exchange.method, exchange.host, exchange.path
                    ),
                ))),
                Captured::Refused(e) => Err(Box::new(Refusal::new(
                    StatusCode::BAD_REQUEST,
                    &codes::NET_CAPTURE_PAYLOAD,
                    "capture_payload",
                    e.to_string(),
                ))),
            }
        }
        _ => Ok((mock::answer(pack, exchange), Vec::new())),
    }
}

/// Journal each captured message next to the decision.
fn record_messages(state: &State, ticket: &Ticket, client: SocketAddr, messages: Vec<Message>) {
    for message in messages {
        state.metrics.message_captured();
        state.journal.record(Entry::Message(MessageRecord {
            via: "capture".to_owned(),
            client,
            host: ticket.host().to_owned(),
            rule: ticket.rule_label().map(str::to_owned),
            message,
        }));
    }
}

/// The budget for buffered bodies was closed (the sidecar is stopping).
fn unavailable() -> Refusal {
    Refusal::new(
        StatusCode::SERVICE_UNAVAILABLE,
        &codes::NET_CONNECTION_LIMIT,
        "stopping",
        "The sidecar is stopping and answers no more requests",
    )
}

/// The answer as an HTTP response, marked with the sidecar's decision headers.
fn response(made: Answer, mode: Mode, rule: Option<&str>) -> Response<ProxyBody> {
    let mut resp = Response::new(Either::Left(Full::new(made.body)));
    *resp.status_mut() = made.status;
    *resp.headers_mut() = made.headers;
    let h = resp.headers_mut();
    h.insert(refusal::DECISION, HeaderValue::from_static(mode.as_str()));
    if let Some(rule) = rule.and_then(|r| HeaderValue::from_str(r).ok()) {
        h.insert(refusal::RULE, rule);
    }
    resp
}
