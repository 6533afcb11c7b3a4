//! Exponential backoff with full jitter, honouring the service's
//! `Retry-After`.

use std::time::Duration;

use rand::Rng;

/// How retries are spaced.
#[derive(Debug, Clone, Copy)]
pub struct Backoff {
    /// Ceiling of the first delay.
    pub base: Duration,
    /// Largest delay.
    pub max: Duration,
}

impl Backoff {
    /// The ceiling of the delay before retry number `attempt` (0-based):
    /// `base · 2^attempt`, at most `max`.
    pub fn ceiling(&self, attempt: u32) -> Duration {
        self.base
            .saturating_mul(1u32.checked_shl(attempt.min(31)).unwrap_or(u32::MAX))
            .min(self.max)
    }

    /// The delay before retry number `attempt`: the service's `Retry-After`
    /// when it gave one (capped at `max`), else uniform in
    /// `[ceiling/2, ceiling]` so devices that failed together do not retry
    /// together.
    pub fn delay(&self, attempt: u32, retry_after: Option<Duration>) -> Duration {
        if let Some(after) = retry_after {
            return after.min(self.max);
        }
        let ceiling = self.ceiling(attempt).as_millis() as u64;
        if ceiling == 0 {
            return Duration::ZERO;
        }
        Duration::from_millis(rand::rng().random_range(ceiling / 2..=ceiling))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grows_then_caps() {
        let b = Backoff {
            base: Duration::from_secs(1),
            max: Duration::from_secs(60),
        };
        assert_eq!(b.ceiling(0), Duration::from_secs(1));
        assert_eq!(b.ceiling(3), Duration::from_secs(8));
        assert_eq!(b.ceiling(10), Duration::from_secs(60));
        assert_eq!(b.ceiling(100), Duration::from_secs(60));
        for attempt in 0..8 {
            let d = b.delay(attempt, None);
            assert!(
                d <= b.ceiling(attempt) && d >= b.ceiling(attempt) / 2,
                "{d:?}"
            );
        }
    }

    #[test]
    fn retry_after_wins_but_is_capped() {
        let b = Backoff {
            base: Duration::from_secs(1),
            max: Duration::from_secs(60),
        };
        assert_eq!(
            b.delay(0, Some(Duration::from_secs(7))),
            Duration::from_secs(7)
        );
        assert_eq!(
            b.delay(0, Some(Duration::from_secs(7200))),
            Duration::from_secs(60)
        );
    }
}
