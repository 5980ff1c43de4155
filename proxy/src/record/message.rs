//! A captured message: what `af inbox` shows. Made by capture mode from a provider's API call
//! and by the SMTP listener from a mail; journaled as a `message` record.
//!
//! [`new`] derives what a reader of the inbox looks for first: the links, ranked so a
//! verification or login link comes before ordinary ones and unsubscribe links come last, and
//! the one-time code.

use std::ops::Range;

use linkify::{LinkFinder, LinkKind};
use mail_parser::decoders::html::html_to_text;

pub use af_sidecar_api::journal::Message;
pub(crate) use af_sidecar_api::journal::MessageKind;

/// What a message says: its subject and bodies.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Content {
    /// The subject, for mail.
    pub subject: Option<String>,
    /// The plain-text body.
    pub text: Option<String>,
    /// The HTML body.
    pub html: Option<String>,
}

/// The most of each body (text, HTML) a message keeps, in bytes; the rest is cut at a
/// character boundary and marked.
pub const MAX_BODY_BYTES: usize = 64 * 1024;

/// `body` cut to at most `max` bytes at a character boundary, marked when cut.
fn bounded(mut body: String, max: usize) -> String {
    if body.len() > max {
        let mut end = max;
        while !body.is_char_boundary(end) {
            end -= 1;
        }
        body.truncate(end);
        body.push_str("\n[truncated by af]");
    }
    body
}

/// A message with its links and one-time code derived from its content.
pub(crate) fn new(
    provider: &str,
    kind: MessageKind,
    from: Option<String>,
    to: Vec<String>,
    content: Content,
) -> Message {
    let Content {
        subject,
        text,
        html,
    } = content;
    let links = ranked_links(text.as_deref(), html.as_deref());
    let code = one_time_code(subject.as_deref(), text.as_deref(), html.as_deref());
    // Links and code come from the whole bodies; the record keeps a bounded copy, so one
    // large mail cannot outgrow a journal segment.
    let text = text.map(|t| bounded(t, MAX_BODY_BYTES));
    let html = html.map(|h| bounded(h, MAX_BODY_BYTES));
    Message {
        provider: provider.to_owned(),
        kind,
        from,
        to,
        subject,
        text,
        html,
        links,
        code,
    }
}

/// Words that mark a link as the one the reader wants (verify, log in, reset, accept).
const ACTION_WORDS: &[&str] = &[
    "verif", "confirm", "activat", "login", "log-in", "signin", "sign-in", "magic", "reset",
    "token", "invit",
];

/// Words that mark a link as the one the reader wants least.
const OPT_OUT_WORDS: &[&str] = &["unsubscribe", "preferences", "opt-out", "optout"];

/// Where a link sorts: action links, then ordinary ones, then opt-out links.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum LinkRank {
    Action,
    Ordinary,
    OptOut,
}

impl LinkRank {
    fn of(link: &str) -> Self {
        let link = link.to_lowercase();
        let has_any = |words: &[&str]| words.iter().any(|w| link.contains(w));
        // An unsubscribe link often carries a token: opting out wins.
        if has_any(OPT_OUT_WORDS) {
            Self::OptOut
        } else if has_any(ACTION_WORDS) {
            Self::Action
        } else {
            Self::Ordinary
        }
    }
}

/// Every link in the text body, the HTML's `href`s and the HTML's visible text, once each,
/// ranked (first seen first within a rank).
fn ranked_links(text: Option<&str>, html: Option<&str>) -> Vec<String> {
    let mut found: Vec<String> = Vec::new();
    let mut add = |link: String| {
        if !found.contains(&link) {
            found.push(link);
        }
    };
    let finder = url_finder();
    if let Some(text) = text {
        finder.links(text).for_each(|l| add(l.as_str().to_owned()));
    }
    if let Some(html) = html {
        // Only an anchor's `href`: an image, a stylesheet or an `xmlns` is not a link anybody
        // clicks. Decoding the attribute as HTML turns `&amp;` into `&`.
        finder
            .links(html)
            .filter(|l| is_anchor_href(&html[..l.start()]))
            .for_each(|l| add(html_to_text(l.as_str()).trim().to_owned()));
        let visible = html_to_text(html);
        finder
            .links(&visible)
            .for_each(|l| add(l.as_str().to_owned()));
    }
    found.sort_by_key(|link| LinkRank::of(link));
    found
}

