//! A captured message: what `af inbox` shows. Made by capture mode from a provider's API call
//! and by the SMTP listener from a mail; journaled as a `message` record.

use serde::{Deserialize, Serialize};

/// What kind of message a capture was.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum MessageKind {
    /// An email (mail APIs, SMTP).
    Email,
    /// A text message (Twilio Messages).
    Sms,
    /// A chat message (Slack incoming webhooks) or any other captured request.
    Message,
}

/// One captured message, as the inbox lists it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Message {
    /// Who it was sent through: `sendgrid`, `resend`, `postmark`, `mailgun`, `twilio`, `ses`,
    /// `slack`, `smtp`, or `request` for a host captured without a provider handler.
    pub provider: String,
    /// Email, SMS or chat message.
    pub kind: MessageKind,
    /// The sender, as given.
    pub from: Option<String>,
    /// Every recipient (to, cc, bcc), as given.
    pub to: Vec<String>,
    /// The subject, for mail.
    pub subject: Option<String>,
    /// The plain-text body.
    pub text: Option<String>,
    /// The HTML body.
    pub html: Option<String>,
    /// Links found in the bodies: verification and login links first, unsubscribe last.
    pub links: Vec<String>,
    /// The first 4 to 8 digit run in the subject or text that is not a year (a one-time code).
    pub code: Option<String>,
}
