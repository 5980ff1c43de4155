//! Credentials a URL carries in its path: webhook URLs of known providers, where the path
//! itself is the secret (whoever has it can post), so the segments that carry it are
//! redacted wherever a URL is recorded or shown, as [`super::tripwire::redact_path`] does for
//! query credentials.
//!
//! Known by host, since only the provider's host says a path segment is a credential:
//! - Slack: `hooks.slack.com/services/T…/B…/<secret>`, `/workflows/T…/A…/<id>/<secret>`,
//!   `/triggers/T…/<id>/<secret>`;
//! - Discord: `discord.com` and `discordapp.com` (and their `ptb.`, `canary.`),
//!   `/api[/vN]/webhooks/<id>/<token>`;
//! - Microsoft Teams: `outlook.office.com/webhook/…` and `outlook.office365.com/webhook/…`
//!   (everything after it), `*.webhook.office.com/webhookb2/…`; Power Automate's workflow URLs
//!   carry their secret in `sig=`, a query credential;
//! - Telegram: `api.telegram.org/bot<token>/…` and `/file/bot<token>/…`;
//! - Zapier: `hooks.zapier.com/hooks/{catch,standard}/<id>/<secret>`;
//! - IFTTT: `maker.ifttt.com/trigger/<event>/…/with/key/<key>`.
//!
//! Self-hosted hooks (Mattermost's `/hooks/<id>`) can be on any host, so no host says they are
//! one; they are not redacted.

use std::borrow::Cow;

/// What is put in place of a secret segment.
const REDACTED: &str = "[redacted]";

/// How one segment of a path is shown.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Shown {
    /// As sent.
    Kept,
    /// Replaced whole.
    Redacted,
    /// Replaced after this many bytes (Telegram's `bot` before its token).
    RedactedAfter(usize),
}

/// A provider whose webhook URLs carry their credential in the path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Provider {
    Slack,
    Discord,
    /// `outlook.office.com` and `outlook.office365.com`.
    Outlook,
    /// `*.webhook.office.com`.
    WebhookB2,
    Telegram,
    Zapier,
    Ifttt,
}

/// The provider `host` (normalised) belongs to, if any: every other host's path is kept
/// without being looked at.
fn provider(host: &str) -> Option<Provider> {
    Some(match host {
        "hooks.slack.com" => Provider::Slack,
        "discord.com"
        | "discordapp.com"
        | "ptb.discord.com"
        | "canary.discord.com"
        | "ptb.discordapp.com"
        | "canary.discordapp.com" => Provider::Discord,
        "outlook.office.com" | "outlook.office365.com" => Provider::Outlook,
        "api.telegram.org" => Provider::Telegram,
        "hooks.zapier.com" => Provider::Zapier,
        "maker.ifttt.com" => Provider::Ifttt,
        _ if host.ends_with(".webhook.office.com") => Provider::WebhookB2,
        _ => return None,
    })
}

/// How the segment at `index` of a path of `provider` (split on `/`, without the leading one)
/// is shown.
fn shown(provider: Provider, segments: &[&str], index: usize) -> Shown {
    let from = |start: usize| {
        if index >= start {
            Shown::Redacted
        } else {
            Shown::Kept
        }
    };
    let only = |at: usize| {
        if index == at {
            Shown::Redacted
        } else {
            Shown::Kept
        }
    };
    let first = segments.first().copied().unwrap_or("");
    match provider {
        Provider::Slack => match first {
            "services" | "triggers" => from(3),
            "workflows" => from(4),
            _ => Shown::Kept,
        },
        Provider::Discord => {
            let version = segments.get(1).is_some_and(|s| is_api_version(s));
            let webhooks = if version { 2 } else { 1 };
            let is_hook = first == "api" && segments.get(webhooks) == Some(&"webhooks");
            if is_hook {
                only(webhooks + 2)
            } else {
                Shown::Kept
            }
        }
        Provider::Outlook if first == "webhook" => from(1),
        Provider::WebhookB2 if first == "webhookb2" => from(1),
        Provider::Telegram => {
            let at = usize::from(first == "file");
            match segments.get(at) {
                Some(s) if index == at && s.len() > 3 && s.starts_with("bot") => {
                    Shown::RedactedAfter(3)
                }
                _ => Shown::Kept,
            }
        }
        Provider::Zapier
            if first == "hooks" && matches!(segments.get(1), Some(&("catch" | "standard"))) =>
        {
            only(3)
        }
        Provider::Ifttt if first == "trigger" => {
            let key = segments
                .windows(2)
                .position(|w| w == ["with", "key"])
                .map(|at| at + 2);
            key.map_or(Shown::Kept, only)
        }
        _ => Shown::Kept,
    }
}

/// `v10` and the like.
fn is_api_version(segment: &str) -> bool {
    segment
        .strip_prefix('v')
        .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
}

