//! Retry policy: exponential backoff with jitter, capped; and the run-wide
//! retry budget that keeps a systemic failure from becoming a retry storm.

use std::time::Duration;

use crate::manifest::{BackoffSpec, Jitter};

/// Delays between attempts: `initial * multiplier^n`, capped at `max`, then
/// jittered. The RNG is passed in so tests can check the bounds.
pub struct Backoff {
    spec: BackoffSpec,
    rng: fastrand::Rng,
    step: i32,
}

impl Backoff {
    /// A fresh sequence.
    pub fn new(spec: BackoffSpec, rng: fastrand::Rng) -> Backoff {
        Backoff { spec, rng, step: 0 }
    }

    /// The un-jittered delay before retry number `step` (0-based).
    pub fn ceiling(spec: &BackoffSpec, step: i32) -> Duration {
        let factor = spec.multiplier.powi(step);
        let secs = spec.initial.as_secs_f64() * factor;
        if !secs.is_finite() || secs >= spec.max.as_secs_f64() {
            spec.max
        } else {
            Duration::from_secs_f64(secs)
        }
    }
}

impl Iterator for Backoff {
    type Item = Duration;

    fn next(&mut self) -> Option<Duration> {
        let ceiling = Backoff::ceiling(&self.spec, self.step);
        self.step = self.step.saturating_add(1);
        let ms = u64::try_from(ceiling.as_millis()).unwrap_or(u64::MAX);
        let jittered = match self.spec.jitter {
            Jitter::None => ms,
            Jitter::Full => self.rng.u64(0..=ms),
            Jitter::Equal => ms / 2 + self.rng.u64(0..=ms - ms / 2),
        };
        Some(Duration::from_millis(jittered))
    }
}

/// Retries allowed in one run: a floor plus a fraction of first attempts, so
/// that when everything fails at once (an upstream outage) the run stops
/// retrying and holds the rest for an operator instead of hammering.
#[derive(Debug, Clone)]
pub struct RetryBudget {
    floor: u32,
    ratio: f64,
    first_attempts: u32,
    retries: u32,
}

impl RetryBudget {
    /// Retries at most `floor + ratio * first_attempts`.
    pub fn new(floor: u32, ratio: f64) -> RetryBudget {
        RetryBudget {
            floor,
            ratio,
            first_attempts: 0,
            retries: 0,
        }
    }

    /// Counts a first attempt.
    pub fn record_first_attempt(&mut self) {
        self.first_attempts += 1;
    }

    /// Takes one retry from the budget, or says it is spent.
    pub fn try_take(&mut self) -> bool {
        let allowed = self.floor as f64 + self.ratio * self.first_attempts as f64;
        if (self.retries as f64) < allowed.floor() {
            self.retries += 1;
            true
        } else {
            false
        }
    }

    /// Retries taken so far.
    pub fn used(&self) -> u32 {
        self.retries
    }
}

impl Default for RetryBudget {
    /// 10 retries plus 20% of first attempts.
    fn default() -> Self {
        RetryBudget::new(10, 0.2)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn spec(jitter: Jitter) -> BackoffSpec {
        BackoffSpec {
            initial: Duration::from_millis(10),
            max: Duration::from_millis(200),
            multiplier: 2.0,
            jitter,
        }
    }

    #[test]
    fn delays_grow_then_stay_at_the_cap() {
        let delays: Vec<u128> = Backoff::new(spec(Jitter::None), fastrand::Rng::with_seed(1))
            .take(7)
            .map(|d| d.as_millis())
            .collect();
        assert_eq!(delays, [10, 20, 40, 80, 160, 200, 200]);
    }

    #[test]
    fn budget_is_a_floor_plus_a_fraction() {
        let mut b = RetryBudget::new(2, 0.5);
        for _ in 0..4 {
            b.record_first_attempt();
        }
        assert!((0..4).all(|_| b.try_take()));
        assert!(!b.try_take(), "2 + 0.5 * 4 = 4 retries");
        assert_eq!(b.used(), 4);
    }

    proptest! {
        #[test]
        fn jittered_delays_stay_within_bounds(seed: u64, equal: bool) {
            let jitter = if equal { Jitter::Equal } else { Jitter::Full };
            let s = spec(jitter);
            for (step, d) in Backoff::new(s, fastrand::Rng::with_seed(seed)).take(12).enumerate() {
                let ceiling = Backoff::ceiling(&s, step as i32);
                prop_assert!(d <= ceiling && d <= s.max);
                if equal {
                    prop_assert!(d.as_millis() >= ceiling.as_millis() / 2);
                }
            }
        }
    }
}
