//! The sidecar configuration: any text is a configuration or a refusal. JSON is YAML (when it
//! holds only YAML's printable characters), so a document that reads as JSON reads the same as
//! YAML; an accepted file's egress catalogue round-trips through the orchestrator's
//! serialisation; checking is deterministic, and a checked file's DNS configuration is one
//! af-dns accepts.
#![no_main]

use af_policy::egress::EgressSpec;
use af_proxy::config;
use libfuzzer_sys::fuzz_target;

/// YAML 1.2's printable characters (`c-printable`), the only ones a YAML document may hold.
fn yaml_printable(c: char) -> bool {
    matches!(c, '\t' | '\n' | '\r' | ' '..='~' | '\u{85}' | '\u{A0}'..='\u{D7FF}'
        | '\u{E000}'..='\u{FFFD}' | '\u{10000}'..)
}

fuzz_target!(|bytes: &[u8]| {
    let Ok(text) = std::str::from_utf8(bytes) else {
        return;
    };
    let yaml = config::parse(text, false);
    // JSON allows any character but a control one in a string; YAML only its printable set.
    if let Ok(json) = config::parse(text, true)
        && text.chars().all(yaml_printable)
    {
        let yaml = yaml.as_ref().expect("a JSON configuration reads as YAML");
        assert_eq!(
            format!("{json:?}"),
            format!("{yaml:?}"),
            "JSON and YAML readings differ"
        );
    }
    let Ok(doc) = yaml else {
        return;
    };
    let written = serde_json::to_string(&doc.egress).expect("egress serialises");
    let read: EgressSpec = serde_json::from_str(&written).expect("egress reads back");
    assert_eq!(read, doc.egress, "egress round-trips");
    let again = config::check(doc.clone())
        .map(|_| ())
        .map_err(|e| e.to_string());
    match config::check(doc) {
        Ok(settings) => {
            assert!(again.is_ok(), "checking is deterministic");
            if let Some(dns) = &settings.dns {
                assert!(
                    dns.validate().is_ok(),
                    "a checked DNS configuration validates"
                );
            }
        }
        Err(report) => assert_eq!(again, Err(report.to_string()), "checking is deterministic"),
    }
});