/// `path` (with its query, which is left as it is) with every segment that carries a
/// provider's credential for `host` (normalised: lower case, no trailing dot) replaced.
pub(crate) fn redact<'a>(host: &str, path: &'a str) -> Cow<'a, str> {
    // Refusals made before deciding name the host as it was sent.
    let host = host.trim_end_matches('.');
    let host: Cow<'_, str> = if host.bytes().any(|b| b.is_ascii_uppercase()) {
        Cow::Owned(host.to_ascii_lowercase())
    } else {
        Cow::Borrowed(host)
    };
    let Some(provider) = provider(&host) else {
        return Cow::Borrowed(path);
    };
    let (path_only, query) = match path.split_once('?') {
        Some((p, q)) => (p, Some(q)),
        None => (path, None),
    };
    let Some(rest) = path_only.strip_prefix('/') else {
        return Cow::Borrowed(path);
    };
    let segments: Vec<&str> = rest.split('/').collect();
    let shows: Vec<Shown> = (0..segments.len())
        .map(|i| match shown(provider, &segments, i) {
            // An empty segment carries nothing.
            _ if segments[i].is_empty() => Shown::Kept,
            s => s,
        })
        .collect();
    if shows.iter().all(|s| *s == Shown::Kept) {
        return Cow::Borrowed(path);
    }
    let mut out = String::with_capacity(path.len());
    for (segment, show) in segments.iter().zip(shows) {
        out.push('/');
        match show {
            Shown::Kept => out.push_str(segment),
            Shown::Redacted => out.push_str(REDACTED),
            Shown::RedactedAfter(n) => {
                out.push_str(segment.get(..n).unwrap_or(""));
                out.push_str(REDACTED);
            }
        }
    }
    if let Some(query) = query {
        out.push('?');
        out.push_str(query);
    }
    Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn r(host: &str, path: &str) -> String {
        redact(host, path).into_owned()
    }

    #[test]
    fn a_slack_webhooks_secret_segment_is_redacted_and_its_ids_kept() {
        assert_eq!(
            r("hooks.slack.com", "/services/T0001/B0002/XXXXsecretXXXX"),
            "/services/T0001/B0002/[redacted]"
        );
        assert_eq!(
            r("hooks.slack.com", "/workflows/T0001/A0002/123/s3cr3t"),
            "/workflows/T0001/A0002/123/[redacted]"
        );
        assert_eq!(
            r("hooks.slack.com", "/triggers/T0001/123/s3cr3t"),
            "/triggers/T0001/123/[redacted]"
        );
        assert_eq!(
            r("Hooks.Slack.com.", "/services/T0001/B0002/XXXX"),
            "/services/T0001/B0002/[redacted]"
        );
        // Other hosts with the same path are not Slack's.
        assert_eq!(
            r("slack.example.test", "/services/T0001/B0002/x"),
            "/services/T0001/B0002/x"
        );
    }

    #[test]
    fn a_discord_webhooks_token_is_redacted_with_or_without_an_api_version() {
        for host in ["discord.com", "discordapp.com", "canary.discord.com"] {
            assert_eq!(
                r(host, "/api/webhooks/1234/tok-EN_value?wait=true"),
                "/api/webhooks/1234/[redacted]?wait=true"
            );
        }
        assert_eq!(
            r("discord.com", "/api/v10/webhooks/1234/token/messages/9"),
            "/api/v10/webhooks/1234/[redacted]/messages/9"
        );
        assert_eq!(r("discord.com", "/api/v10/users/@me"), "/api/v10/users/@me");
    }

    #[test]
    fn a_teams_webhook_url_is_redacted_after_its_webhook_segment() {
        assert_eq!(
            r(
                "outlook.office.com",
                "/webhook/a-b@c-d/IncomingWebhook/0123abcd/e-f"
            ),
            "/webhook/[redacted]/[redacted]/[redacted]/[redacted]"
        );
        assert_eq!(
            r(
                "contoso.webhook.office.com",
                "/webhookb2/a-b@c-d/IncomingWebhook/0123/e-f/V2sig"
            ),
            "/webhookb2/[redacted]/[redacted]/[redacted]/[redacted]/[redacted]"
        );
        assert_eq!(r("outlook.office.com", "/owa/"), "/owa/");
    }

    #[test]
    fn a_telegram_bot_token_is_redacted_and_the_method_kept() {
        assert_eq!(
            r(
                "api.telegram.org",
                "/bot123456:AAHsecret/sendMessage?chat_id=1"
            ),
            "/bot[redacted]/sendMessage?chat_id=1"
        );
        assert_eq!(
            r("api.telegram.org", "/file/bot123456:AAHsecret/photos/a.jpg"),
            "/file/bot[redacted]/photos/a.jpg"
        );
        assert_eq!(r("api.telegram.org", "/bot"), "/bot");
    }

    #[test]
    fn zapier_and_ifttt_hook_secrets_are_redacted() {
        assert_eq!(
            r("hooks.zapier.com", "/hooks/catch/123456/abcdef/"),
            "/hooks/catch/123456/[redacted]/"
        );
        assert_eq!(
            r("maker.ifttt.com", "/trigger/door_open/with/key/k3y"),
            "/trigger/door_open/with/key/[redacted]"
        );
        assert_eq!(
            r("maker.ifttt.com", "/trigger/door_open/json/with/key/k3y"),
            "/trigger/door_open/json/with/key/[redacted]"
        );
    }

    #[test]
    fn a_path_with_nothing_to_redact_is_borrowed() {
        assert!(matches!(
            redact("api.example.test", "/services/T/B/x"),
            Cow::Borrowed(_)
        ));
        assert!(matches!(redact("hooks.slack.com", "/"), Cow::Borrowed(_)));
        assert!(matches!(redact("hooks.slack.com", ""), Cow::Borrowed(_)));
    }
}
