//! The SMTP listener with a real client (lettre) and raw conversations: mail over STARTTLS on
//! the environment CA, plain mail, a refused oversize mail, pipelining and the idle timeout,
//! each read back from the admin API as a `message` record.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use common::intercept::TestCa;
use common::*;
use lettre::message::header::ContentType;
use lettre::message::{Attachment, MultiPart};
use lettre::transport::smtp::authentication::Credentials;
use lettre::transport::smtp::client::{Certificate, CertificateStore, Tls, TlsParameters};
use lettre::{AsyncSmtpTransport, AsyncTransport, Tokio1Executor};
use serde_json::{Value, json};
use smtp_proto::response::parser::ResponseReceiver;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// The mail host the service believes it talks to (DNS answers it with the sidecar).
const MAIL_HOST: &str = "smtp.sendgrid.net";
const SECRET: &str = "SG.very-secret-api-key";
const VERIFY: &str = "https://shop.test/verify?token=abc123";
const UNSUBSCRIBE: &str = "https://shop.test/unsubscribe";

/// A sidecar with SMTP on one loopback port; `smtp` is added to `listeners.smtp` and `extra`
/// to the top level of its configuration.
async fn sidecar(smtp: &str, extra: String) -> (Sidecar, SocketAddr) {
    let mut setup = Setup::new(&egress(&[]), SocketAddr::from(([127, 0, 0, 1], 9)));
    setup.smtp = format!("    listen: [\"127.0.0.1:0\"]\n{smtp}");
    setup.extra = extra;
    let sc = Sidecar::start(&setup).await;
    let smtp = sc.running.smtp[0];
    (sc, smtp)
}

