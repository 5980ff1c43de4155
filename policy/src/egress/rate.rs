//! Rate limits as written in a rule: `10/s`, `600/m`, `5000/h`.

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use thiserror::Error;

/// A token-bucket rate: `count` requests per `period`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RateLimit {
    /// Requests allowed per period (also the bucket's burst).
    pub count: u32,
    /// The period the count refills over.
    pub period: Duration,
}

/// Why a rate limit could not be read.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("{0:?} is not a rate such as 10/s, 600/m or 5000/h")]
pub struct RateLimitError(String);

impl FromStr for RateLimit {
    type Err = RateLimitError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let invalid = || RateLimitError(text.to_owned());
        let (count, unit) = text.trim().split_once('/').ok_or_else(invalid)?;
        let count: u32 = count.trim().parse().map_err(|_| invalid())?;
        let period = match unit.trim() {
            "s" => Duration::from_secs(1),
            "m" => Duration::from_secs(60),
            "h" => Duration::from_secs(3600),
            _ => return Err(invalid()),
        };
        if count == 0 {
            return Err(invalid());
        }
        Ok(RateLimit { count, period })
    }
}

impl fmt::Display for RateLimit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let unit = match self.period.as_secs() {
            1 => "s",
            60 => "m",
            _ => "h",
        };
        write!(f, "{}/{unit}", self.count)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates_parse_and_print() {
        for text in ["10/s", "600/m", "5000/h"] {
            assert_eq!(text.parse::<RateLimit>().unwrap().to_string(), text);
        }
    }

    #[test]
    fn bad_rates_are_refused() {
        for text in ["", "10", "0/s", "ten/s", "10/d", "-1/s"] {
            assert!(text.parse::<RateLimit>().is_err(), "{text}");
        }
    }
}
