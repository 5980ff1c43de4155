//! Names that become host names and object names must be DNS labels.

use crate::error::{Report, codes};

/// The longest DNS label.
const MAX_LABEL: usize = 63;

/// AF-MAN-008 when `name` is not a DNS label (1 to 63 of `a-z`, `0-9`, `-`, starting with a
/// letter, not ending with a hyphen); `what` names the thing, e.g. "service name".
pub fn dns_label_problem(name: &str, what: &str) -> Option<Report> {
    let valid = (1..=MAX_LABEL).contains(&name.len())
        && name.starts_with(|c: char| c.is_ascii_lowercase())
        && !name.ends_with('-')
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-');
    (!valid).then(|| {
        Report::new(
            &codes::MAN_BAD_NAME,
            format!("The {what} {name:?} is not a DNS label."),
        )
    })
}

#[cfg(test)]
mod tests {
    use super::dns_label_problem;

    #[test]
    fn labels_are_lower_case_letters_digits_and_inner_hyphens() {
        for good in ["a", "api", "api-2", "a1", &"a".repeat(63)] {
            assert!(dns_label_problem(good, "name").is_none(), "{good}");
        }
        for bad in [
            "",
            "Api",
            "2api",
            "api-",
            "api_2",
            "api.x",
            "-a",
            &"a".repeat(64),
            "é",
        ] {
            assert!(dns_label_problem(bad, "name").is_some(), "{bad}");
        }
    }
}
