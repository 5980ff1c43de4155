//! Slack incoming webhooks, `POST /services/T…/B…/…` with a JSON payload (or the legacy form
//! field `payload`): answered `200 ok`.

use http::StatusCode;
use serde::Deserialize;

use super::form::Form;
use super::{Answer, CaptureError, Exchange, Handled, Provider, Sent};
use crate::record::message::{self, Content, MessageKind};

const PROVIDER: Provider = Provider::Slack;

#[derive(Deserialize)]
struct Payload {
    text: Option<String>,
    channel: Option<String>,
    #[serde(default)]
    blocks: Vec<Block>,
    #[serde(default)]
    attachments: Vec<Attachment>,
}

#[derive(Deserialize)]
struct Block {
    text: Option<TextObject>,
    #[serde(default)]
    fields: Vec<TextObject>,
}

#[derive(Deserialize)]
struct TextObject {
    text: String,
}

#[derive(Deserialize)]
struct Attachment {
    pretext: Option<String>,
    text: Option<String>,
}

/// Capture a Slack request.
pub(super) fn capture(ex: &Exchange<'_>) -> Handled {
    let segments: Vec<&str> = ex.path.strip_prefix("/services/")?.split('/').collect();
    let [team, hook, secret] = segments[..] else {
        return None;
    };
    if [team, hook, secret].iter().any(|s| s.is_empty()) {
        return None;
    }
    Some(send(ex, hook))
}

fn send(ex: &Exchange<'_>, hook: &str) -> Result<Sent, CaptureError> {
    let payload: Payload =
        if ex.media_type().as_deref() == Some("application/x-www-form-urlencoded") {
            let form = Form::of(PROVIDER, ex)?;
            let payload = form.first("payload").ok_or(PROVIDER.missing("payload"))?;
            super::json(PROVIDER, payload.as_bytes())?
        } else {
            super::json(PROVIDER, ex.body)?
        };
    let blocks = payload.blocks.iter().flat_map(|block| {
        block
            .text
            .iter()
            .chain(&block.fields)
            .map(|t| t.text.as_str())
    });
    let attachments = payload.attachments.iter().flat_map(|a| {
        [a.pretext.as_deref(), a.text.as_deref()]
            .into_iter()
            .flatten()
    });
    let parts: Vec<&str> = payload
        .text
        .as_deref()
        .into_iter()
        .chain(blocks)
        .chain(attachments)
        .filter(|part| !part.is_empty())
        .collect();
    if parts.is_empty() {
        return Err(PROVIDER.missing("text, blocks or attachments"));
    }
    // A webhook posts to the channel it was made for (its `B…` id), unless a legacy webhook
    // names another.
    let channel = payload.channel.unwrap_or_else(|| hook.to_owned());
    let content = Content {
        text: Some(parts.join("\n")),
        ..Content::default()
    };
    let message = message::new(
        PROVIDER.id(),
        MessageKind::Message,
        None,
        vec![channel],
        content,
    );
    Ok(Sent {
        answer: Answer::new(StatusCode::OK, "text/plain", "ok"),
        messages: vec![message],
    })
}

#[cfg(test)]
mod tests {
    use http::header;
    use serde_json::json;

    use super::super::Captured;
    use super::super::testing::{post_form, post_json, refusal, sent};
    use crate::record::message::MessageKind;

    const HOST: &str = "hooks.slack.com";
    const PATH: &str = "/services/T00000000/B00000000/XXXXXXXXXXXXXXXXXXXXXXXX";

    #[test]
    fn webhook_post_is_answered_ok_with_every_text_captured() {
        // As @slack/webhook `IncomingWebhook.send({text, blocks, attachments})` sends it.
        let payload = json!({
            "text": "New signup: ada@example.com",
            "blocks": [
                {"type": "header", "text": {"type": "plain_text", "text": "Signup"}},
                {"type": "section", "text": {"type": "mrkdwn", "text": "*Ada* joined"},
                 "fields": [{"type": "mrkdwn", "text": "Plan: pro"}]},
                {"type": "divider"}
            ],
            "attachments": [{"color": "#36a64f", "pretext": "Review",
                             "text": "<https://admin.acme.com/users/42|Open>"}]
        });
        let (answer, messages) = sent(post_json(HOST, PATH, &payload));
        assert_eq!(answer.status, 200);
        assert_eq!(answer.headers[header::CONTENT_TYPE], "text/plain");
        assert_eq!(answer.body, "ok");
        let [message] = &messages[..] else {
            panic!("one message")
        };
        assert_eq!(message.provider, "slack");
        assert_eq!(message.kind, MessageKind::Message);
        assert_eq!(message.from, None);
        assert_eq!(message.to, ["B00000000"]);
        assert_eq!(message.subject, None);
        assert_eq!(
            message.text.as_deref(),
            Some(
                "New signup: ada@example.com\nSignup\n*Ada* joined\nPlan: pro\nReview\n\
                 <https://admin.acme.com/users/42|Open>"
            )
        );
        assert_eq!(message.html, None);
        assert_eq!(message.links, ["https://admin.acme.com/users/42"]);
    }

    #[test]
    fn legacy_form_payload_names_its_channel() {
        let payload = json!({"channel": "#alerts", "text": "Deploy 4471 done"}).to_string();
        let (answer, messages) = sent(post_form(HOST, PATH, &[("payload", &payload)]));
        assert_eq!(answer.body, "ok");
        assert_eq!(messages[0].to, ["#alerts"]);
        assert_eq!(messages[0].code.as_deref(), Some("4471"));
    }

    #[test]
    fn empty_payloads_are_refused_and_other_paths_have_no_handler() {
        assert_eq!(
            refusal(post_json(
                HOST,
                PATH,
                &json!({"blocks": [{"type": "divider"}]})
            )),
            "the Slack payload has no text, blocks or attachments"
        );
        let workflow = "/workflows/T00000000/A00000000/123/abc";
        assert!(matches!(
            post_json(HOST, workflow, &json!({"text": "x"})),
            Captured::NoHandler
        ));
        let short = "/services/T00000000/B00000000";
        assert!(matches!(
            post_json(HOST, short, &json!({"text": "x"})),
            Captured::NoHandler
        ));
    }
}
