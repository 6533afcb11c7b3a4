//! Failed logins, counted per client address and per operator name: after
//! `max_failures` failures in a row a key is locked out, and each further
//! failure after a lock-out doubles the next one (up to [`MAX_LOCKOUT`]).
//! While locked, every attempt is refused before the password is even
//! checked, so guessing gets nowhere even with the right password.
//!
//! Kept in memory, per instance: several instances behind one address each
//! count their own (an attacker spread over them gets that many times the
//! budget). The table is bounded: idle entries are dropped first.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// The longest lock-out.
pub const MAX_LOCKOUT: Duration = Duration::from_secs(15 * 60);
/// A key whose last failure is this old starts again from zero.
pub const FORGET_AFTER: Duration = Duration::from_secs(60 * 60);
/// Keys remembered at most (each kind); beyond, idle ones are dropped.
pub const MAX_KEYS: usize = 10_000;

/// The limits (`serve --login-max-failures`, `--login-lockout-ms`).
#[derive(Clone, Copy, Debug)]
pub struct LoginLimits {
    /// Failures before the first lock-out.
    pub max_failures: u32,
    /// The first lock-out's length; each next one doubles.
    pub lockout: Duration,
}

impl Default for LoginLimits {
    fn default() -> LoginLimits {
        LoginLimits {
            max_failures: 5,
            lockout: Duration::from_secs(30),
        }
    }
}

#[derive(Clone, Copy, Debug)]
struct Entry {
    failures: u32,
    last_failure: Instant,
    locked_until: Option<Instant>,
}

/// The failures of every key of one kind.
#[derive(Debug, Default)]
struct Table {
    entries: HashMap<String, Entry>,
}

impl Table {
    fn locked_for(&self, key: &str, now: Instant) -> Option<Duration> {
        let until = self.entries.get(key)?.locked_until?;
        (until > now).then(|| until - now)
    }

    fn fail(&mut self, key: &str, limits: &LoginLimits, now: Instant) {
        if self.entries.len() >= MAX_KEYS && !self.entries.contains_key(key) {
            self.evict(now);
        }
        let entry = self.entries.entry(key.to_string()).or_insert(Entry {
            failures: 0,
            last_failure: now,
            locked_until: None,
        });
        if now.duration_since(entry.last_failure) > FORGET_AFTER {
            entry.failures = 0;
        }
        entry.failures = entry.failures.saturating_add(1);
        entry.last_failure = now;
        if entry.failures >= limits.max_failures {
            let doublings = (entry.failures - limits.max_failures).min(20);
            let lockout = limits
                .lockout
                .saturating_mul(1u32 << doublings)
                .min(MAX_LOCKOUT);
            entry.locked_until = Some(now + lockout);
        }
    }

    fn forget(&mut self, key: &str) {
        self.entries.remove(key);
    }

    /// Drops the entries not locked and idle longest (at least a tenth of
    /// the table, so that eviction is rare).
    fn evict(&mut self, now: Instant) {
        self.entries.retain(|_, e| {
            e.locked_until.is_some_and(|u| u > now)
                && now.duration_since(e.last_failure) < FORGET_AFTER
        });
        if self.entries.len() >= MAX_KEYS {
            let mut by_age: Vec<(Instant, String)> = self
                .entries
                .iter()
                .map(|(k, e)| (e.last_failure, k.clone()))
                .collect();
            by_age.sort();
            for (_, key) in by_age.into_iter().take(MAX_KEYS / 10) {
                self.entries.remove(&key);
            }
        }
    }
}

/// Why an attempt is refused before its password is checked.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Locked {
    Address(Duration),
    Name(Duration),
}

impl Locked {
    /// How long until it may be tried again.
    pub fn remaining(self) -> Duration {
        match self {
            Locked::Address(d) | Locked::Name(d) => d,
        }
    }
}

/// Failed logins of one instance.
#[derive(Debug)]
pub struct LoginLimiter {
    limits: LoginLimits,
    tables: Mutex<(Table, Table)>,
}

impl LoginLimiter {
    pub fn new(limits: LoginLimits) -> LoginLimiter {
        LoginLimiter {
            limits,
            tables: Mutex::new((Table::default(), Table::default())),
        }
    }

    /// Whether an attempt from `address` for `name` is refused now.
    pub fn check(&self, address: &str, name: &str, now: Instant) -> Option<Locked> {
        let tables = self.tables.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(d) = tables.0.locked_for(address, now) {
            return Some(Locked::Address(d));
        }
        tables.1.locked_for(name, now).map(Locked::Name)
    }

    /// Counts a failed attempt.
    pub fn failed(&self, address: &str, name: &str, now: Instant) {
        let mut tables = self.tables.lock().unwrap_or_else(|p| p.into_inner());
        tables.0.fail(address, &self.limits, now);
        tables.1.fail(name, &self.limits, now);
    }

    /// A successful login clears the name's failures (the address's stay:
    /// one good account must not buy guesses at others).
    pub fn succeeded(&self, name: &str) {
        let mut tables = self.tables.lock().unwrap_or_else(|p| p.into_inner());
        tables.1.forget(name);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limiter() -> LoginLimiter {
        LoginLimiter::new(LoginLimits {
            max_failures: 3,
            lockout: Duration::from_secs(10),
        })
    }

    #[test]
    fn locks_after_the_failures_and_doubles() {
        let l = limiter();
        let t0 = Instant::now();
        for _ in 0..2 {
            l.failed("10.0.0.1", "ann", t0);
            assert_eq!(l.check("10.0.0.1", "ann", t0), None);
        }
        l.failed("10.0.0.1", "ann", t0);
        assert_eq!(
            l.check("10.0.0.1", "ann", t0),
            Some(Locked::Address(Duration::from_secs(10)))
        );
        // The name is locked from any address, the address for any name.
        assert_eq!(
            l.check("10.0.0.2", "ann", t0),
            Some(Locked::Name(Duration::from_secs(10)))
        );
        assert!(l.check("10.0.0.1", "bob", t0).is_some());
        assert_eq!(l.check("10.0.0.2", "bob", t0), None);
        // After the lock-out: one more failure locks twice as long.
        let t1 = t0 + Duration::from_secs(11);
        assert_eq!(l.check("10.0.0.1", "ann", t1), None);
        l.failed("10.0.0.1", "ann", t1);
        assert_eq!(
            l.check("10.0.0.1", "ann", t1).map(Locked::remaining),
            Some(Duration::from_secs(20))
        );
    }

    #[test]
    fn success_clears_the_name_only() {
        let l = limiter();
        let t0 = Instant::now();
        for _ in 0..2 {
            l.failed("10.0.0.1", "ann", t0);
        }
        l.succeeded("ann");
        l.failed("10.0.0.2", "ann", t0);
        assert_eq!(l.check("10.0.0.2", "ann", t0), None);
        l.failed("10.0.0.1", "bob", t0);
        assert!(matches!(
            l.check("10.0.0.1", "carl", t0),
            Some(Locked::Address(_))
        ));
    }

    #[test]
    fn the_table_stays_bounded() {
        let l = limiter();
        let t0 = Instant::now();
        for i in 0..(MAX_KEYS + 50) {
            l.failed(&format!("a{i}"), &format!("n{i}"), t0);
        }
        let tables = l.tables.lock().unwrap();
        assert!(tables.0.entries.len() <= MAX_KEYS);
        assert!(tables.1.entries.len() <= MAX_KEYS);
    }
}