fn url_finder() -> LinkFinder {
    let mut finder = LinkFinder::new();
    finder.kinds(&[LinkKind::Url]);
    finder
}

/// Whether the HTML before a link ends inside an `<a` tag with `href=` (and maybe a quote).
fn is_anchor_href(before: &str) -> bool {
    let Some(tag) = before.rfind('<').map(|at| &before[at + 1..]) else {
        return false;
    };
    let is_anchor = tag
        .split(|c: char| c.is_ascii_whitespace())
        .next()
        .is_some_and(|name| name.eq_ignore_ascii_case("a"));
    let attribute = tag.trim_end_matches(['"', '\'']).trim_end();
    let Some(name) = attribute.strip_suffix('=').map(str::trim_end) else {
        return false;
    };
    let name = name.as_bytes();
    is_anchor
        && !tag.contains('>')
        && name.len() >= 4
        && name[name.len() - 4..].eq_ignore_ascii_case(b"href")
}

/// The first 4 to 8 digit run in the subject, then the text (or the HTML's visible text when
/// there is no text body) that is a whole digit run, outside any link or address, and not a
/// year.
fn one_time_code(subject: Option<&str>, text: Option<&str>, html: Option<&str>) -> Option<String> {
    let body = match (text, html) {
        (Some(text), _) => Some(text.to_owned()),
        (None, Some(html)) => Some(html_to_text(html)),
        (None, None) => None,
    };
    subject
        .and_then(code_in)
        .or_else(|| body.as_deref().and_then(code_in))
}

fn code_in(text: &str) -> Option<String> {
    let mut finder = LinkFinder::new();
    finder.url_must_have_scheme(false);
    let links: Vec<Range<usize>> = finder.links(text).map(|l| l.start()..l.end()).collect();
    digit_runs(text)
        .filter(|run| (4..=8).contains(&run.len()))
        .filter(|run| {
            !links
                .iter()
                .any(|l| l.start <= run.start && run.end <= l.end)
        })
        .map(|run| &text[run])
        .find(|digits| !is_year(digits))
        .map(str::to_owned)
}

/// Every maximal run of ASCII digits, as byte ranges.
fn digit_runs(text: &str) -> impl Iterator<Item = Range<usize>> + '_ {
    let bytes = text.as_bytes();
    let mut at = 0;
    std::iter::from_fn(move || {
        let start = at + bytes[at..].iter().position(u8::is_ascii_digit)?;
        let len = bytes[start..]
            .iter()
            .position(|b| !b.is_ascii_digit())
            .unwrap_or(bytes.len() - start);
        at = start + len;
        Some(start..at)
    })
}

