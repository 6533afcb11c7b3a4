//! Ingest quotas. Upload tokens ship inside every app, so anyone may
//! upload: each client address (requests) and each device id (summaries)
//! has a token bucket, and an upload over either is refused with 429 and
//! `Retry-After` (counted in the metrics by reason). The defaults are far
//! above a real device's rate (a batch every few minutes, a backlog of a
//! few hundred after days offline) and only stop floods.
//!
//! Kept in memory, per instance. The tables are bounded: a bucket that has
//! refilled completely is the same as a new one and is dropped first.

use std::collections::HashMap;
use std::hash::Hash;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Keys each table keeps at most.
pub const MAX_KEYS: usize = 100_000;

/// One bucket's rate: `burst` at once, refilled at `per_sec`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Rate {
    pub burst: f64,
    pub per_sec: f64,
}

impl Rate {
    /// Whether the quota is off (`--quota-... 0`).
    pub fn unlimited(&self) -> bool {
        self.per_sec <= 0.0 || self.burst <= 0.0
    }
}

/// `serve --quota-address-*`, `--quota-device-*`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct QuotaConfig {
    /// Upload requests per client address.
    pub address: Rate,
    /// Summaries per device id.
    pub device: Rate,
}

impl Default for QuotaConfig {
    fn default() -> QuotaConfig {
        QuotaConfig {
            address: Rate {
                burst: 600.0,
                per_sec: 20.0,
            },
            device: Rate {
                burst: 5000.0,
                per_sec: 50.0,
            },
        }
    }
}

#[derive(Clone, Copy, Debug)]
struct Bucket {
    tokens: f64,
    at: Instant,
}

/// The buckets of one kind of key.
#[derive(Debug)]
pub struct Buckets<K> {
    rate: Rate,
    table: Mutex<HashMap<K, Bucket>>,
}

impl<K: Eq + Hash + Clone> Buckets<K> {
    pub fn new(rate: Rate) -> Buckets<K> {
        Buckets {
            rate,
            table: Mutex::new(HashMap::new()),
        }
    }

    /// Takes `cost` from `key`'s bucket; `Err(wait)` (nothing taken) when
    /// it holds less: how long until it would hold enough.
    pub fn take(&self, key: &K, cost: f64, now: Instant) -> Result<(), Duration> {
        self.take_all(std::slice::from_ref(&(key.clone(), cost)), now)
    }

    /// Takes each `(key, cost)`, all or none.
    pub fn take_all(&self, wants: &[(K, f64)], now: Instant) -> Result<(), Duration> {
        if self.rate.unlimited() || wants.is_empty() {
            return Ok(());
        }
        let mut table = self.table.lock().unwrap_or_else(|p| p.into_inner());
        if table.len() + wants.len() > MAX_KEYS {
            self.evict(&mut table, now);
        }
        let mut wait = Duration::ZERO;
        for (key, cost) in wants {
            let have = table
                .get(key)
                .map_or(self.rate.burst, |b| self.refilled(b, now));
            if have < *cost {
                let secs = (cost - have) / self.rate.per_sec;
                wait = wait.max(Duration::from_secs_f64(secs.min(86_400.0)));
            }
        }
        if !wait.is_zero() {
            return Err(wait);
        }
        for (key, cost) in wants {
            let have = table
                .get(key)
                .map_or(self.rate.burst, |b| self.refilled(b, now));
            table.insert(
                key.clone(),
                Bucket {
                    tokens: have - cost,
                    at: now,
                },
            );
        }
        Ok(())
    }

    fn refilled(&self, b: &Bucket, now: Instant) -> f64 {
        let elapsed = now.saturating_duration_since(b.at).as_secs_f64();
        (b.tokens + elapsed * self.rate.per_sec).min(self.rate.burst)
    }

    /// Drops the full buckets (no different from new ones); if that is
    /// not enough, the least recently used tenth.
    fn evict(&self, table: &mut HashMap<K, Bucket>, now: Instant) {
        table.retain(|_, b| self.refilled(b, now) < self.rate.burst);
        if table.len() + MAX_KEYS / 10 > MAX_KEYS {
            let mut by_age: Vec<(Instant, K)> =
                table.iter().map(|(k, b)| (b.at, k.clone())).collect();
            by_age.sort_by_key(|(at, _)| *at);
            for (_, key) in by_age.into_iter().take(MAX_KEYS / 10) {
                table.remove(&key);
            }
        }
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.table.lock().unwrap().len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const RATE: Rate = Rate {
        burst: 3.0,
        per_sec: 1.0,
    };

    #[test]
    fn a_bucket_refuses_past_its_burst_and_refills() {
        let b = Buckets::new(RATE);
        let t0 = Instant::now();
        for _ in 0..3 {
            assert_eq!(b.take(&"a", 1.0, t0), Ok(()));
        }
        assert_eq!(b.take(&"a", 1.0, t0), Err(Duration::from_secs(1)));
        assert_eq!(b.take(&"b", 1.0, t0), Ok(()), "another key's own bucket");
        assert_eq!(b.take(&"a", 1.0, t0 + Duration::from_secs(1)), Ok(()));
        assert_eq!(b.take(&"c", 5.0, t0), Err(Duration::from_secs(2)));
    }

    #[test]
    fn several_keys_are_taken_all_or_none() {
        let b = Buckets::new(RATE);
        let t0 = Instant::now();
        assert_eq!(b.take(&"a", 3.0, t0), Ok(()));
        assert!(b.take_all(&[("b", 1.0), ("a", 1.0)], t0).is_err());
        // b was not charged.
        assert_eq!(b.take(&"b", 3.0, t0), Ok(()));
    }

    #[test]
    fn unlimited_takes_nothing() {
        let b = Buckets::new(Rate {
            burst: 0.0,
            per_sec: 0.0,
        });
        for _ in 0..10 {
            assert_eq!(b.take(&"a", 100.0, Instant::now()), Ok(()));
        }
        assert_eq!(b.len(), 0);
    }

    #[test]
    fn the_table_stays_bounded() {
        let b = Buckets::new(RATE);
        let t0 = Instant::now();
        for i in 0..(MAX_KEYS + 100) {
            assert_eq!(b.take(&i, 1.0, t0), Ok(()));
        }
        assert!(b.len() <= MAX_KEYS);
        // Refilled buckets go first: once all refilled, one eviction
        // empties the table.
        let later = t0 + Duration::from_secs(10);
        for i in 0..(MAX_KEYS / 5) {
            assert_eq!(b.take(&(usize::MAX - i), 1.0, later), Ok(()));
        }
        assert!(b.len() <= MAX_KEYS / 5 + 1, "{}", b.len());
    }
}
