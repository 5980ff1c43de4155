//! Every send route capture answers, as the providers' SDKs call them: the table capture's
//! property tests and the capture fuzz target both drive.

/// The content type of a JSON body.
pub const JSON: &str = "application/json";
/// The content type of a form body.
pub const FORM: &str = "application/x-www-form-urlencoded";

/// Every send route: host, path and the content type its SDKs use.
pub const SEND_ROUTES: [(&str, &str, &str); 13] = [
    ("api.sendgrid.com", "/v3/mail/send", JSON),
    ("api.resend.com", "/emails", JSON),
    ("api.resend.com", "/emails/batch", JSON),
    ("api.postmarkapp.com", "/email", JSON),
    ("api.postmarkapp.com", "/email/batch", JSON),
    ("api.postmarkapp.com", "/email/withTemplate", JSON),
    ("api.postmarkapp.com", "/email/batchWithTemplates", JSON),
    ("api.mailgun.net", "/v3/mg.example.com/messages", FORM),
    ("api.mailgun.net", "/v3/mg.example.com/messages.mime", FORM),
    (
        "api.twilio.com",
        "/2010-04-01/Accounts/AC0123456789abcdef0123456789abcdef/Messages.json",
        FORM,
    ),
    ("email.us-east-1.amazonaws.com", "/", FORM),
    (
        "email.us-east-1.amazonaws.com",
        "/v2/email/outbound-emails",
        JSON,
    ),
    ("hooks.slack.com", "/services/T0/B0/X0", JSON),
];
