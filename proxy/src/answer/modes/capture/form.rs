//! Form payloads (Twilio, SES v1, Mailgun, legacy Slack): URL-encoded or multipart/form-data,
//! each read by a real parser.

use http::header;
use mail_parser::{MessageParser, MimeHeaders};

use super::{CaptureError, Exchange, Provider};

/// A form's fields in the order sent; a name may repeat.
pub(super) struct Form(Vec<(String, String)>);

impl Form {
    /// The request's form: multipart/form-data when its Content-Type says so, else URL-encoded.
    pub(super) fn of(provider: Provider, ex: &Exchange<'_>) -> Result<Self, CaptureError> {
        if ex.media_type().as_deref() == Some("multipart/form-data") {
            let content_type = ex
                .headers
                .get(header::CONTENT_TYPE)
                .and_then(|v| v.to_str().ok())
                .unwrap_or_default();
            Self::multipart(provider, content_type, ex.body)
        } else {
            serde_urlencoded::from_bytes(ex.body)
                .map(Self)
                .map_err(|source| CaptureError::Form { provider, source })
        }
    }

    /// multipart/form-data is MIME (RFC 7578): the MIME parser reads it once it is given the
    /// request's Content-Type as the entity's header.
    fn multipart(
        provider: Provider,
        content_type: &str,
        body: &[u8],
    ) -> Result<Self, CaptureError> {
        let mut entity = format!("Content-Type: {content_type}\r\n\r\n").into_bytes();
        entity.extend_from_slice(body);
        let parsed = MessageParser::default()
            .parse(&entity[..])
            .filter(|m| m.root_part().is_multipart())
            .ok_or(CaptureError::Multipart { provider })?;
        let fields = parsed
            .parts
            .iter()
            .filter(|part| !part.is_multipart())
            .filter_map(|part| {
                let name = part.content_disposition()?.attribute("name")?;
                let value = String::from_utf8_lossy(part.contents());
                Some((name.to_owned(), value.into_owned()))
            })
            .collect();
        Ok(Self(fields))
    }

    /// The first non-empty value of `name`.
    pub(super) fn first(&self, name: &str) -> Option<&str> {
        self.all(name).find(|v| !v.is_empty())
    }

    /// Every non-empty value of `name`, in order.
    pub(super) fn all<'a>(&'a self, name: &str) -> impl Iterator<Item = &'a str> {
        self.0
            .iter()
            .filter(move |(n, v)| n == name && !v.is_empty())
            .map(|(_, v)| v.as_str())
    }

    /// The values of an AWS query list, `prefix.1`, `prefix.2`, ..., in index order.
    pub(super) fn members(&self, prefix: &str) -> Vec<&str> {
        let mut members: Vec<(u32, &str)> = self
            .0
            .iter()
            .filter_map(|(name, value)| {
                let index = name.strip_prefix(prefix)?.strip_prefix('.')?.parse().ok()?;
                Some((index, value.as_str()))
            })
            .collect();
        members.sort_by_key(|(index, _)| *index);
        members.into_iter().map(|(_, value)| value).collect()
    }
}

#[cfg(test)]
mod tests {
    use http::{HeaderMap, HeaderValue, Method};

    use super::*;

    fn form(content_type: &'static str, body: &[u8]) -> Result<Form, CaptureError> {
        let mut headers = HeaderMap::new();
        headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
        let ex = Exchange {
            method: &Method::POST,
            host: "api.example.com",
            path: "/",
            query: None,
            headers: &headers,
            body,
        };
        Form::of(Provider::Mailgun, &ex)
    }

    #[test]
    fn urlencoded_fields_keep_order_and_repeats() {
        let form = form(
            "application/x-www-form-urlencoded",
            b"to=a%40example.com&subject=Hi+there&to=b%40example.com&empty=",
        )
        .expect("form");
        assert_eq!(
            form.all("to").collect::<Vec<_>>(),
            ["a@example.com", "b@example.com"]
        );
        assert_eq!(form.first("subject"), Some("Hi there"));
        assert_eq!(form.first("empty"), None);
    }

    #[test]
    fn multipart_fields_are_read_with_utf8_and_line_breaks() {
        let body = "--b0\r\nContent-Disposition: form-data; name=\"to\"\r\n\r\na@example.com\r\n\
                    --b0\r\nContent-Disposition: form-data; name=\"text\"\r\n\r\nCaf\u{e9}\r\nline 2\r\n\
                    --b0--\r\n";
        let form = form("multipart/form-data; boundary=b0", body.as_bytes()).expect("form");
        assert_eq!(form.first("to"), Some("a@example.com"));
        assert_eq!(form.first("text"), Some("Caf\u{e9}\r\nline 2"));
    }

    #[test]
    fn multipart_without_a_boundary_is_refused() {
        let error = form("multipart/form-data", b"to=a").err().expect("refused");
        assert_eq!(
            error.to_string(),
            "the Mailgun payload is not multipart/form-data with a boundary"
        );
    }

    #[test]
    fn aws_list_members_come_in_index_order() {
        let form = form(
            "application/x-www-form-urlencoded",
            b"L.member.2=b&L.member.10=c&L.member.1=a&Lx.member.1=no&L.member.x=no",
        )
        .expect("form");
        assert_eq!(form.members("L.member"), ["a", "b", "c"]);
    }
}
