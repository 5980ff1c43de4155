//! Twilio Messages, `POST /2010-04-01/Accounts/{AccountSid}/Messages.json`: answered `201`
//! with the message resource as Twilio returns it for a message it has queued.

use std::time::{SystemTime, UNIX_EPOCH};

use http::StatusCode;
use mail_parser::DateTime;
use serde_json::json;

use super::form::Form;
use super::ids::Digest;
use super::{Answer, CaptureError, Exchange, Handled, Provider, Sent};
use crate::record::message::{self, Content, MessageKind};

const PROVIDER: Provider = Provider::Twilio;

/// Capture a Twilio request; `now` is the message's `date_created`.
pub(super) fn capture(ex: &Exchange<'_>, now: SystemTime) -> Handled {
    let account = ex
        .path
        .strip_prefix("/2010-04-01/Accounts/")?
        .strip_suffix("/Messages.json")?;
    if account.is_empty() || account.contains('/') {
        return None;
    }
    Some(send(ex, account, now))
}

fn send(ex: &Exchange<'_>, account: &str, now: SystemTime) -> Result<Sent, CaptureError> {
    let form = Form::of(PROVIDER, ex)?;
    let to = form.first("To").ok_or(PROVIDER.missing("To"))?;
    let from = form.first("From");
    let service = form.first("MessagingServiceSid");
    let sender = from
        .or(service)
        .ok_or(PROVIDER.missing("From or MessagingServiceSid"))?;
    let body = form.first("Body");
    let media = form.all("MediaUrl").count();
    if body.is_none() && media == 0 && form.first("ContentSid").is_none() {
        return Err(PROVIDER.missing("Body, MediaUrl or ContentSid"));
    }
    let sid = format!("SM{}", Digest::of(ex.body, "sid", 0).hex(32));
    let uri = format!("/2010-04-01/Accounts/{account}/Messages/{sid}");
    let created = rfc2822(now);
    let resource = json!({
        "account_sid": account,
        "api_version": "2010-04-01",
        "body": body.unwrap_or_default(),
        "date_created": created,
        "date_sent": null,
        "date_updated": created,
        "direction": "outbound-api",
        "error_code": null,
        "error_message": null,
        "from": from,
        "messaging_service_sid": service,
        "num_media": media.to_string(),
        "num_segments": "1",
        "price": null,
        "price_unit": "USD",
        "sid": sid,
        // A message sent through a messaging service waits for it to pick a sender.
        "status": if from.is_some() { "queued" } else { "accepted" },
        "subresource_uris": {"media": format!("{uri}/Media.json")},
        "to": to,
        "uri": format!("{uri}.json"),
    });
    let content = Content {
        subject: None,
        text: body.map(str::to_owned),
        html: None,
    };
    let message = message::new(
        PROVIDER.id(),
        MessageKind::Sms,
        Some(sender.to_owned()),
        vec![to.to_owned()],
        content,
    );
    Ok(Sent {
        answer: Answer::json(StatusCode::CREATED, &resource),
        messages: vec![message],
    })
}

/// `Thu, 30 Jul 2015 20:12:31 +0000`, as Twilio writes dates.
fn rfc2822(t: SystemTime) -> String {
    let seconds = t
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX));
    DateTime::from_timestamp(seconds).to_rfc822()
}

#[cfg(test)]
mod tests {
    use super::super::Captured;
    use super::super::testing::{json_body, post_form, refusal, sent};
    use crate::record::message::MessageKind;

    const HOST: &str = "api.twilio.com";
    const PATH: &str = "/2010-04-01/Accounts/AC0123456789abcdef0123456789abcdef/Messages.json";

    #[test]
    fn message_is_created_queued_with_the_resource_twilio_returns() {
        // As twilio-node `client.messages.create({to, from, body})` sends it.
        let captured = post_form(
            HOST,
            PATH,
            &[
                ("To", "+15558675310"),
                ("From", "+15017122661"),
                ("Body", "Your Acme verification code is: 604918"),
            ],
        );
        let (answer, messages) = sent(captured);
        assert_eq!(answer.status, 201);
        let resource = json_body(&answer);
        let sid = resource["sid"].as_str().expect("sid");
        assert!(sid.starts_with("SM") && sid.len() == 34);
        assert!(sid[2..].bytes().all(|b| b.is_ascii_hexdigit()));
        assert_eq!(
            resource["account_sid"],
            "AC0123456789abcdef0123456789abcdef"
        );
        assert_eq!(resource["status"], "queued");
        assert_eq!(resource["to"], "+15558675310");
        assert_eq!(resource["from"], "+15017122661");
        assert_eq!(resource["body"], "Your Acme verification code is: 604918");
        assert_eq!(resource["date_created"], "Thu, 30 Jul 2015 20:12:31 +0000");
        assert_eq!(resource["direction"], "outbound-api");
        assert_eq!(
            resource["uri"],
            format!("/2010-04-01/Accounts/AC0123456789abcdef0123456789abcdef/Messages/{sid}.json")
        );
        let [message] = &messages[..] else {
            panic!("one message")
        };
        assert_eq!(message.provider, "twilio");
        assert_eq!(message.kind, MessageKind::Sms);
        assert_eq!(message.from.as_deref(), Some("+15017122661"));
        assert_eq!(message.to, ["+15558675310"]);
        assert_eq!(message.subject, None);
        assert_eq!(
            message.text.as_deref(),
            Some("Your Acme verification code is: 604918")
        );
        assert_eq!(message.html, None);
        assert!(message.links.is_empty());
        assert_eq!(message.code.as_deref(), Some("604918"));
    }

    #[test]
    fn messaging_service_send_is_accepted_without_a_from() {
        let captured = post_form(
            HOST,
            PATH,
            &[
                ("To", "+15558675310"),
                ("MessagingServiceSid", "MG9752274e9e519418a7406176694466fa"),
                ("Body", "Log in: https://acme.com/login/abc"),
            ],
        );
        let (answer, messages) = sent(captured);
        let resource = json_body(&answer);
        assert_eq!(resource["status"], "accepted");
        assert_eq!(resource["from"], serde_json::Value::Null);
        assert_eq!(
            resource["messaging_service_sid"],
            "MG9752274e9e519418a7406176694466fa"
        );
        assert_eq!(
            messages[0].from.as_deref(),
            Some("MG9752274e9e519418a7406176694466fa")
        );
        assert_eq!(messages[0].links, ["https://acme.com/login/abc"]);
    }

    #[test]
    fn messages_twilio_would_reject_are_refused_and_other_routes_have_no_handler() {
        let no_to = post_form(HOST, PATH, &[("From", "+15017122661"), ("Body", "x")]);
        assert_eq!(refusal(no_to), "the Twilio payload has no To");
        let no_sender = post_form(HOST, PATH, &[("To", "+15558675310"), ("Body", "x")]);
        assert_eq!(
            refusal(no_sender),
            "the Twilio payload has no From or MessagingServiceSid"
        );
        let calls = "/2010-04-01/Accounts/AC0123456789abcdef0123456789abcdef/Calls.json";
        assert!(matches!(
            post_form(HOST, calls, &[("To", "+1")]),
            Captured::NoHandler
        ));
    }
}
