//! The providers capture answers for, and the hosts their APIs live on.

use std::fmt;

use super::CaptureError;

/// A mail, SMS or chat API that capture answers as its provider would.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Provider {
    /// SendGrid v3 (`api.sendgrid.com`).
    SendGrid,
    /// Resend (`api.resend.com`).
    Resend,
    /// Postmark (`api.postmarkapp.com`).
    Postmark,
    /// Mailgun (`api.mailgun.net`, `api.eu.mailgun.net`).
    Mailgun,
    /// Twilio Messages (`api.twilio.com`).
    Twilio,
    /// Amazon SES v1 and v2 (`email.<region>.amazonaws.com`).
    Ses,
    /// Slack incoming webhooks (`hooks.slack.com`).
    Slack,
}

impl Provider {
    /// The provider whose API `host` (lower-case, no trailing dot) is.
    pub fn for_host(host: &str) -> Option<Self> {
        match host {
            "api.sendgrid.com" => Some(Self::SendGrid),
            "api.resend.com" => Some(Self::Resend),
            "api.postmarkapp.com" => Some(Self::Postmark),
            "api.mailgun.net" | "api.eu.mailgun.net" => Some(Self::Mailgun),
            "api.twilio.com" => Some(Self::Twilio),
            "hooks.slack.com" => Some(Self::Slack),
            _ if is_ses_host(host) => Some(Self::Ses),
            _ => None,
        }
    }

    /// The name messages carry (`Message::provider`).
    pub fn id(self) -> &'static str {
        match self {
            Self::SendGrid => "sendgrid",
            Self::Resend => "resend",
            Self::Postmark => "postmark",
            Self::Mailgun => "mailgun",
            Self::Twilio => "twilio",
            Self::Ses => "ses",
            Self::Slack => "slack",
        }
    }

    /// The refusal of a payload without `field`.
    pub(super) fn missing(self, field: &'static str) -> CaptureError {
        CaptureError::Missing {
            provider: self,
            field,
        }
    }
}

impl fmt::Display for Provider {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::SendGrid => "SendGrid",
            Self::Resend => "Resend",
            Self::Postmark => "Postmark",
            Self::Mailgun => "Mailgun",
            Self::Twilio => "Twilio",
            Self::Ses => "Amazon SES",
            Self::Slack => "Slack",
        })
    }
}

/// `email.<region>.amazonaws.com`, one label for the region.
fn is_ses_host(host: &str) -> bool {
    host.strip_prefix("email.")
        .and_then(|rest| rest.strip_suffix(".amazonaws.com"))
        .is_some_and(|region| !region.is_empty() && !region.contains('.'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hosts_map_to_their_providers() {
        assert_eq!(
            Provider::for_host("api.eu.mailgun.net"),
            Some(Provider::Mailgun)
        );
        assert_eq!(
            Provider::for_host("email.eu-west-1.amazonaws.com"),
            Some(Provider::Ses)
        );
        assert_eq!(Provider::for_host("email.amazonaws.com"), None);
        assert_eq!(Provider::for_host("email.a.b.amazonaws.com"), None);
        assert_eq!(Provider::for_host("sendgrid.com"), None);
    }
}
