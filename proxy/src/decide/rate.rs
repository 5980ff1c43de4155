//! Egress rules' `rate_limit`: one limiter per rule that has one, shared by every client of
//! the environment (the provider's quota is per account, not per caller). GCRA from
//! `governor`: the rule's count is the burst, refilled evenly over its period. Bounded: one
//! limiter per rule, made when the sidecar starts.

use std::num::NonZeroU32;
use std::time::Duration;

use af_policy::egress::{Catalogue, RateLimit, RuleId};
use governor::clock::{Clock, DefaultClock};
use governor::{DefaultDirectRateLimiter, Quota, RateLimiter};

/// The limiters of a catalogue's rules, by rule index.
pub(crate) struct RuleRates {
    limiters: Vec<Option<DefaultDirectRateLimiter>>,
    clock: DefaultClock,
}

impl RuleRates {
    /// A limiter for every rule of `catalogue` with a `rate_limit`.
    pub(crate) fn new(catalogue: &Catalogue) -> Self {
        let limiters = (0..catalogue.len())
            .map(|i| {
                let id = RuleId(u32::try_from(i).unwrap_or(u32::MAX));
                catalogue
                    .rate_limit(id)
                    .and_then(quota)
                    .map(RateLimiter::direct)
            })
            .collect();
        Self {
            limiters,
            clock: DefaultClock::default(),
        }
    }

    /// Take one request's place under `rule`'s limit: `Err` with how long until the next
    /// place frees when the limit is reached. A rule without a limit always admits.
    pub(crate) fn admit(&self, rule: Option<RuleId>) -> Result<(), Duration> {
        let Some(limiter) = rule.and_then(|id| self.limiters.get(id.index())?.as_ref()) else {
            return Ok(());
        };
        limiter
            .check()
            .map_err(|not_until| not_until.wait_time_from(self.clock.now()))
    }
}

/// `per_second` a second with ten times as many at once, the shape of the journal's budgets
/// (as af-dns budgets its sightings).
pub(crate) fn per_second_with_burst(per_second: NonZeroU32) -> DefaultDirectRateLimiter {
    let burst = per_second.saturating_mul(NonZeroU32::new(10).unwrap_or(NonZeroU32::MIN));
    RateLimiter::direct(Quota::per_second(per_second).allow_burst(burst))
}

/// `count` per `period`, all of it available at once (a place frees at least every
/// nanosecond: a count above 10^9 a second is as good as unlimited, not turned off).
fn quota(rate: RateLimit) -> Option<Quota> {
    let burst = NonZeroU32::new(rate.count)?;
    let every = (rate.period / rate.count).max(Duration::from_nanos(1));
    Some(Quota::with_period(every)?.allow_burst(burst))
}

#[cfg(test)]
mod tests {
    use af_policy::egress::{EgressSpec, RuleSpec};

    use super::*;

    fn catalogue(rate: &str) -> Catalogue {
        let rules = serde_json::json!([
            {"host": "limited.test", "mode": "allow", "rate_limit": rate},
            {"host": "free.test", "mode": "allow"},
        ]);
        Catalogue::compile(&EgressSpec {
            default: None,
            allow_ipv6: false,
            upstream_roots: Vec::new(),
            rules: serde_json::from_value::<Vec<RuleSpec>>(rules).expect("rules"),
        })
        .expect("compiles")
    }

    #[test]
    fn a_rule_admits_its_burst_then_says_how_long_to_wait() {
        let rates = RuleRates::new(&catalogue("3/h"));
        let limited = Some(RuleId(0));
        for _ in 0..3 {
            assert_eq!(rates.admit(limited), Ok(()));
        }
        let wait = rates.admit(limited).expect_err("the fourth waits");
        // One place frees every 20 minutes.
        assert!(wait > Duration::from_secs(19 * 60), "{wait:?}");
        assert!(wait <= Duration::from_secs(20 * 60), "{wait:?}");
    }

    #[test]
    fn a_count_past_a_billion_a_second_still_limits() {
        let rates = RuleRates::new(&catalogue("4000000000/s"));
        for _ in 0..1000 {
            assert_eq!(rates.admit(Some(RuleId(0))), Ok(()));
        }
        assert!(rates.limiters[0].is_some(), "the rule has its limiter");
    }

    #[test]
    fn rules_without_a_limit_and_the_default_always_admit() {
        let rates = RuleRates::new(&catalogue("1/h"));
        for _ in 0..100 {
            assert_eq!(rates.admit(Some(RuleId(1))), Ok(()));
            assert_eq!(rates.admit(None), Ok(()));
        }
    }
}
