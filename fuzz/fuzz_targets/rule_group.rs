//! Reading any bytes as a DNS Firewall rule group (`af ecs check-rule-group`) returns a group or
//! a coded refusal and never panics; a group read is judged only with the rule-group codes, and
//! written back out it reads as the same group. Run with `cargo +nightly fuzz run rule_group`.
#![no_main]

use af_policy::placement::ecs::rule_group::{self, RuleGroup};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|bytes: &[u8]| {
    let Ok(text) = std::str::from_utf8(bytes) else {
        return;
    };
    match RuleGroup::from_json(text) {
        Ok(group) => {
            for refusal in rule_group::check(&group) {
                assert!(
                    ["AF-SCH-014", "AF-SCH-015", "AF-SCH-016", "AF-SCH-017", "AF-SCH-018"]
                        .contains(&refusal.code.code),
                    "{}",
                    refusal.code.code
                );
            }
            let written = serde_json::to_string(&group).expect("a group read writes");
            assert_eq!(RuleGroup::from_json(&written).ok(), Some(group));
        }
        Err(report) => assert_eq!(report.code.code, "AF-SCH-013"),
    }
});
