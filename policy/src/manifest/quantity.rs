//! The notation of `resources` (`cpu: 500m`, `memory: 512Mi`), defined once: validation refuses
//! what these functions cannot read, and runtimes take the values they return (millicores and
//! bytes), so a limit means the same on every runtime.

use serde::Serialize;

use super::model::Resources;
use crate::error::{Report, codes};

/// The largest value a runtime can hold: Docker and Kubernetes both keep quantities as signed
/// 64-bit integers (Docker's CPU limit in nano-cores, hence the smaller CPU bound).
const MAX_BYTES: u128 = i64::MAX as u128;
const MAX_MILLICORES: u128 = (i64::MAX / 1_000_000) as u128;

/// More digits than any real limit has; keeps the arithmetic inside `u128`.
const MAX_DIGITS: usize = 24;

/// A service's limits in the units runtimes take; `None` is no limit.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize)]
pub struct Limits {
    /// CPU, in thousandths of a core.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cpu_millicores: Option<u64>,
    /// Memory, in bytes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub memory_bytes: Option<u64>,
}

impl Limits {
    /// Whether no limit is set.
    pub fn is_unlimited(&self) -> bool {
        *self == Self::default()
    }
}

impl Resources {
    /// The limits of `service` in runtime units; a quantity that is not one is refused as
    /// validation refuses it (a manifest that was read never is).
    pub fn limits(&self, service: &str) -> Result<Limits, Report> {
        Ok(Limits {
            cpu_millicores: self.cpu.as_deref().map(|c| cpu(service, c)).transpose()?,
            memory_bytes: self
                .memory
                .as_deref()
                .map(|m| memory(service, m))
                .transpose()?,
        })
    }
}

/// The CPU limit `text` of `service` in millicores: cores (`1`, `0.5`) or millicores
/// (`500m`), at least `1m` and a whole number of millicores.
pub(crate) fn cpu(service: &str, text: &str) -> Result<u64, Report> {
    let (number, per_unit) = match text.strip_suffix('m') {
        Some(millicores) => (millicores, 1),
        None => (text, 1000),
    };
    exact(number, per_unit, MAX_MILLICORES).ok_or_else(|| {
        Report::new(
            &codes::MAN_WRONG_TYPE,
            format!("The cpu limit {text:?} of service {service} is not a CPU quantity."),
        )
        .with_next("Write cores (1, 0.5) or millicores (500m), at least 1m.")
    })
}

/// The memory limit `text` of `service` in bytes: a number with an optional binary (`Ki` to
/// `Ei`) or decimal (`k`/`K` to `P`) unit, a whole number of bytes, at least one.
pub(crate) fn memory(service: &str, text: &str) -> Result<u64, Report> {
    const UNITS: [(&str, u128); 12] = [
        ("Ki", 1 << 10),
        ("Mi", 1 << 20),
        ("Gi", 1 << 30),
        ("Ti", 1 << 40),
        ("Pi", 1 << 50),
        ("Ei", 1 << 60),
        ("k", 1_000),
        ("K", 1_000),
        ("M", 1_000_000),
        ("G", 1_000_000_000),
        ("T", 1_000_000_000_000),
        ("P", 1_000_000_000_000_000),
    ];
    let (number, per_unit) = UNITS
        .iter()
        .find_map(|(unit, bytes)| Some((text.strip_suffix(unit)?, *bytes)))
        .unwrap_or((text, 1));
    exact(number, per_unit, MAX_BYTES).ok_or_else(|| {
        Report::new(
            &codes::MAN_WRONG_TYPE,
            format!("The memory limit {text:?} of service {service} is not a memory quantity."),
        )
        .with_next("Write bytes with an optional unit: 512Mi, 1Gi, 256M.")
    })
}

/// `number` (digits, optionally a point and more digits) times `per_unit`, when that is a
/// whole number from 1 to `max`.
fn exact(number: &str, per_unit: u128, max: u128) -> Option<u64> {
    let (whole, fraction) = number.split_once('.').unwrap_or((number, ""));
    let digits = |s: &str| s.chars().all(|c| c.is_ascii_digit());
    let shape = !whole.is_empty()
        && digits(whole)
        && digits(fraction)
        && fraction.is_empty() != number.contains('.')
        && whole.len() + fraction.len() <= MAX_DIGITS;
    if !shape {
        return None;
    }
    let scale = 10u128.pow(u32::try_from(fraction.len()).ok()?);
    let mantissa: u128 = format!("{whole}{fraction}").parse().ok()?;
    let scaled = mantissa.checked_mul(per_unit)?;
    let value = scaled / scale;
    if scaled % scale != 0 || !(1..=max).contains(&value) {
        return None;
    }
    u64::try_from(value).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn millicores(text: &str) -> Option<u64> {
        cpu("web", text).ok()
    }

    fn bytes(text: &str) -> Option<u64> {
        memory("web", text).ok()
    }

    #[test]
    fn cpu_is_read_as_millicores() {
        assert_eq!(millicores("1"), Some(1000));
        assert_eq!(millicores("0.5"), Some(500));
        assert_eq!(millicores("500m"), Some(500));
        assert_eq!(millicores("2"), Some(2000));
        assert_eq!(millicores("0.001"), Some(1));
        assert_eq!(millicores("1.25"), Some(1250));
    }

    #[test]
    fn cpu_that_is_not_a_whole_millicore_or_not_a_number_is_refused() {
        for bad in [
            "", "m", "1.", ".5", "1 core", "-1", "0", "0m", "0.0005", "1.5m", "1e3", "+1",
        ] {
            assert_eq!(millicores(bad), None, "{bad}");
        }
        let refused = cpu("web", "lots").expect_err("refused");
        assert_eq!(refused.code.code, "AF-MAN-007");
        assert!(refused.statement.contains("service web"), "{refused}");
    }

    #[test]
    fn memory_is_read_as_bytes_in_binary_and_decimal_units() {
        assert_eq!(bytes("512Mi"), Some(512 << 20));
        assert_eq!(bytes("1Gi"), Some(1 << 30));
        assert_eq!(bytes("256M"), Some(256_000_000));
        assert_eq!(bytes("1073741824"), Some(1 << 30));
        assert_eq!(bytes("1.5G"), Some(1_500_000_000));
        assert_eq!(bytes("1.5Ki"), Some(1536));
        assert_eq!(bytes("64k"), Some(64_000));
        assert_eq!(bytes("64K"), Some(64_000));
        assert_eq!(bytes("7Ei"), Some(7 << 60));
    }

    #[test]
    fn memory_that_is_not_whole_bytes_or_too_large_is_refused() {
        for bad in [
            "",
            "Mi",
            "512MB",
            "lots",
            "0",
            "0Mi",
            "1.5",
            "0.1Ki",
            "8Ei",
            "9999999999999999999",
        ] {
            assert_eq!(bytes(bad), None, "{bad}");
        }
    }

    #[test]
    fn resources_become_limits_and_none_is_unlimited() {
        let both = Resources {
            cpu: Some("250m".to_owned()),
            memory: Some("128Mi".to_owned()),
        };
        assert_eq!(
            both.limits("web"),
            Ok(Limits {
                cpu_millicores: Some(250),
                memory_bytes: Some(128 << 20),
            })
        );
        let none = Resources::default().limits("web").expect("no limits");
        assert!(none.is_unlimited());
        let bad = Resources {
            cpu: None,
            memory: Some("lots".to_owned()),
        };
        assert_eq!(
            bad.limits("web").map_err(|r| r.code.code),
            Err("AF-MAN-007")
        );
    }
}