fn is_year(digits: &str) -> bool {
    digits.len() == 4
        && digits
            .parse::<u16>()
            .is_ok_and(|y| (1900..=2099).contains(&y))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn email(subject: Option<&str>, text: Option<&str>, html: Option<&str>) -> Message {
        new(
            "test",
            MessageKind::Email,
            Some("Team <team@example.com>".into()),
            vec!["Ada <ada@example.com>".into(), "bob@example.org".into()],
            Content {
                subject: subject.map(Into::into),
                text: text.map(Into::into),
                html: html.map(Into::into),
            },
        )
    }

    #[test]
    fn links_are_ranked_action_first_and_opt_out_last() {
        let text = "Read https://example.com/blog first.\n\
                    Stop these: https://example.com/unsubscribe?token=abc\n\
                    Confirm: https://example.com/account/confirm?u=1\n\
                    Settings: https://example.com/email/preferences\n\
                    Or sign in: https://example.com/magic-link/xyz";
        let message = email(None, Some(text), None);
        assert_eq!(
            message.links,
            [
                "https://example.com/account/confirm?u=1",
                "https://example.com/magic-link/xyz",
                "https://example.com/blog",
                "https://example.com/unsubscribe?token=abc",
                "https://example.com/email/preferences",
            ]
        );
    }

    #[test]
    fn html_hrefs_are_decoded_and_deduplicated_with_the_text_links() {
        let html = r#"<!DOCTYPE html PUBLIC "-//W3C//DTD XHTML 1.0//EN" "http://www.w3.org/TR/xhtml1/DTD/xhtml1-strict.dtd">
            <html xmlns="http://www.w3.org/1999/xhtml"><head>
            <link rel="stylesheet" href="https://fonts.example.net/css?family=Inter">
            </head><body>
            <img src="https://cdn.example.com/logo.png">
            <a href="https://example.com/welcome">Home</a>
            <a HREF = 'https://app.example.com/verify?email=ada%40example.com&amp;token=t1'>Verify</a>
            <p>Or paste https://app.example.com/verify?email=ada%40example.com&amp;token=t1</p>
            <a href="https://example.com/unsubscribe">Unsubscribe</a>
            </body></html>"#;
        let text = "Verify: https://app.example.com/verify?email=ada%40example.com&token=t1";
        let message = email(None, Some(text), Some(html));
        assert_eq!(
            message.links,
            [
                "https://app.example.com/verify?email=ada%40example.com&token=t1",
                "https://example.com/welcome",
                "https://example.com/unsubscribe",
            ]
        );
    }

    #[test]
    fn code_is_the_first_short_digit_run_that_is_not_a_year() {
        let message = email(
            Some("Welcome to Example, 2024 edition"),
            Some(
                "Since 1999 we count 123456789 users. Your code is 482913; it expires in 10 minutes.",
            ),
            None,
        );
        assert_eq!(message.code.as_deref(), Some("482913"));
    }

    #[test]
    fn code_in_the_subject_wins_over_the_text() {
        let message = email(
            Some("739201 is your Example code"),
            Some("Your code is 482913."),
            None,
        );
        assert_eq!(message.code.as_deref(), Some("739201"));
    }

    #[test]
    fn digits_inside_links_and_addresses_are_not_codes() {
        let message = email(
            Some("Reset your password"),
            Some(
                "Open https://example.com/reset/84920173 or example.com/r/55512 \
                 (sent to user77441@example.com). Reference 3091.",
            ),
            None,
        );
        assert_eq!(message.code.as_deref(), Some("3091"));
    }

    #[test]
    fn nine_digit_runs_years_and_short_runs_give_no_code() {
        let message = email(
            Some("Report 2031"),
            Some("Order 123456789 shipped in 1987, item 123, ref 12-34-56."),
            None,
        );
        assert_eq!(message.code, None);
    }

    #[test]
    fn a_year_boundary_four_digit_run_is_a_code() {
        let message = email(None, Some("Codes: 2099 is a year, 2100 is not."), None);
        assert_eq!(message.code.as_deref(), Some("2100"));
    }

    #[test]
    fn code_comes_from_the_html_text_when_there_is_no_text_body() {
        let html = r#"<html><head><style>td{width:1200px}</style></head>
            <body><a href="https://example.com/v/99887766">Verify</a>
            <p>Your code: <b>551023</b></p></body></html>"#;
        let message = email(None, None, Some(html));
        assert_eq!(message.code.as_deref(), Some("551023"));
        assert_eq!(message.links, ["https://example.com/v/99887766"]);
    }

    #[test]
    fn matches_filters_recipients_and_subject_ignoring_case() {
        let message = email(Some("Confirm your EMAIL"), Some("hi"), None);
        assert!(message.matches(None, None));
        assert!(message.matches(Some("ADA@example"), None));
        assert!(message.matches(Some("bob@"), Some("confirm your email")));
        assert!(!message.matches(Some("carol@"), None));
        assert!(!message.matches(Some("ada@"), Some("password")));

        let chat = new(
            "slack",
            MessageKind::Message,
            None,
            vec![],
            Content::default(),
        );
        assert!(!chat.matches(None, Some("confirm")));
        assert!(!chat.matches(Some("ada"), None));
    }
}