/// Wait until `n` message records are journaled, and return every message record.
async fn messages(admin: &Admin, n: usize) -> Vec<Value> {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let found: Vec<Value> = admin
            .records("")
            .await
            .into_iter()
            .filter(|r| r["kind"] == "message")
            .collect();
        if found.len() >= n || Instant::now() > deadline {
            assert_eq!(found.len(), n, "{found:#?}");
            return found;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Read whole replies from `stream` until one with `last` as its code arrives; returns the codes.
async fn read_replies(stream: &mut TcpStream, last: u16) -> Vec<u16> {
    let mut codes = Vec::new();
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        loop {
            let mut rest = buf.iter();
            match ResponseReceiver::default().parse(&mut rest) {
                Ok(reply) => {
                    let used = buf.len() - rest.as_slice().len();
                    buf.drain(..used);
                    codes.push(reply.code);
                    if reply.code == last {
                        return codes;
                    }
                }
                Err(smtp_proto::Error::NeedsMoreData { .. }) => break,
                Err(e) => panic!("malformed reply after {codes:?}: {e}"),
            }
        }
        let n = tokio::time::timeout(Duration::from_secs(10), stream.read(&mut chunk))
            .await
            .expect("a reply in time")
            .expect("read");
        assert!(n > 0, "closed after {codes:?}");
        buf.extend_from_slice(&chunk[..n]);
    }
}

/// A lettre client that requires STARTTLS for [`MAIL_HOST`] and trusts `ca` and nothing else
/// (no web roots, no system store).
fn starttls_mailer(port: SocketAddr, ca: &TestCa) -> AsyncSmtpTransport<Tokio1Executor> {
    let tls = TlsParameters::builder(MAIL_HOST.into())
        .certificate_store(CertificateStore::None)
        .add_root_certificate(Certificate::from_pem(ca.cert_pem.as_bytes()).unwrap())
        .build_rustls()
        .unwrap();
    AsyncSmtpTransport::<Tokio1Executor>::builder_dangerous(port.ip().to_string())
        .port(port.port())
        .tls(Tls::Required(tls))
        .credentials(Credentials::new("apikey".into(), SECRET.into()))
        .build()
}

#[tokio::test]
async fn a_multipart_mail_over_starttls_on_the_environment_ca_lands_in_the_inbox() {
    let ca = TestCa::new();
    let (sc, port) = sidecar("", ca.tls_yaml(16, &[])).await;
    let text = format!("Welcome! Confirm your account: {VERIFY}\nYour code is 482913.\n");
    let html = format!(
        "<p>Welcome!</p><p><a href=\"{UNSUBSCRIBE}\">Unsubscribe</a> <a href=\"{VERIFY}\">Confirm</a></p><p>Code <b>482913</b></p>"
    );
    let mail = lettre::Message::builder()
        .from("Shop <no-reply@shop.test>".parse().unwrap())
        .to("Ana <ana@example.test>".parse().unwrap())
        .bcc("audit@shop.test".parse().unwrap())
        .subject("Confirm your account")
        .multipart(
            MultiPart::mixed()
                .multipart(MultiPart::alternative_plain_html(
                    text.clone(),
                    html.clone(),
                ))
                .singlepart(Attachment::new("invoice.pdf".into()).body(
                    b"%PDF-1.4 secret attachment body".to_vec(),
                    ContentType::parse("application/pdf").unwrap(),
                )),
        )
        .unwrap();
    let sent = starttls_mailer(port, &ca)
        .send(mail)
        .await
        .expect("the sidecar accepts the mail");
    assert_eq!(sent.code().to_string(), "250");

    let [record] = &messages(&sc.admin(), 1).await[..] else {
        unreachable!()
    };
    assert_eq!(record["env"], "test-env");
    assert_eq!(record["via"], "smtp");
    assert_eq!(record["host"], MAIL_HOST);
    assert_eq!(record["rule"], Value::Null);
    let client: SocketAddr = record["client"].as_str().unwrap().parse().unwrap();
    assert_eq!(client.ip(), port.ip());
    let m = &record["message"];
    assert_eq!(m["provider"], "smtp");
    assert_eq!(m["kind"], "email");
    assert_eq!(m["from"], "Shop <no-reply@shop.test>");
    assert_eq!(m["to"], json!(["ana@example.test", "audit@shop.test"]));
    assert_eq!(m["subject"], "Confirm your account");
    // The Bcc recipient is in the envelope only, so the header To is shown.
    assert_eq!(
        m["text"],
        format!(
            "{}\n\nTo: Ana <ana@example.test>\nAttachments: invoice.pdf",
            text.trim_end()
        )
    );
    assert_eq!(m["html"], html);
    assert_eq!(m["links"], json!([VERIFY, UNSUBSCRIBE]));
    assert_eq!(m["code"], "482913");
    let all = sc.admin().records("").await;
    let journal = serde_json::to_string(&all).unwrap();
    assert!(!journal.contains("secret attachment body"));
    assert!(!journal.contains(SECRET));
}

#[tokio::test]
async fn a_client_that_does_not_trust_the_environment_ca_sends_nothing() {
    let ca = TestCa::new();
    let (sc, port) = sidecar("", ca.tls_yaml(16, &[])).await;
    let mail = |subject: &str| {
        lettre::Message::builder()
            .from("app@shop.test".parse().unwrap())
            .to("ana@example.test".parse().unwrap())
            .subject(subject)
            .body(String::from("hello"))
            .unwrap()
    };
    let refused = starttls_mailer(port, &TestCa::new())
        .send(mail("untrusted"))
        .await;
    assert!(refused.is_err(), "{refused:?}");
    // Positive control: trusting the environment CA, the same client gets through.
    starttls_mailer(port, &ca)
        .send(mail("trusted"))
        .await
        .expect("the sidecar accepts the mail");
    let records = messages(&sc.admin(), 1).await;
    assert_eq!(records[0]["message"]["subject"], "trusted");
}

#[tokio::test]
async fn a_plain_mail_with_quoted_printable_and_an_encoded_word_subject_is_decoded() {
    let (sc, port) = sidecar("", String::new()).await;
    let raw = concat!(
        "From: =?UTF-8?Q?Caf=C3=A9_Lun=C3=A9?= <hello@cafe.test>\r\n",
        "To: bo@example.test\r\n",
        "Subject: =?UTF-8?B?Vm90cmUgY29kZSDigJMgY2Fmw6k=?=\r\n",
        "MIME-Version: 1.0\r\n",
        "Content-Type: text/plain; charset=utf-8\r\n",
        "Content-Transfer-Encoding: quoted-printable\r\n",
        "\r\n",
        "Bonjour, votre caf=C3=A9 est pr=C3=AAt. Ce texte est assez long pour =\r\n",
        "=C3=AAtre coup=C3=A9.\r\n",
        ".Une ligne qui commence par un point.\r\n",
    );
    let envelope = lettre::address::Envelope::new(
        Some("bounce@cafe.test".parse().unwrap()),
        vec!["bo@example.test".parse().unwrap()],
    )
    .unwrap();
    let mailer = AsyncSmtpTransport::<Tokio1Executor>::builder_dangerous(port.ip().to_string())
        .port(port.port())
        .tls(Tls::None)
        .build();
    mailer
        .send_raw(&envelope, raw.as_bytes())
        .await
        .expect("the sidecar accepts the mail");

    let [record] = &messages(&sc.admin(), 1).await[..] else {
        unreachable!()
    };
    // No TLS, so no server name: the host is the listener's own.
    assert_eq!(record["host"], "smtp");
    let m = &record["message"];
    assert_eq!(m["from"], "Café Luné <hello@cafe.test>");
    assert_eq!(m["to"], json!(["bo@example.test"]));
    assert_eq!(m["subject"], "Votre code – café");
    assert_eq!(
        m["text"],
        "Bonjour, votre café est prêt. Ce texte est assez long pour être coupé.\n.Une ligne qui commence par un point."
    );
    assert_eq!(m["html"], Value::Null);
}

#[tokio::test]
async fn an_oversize_mail_is_refused_with_552_and_journals_nothing() {
    let (sc, port) = sidecar("    max_message_bytes: 4096\n", String::new()).await;
    let mut stream = TcpStream::connect(port).await.unwrap();
    assert_eq!(read_replies(&mut stream, 220).await, [220]);
    // Over the configured limit, well under the default one.
    let big = format!("{}\r\n", "x".repeat(998)).repeat(5);
    let head = "EHLO app.test\r\nMAIL FROM:<a@shop.test>\r\nRCPT TO:<b@example.test>\r\nDATA\r\n";
    stream.write_all(head.as_bytes()).await.unwrap();
    assert_eq!(read_replies(&mut stream, 354).await, [250, 250, 250, 354]);
    stream.write_all(b"Subject: too big\r\n\r\n").await.unwrap();
    stream.write_all(big.as_bytes()).await.unwrap();
    stream.write_all(b".\r\n").await.unwrap();
    assert_eq!(read_replies(&mut stream, 552).await, [552]);
    // Positive control on the same connection: a small mail is accepted and journaled.
    let small = "MAIL FROM:<a@shop.test>\r\nRCPT TO:<b@example.test>\r\nDATA\r\nSubject: small\r\n\r\nfits\r\n.\r\nQUIT\r\n";
    stream.write_all(small.as_bytes()).await.unwrap();
    assert_eq!(
        read_replies(&mut stream, 221).await,
        [250, 250, 354, 250, 221]
    );
    let records = messages(&sc.admin(), 1).await;
    assert_eq!(records[0]["message"]["subject"], "small");
}

#[tokio::test]
async fn pipelined_commands_are_answered_in_order() {
    let (sc, port) = sidecar("", String::new()).await;
    let mut stream = TcpStream::connect(port).await.unwrap();
    let conversation = concat!(
        "EHLO app.test\r\n",
        "AUTH PLAIN AGFwaWtleQBzZWNyZXQ=\r\n",
        "MAIL FROM:<a@shop.test> BODY=8BITMIME SIZE=120\r\n",
        "RCPT TO:<one@example.test>\r\n",
        "RCPT TO:<@bad>\r\n",
        "RCPT TO:<two@example.test>\r\n",
        "DATA\r\n",
        "From: a@shop.test\r\n",
        "To: one@example.test, two@example.test\r\n",
        "Subject: pipelined\r\n",
        "\r\n",
        "one write\r\n",
        ".\r\n",
        "NOOP\r\n",
        "QUIT\r\n",
    );
    // The whole conversation in one write, the way a PIPELINING client may send it.
    stream.write_all(conversation.as_bytes()).await.unwrap();
    assert_eq!(
        read_replies(&mut stream, 221).await,
        [220, 250, 235, 250, 250, 501, 250, 354, 250, 250, 221]
    );
    let records = messages(&sc.admin(), 1).await;
    let m = &records[0]["message"];
    assert_eq!(m["subject"], "pipelined");
    assert_eq!(m["to"], json!(["one@example.test", "two@example.test"]));
}

#[tokio::test]
async fn a_silent_client_gets_421_and_is_closed() {
    let (_sc, port) = sidecar("", "limits:\n  idle_timeout_ms: 200\n".to_owned()).await;
    let mut stream = TcpStream::connect(port).await.unwrap();
    assert_eq!(read_replies(&mut stream, 421).await, [220, 421]);
    let mut rest = Vec::new();
    let n = tokio::time::timeout(Duration::from_secs(5), stream.read_to_end(&mut rest))
        .await
        .expect("closed in time")
        .unwrap();
    assert_eq!(n, 0);
}
