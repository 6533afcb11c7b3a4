//! Retention: `edge-service prune --older-than AGE [--keep-raw]` and
//! `serve --retain AGE`, which prunes every hour on a thread of its own.
//!
//! Pruning goes in batches of [`BATCH_RUNS`] runs, each its own short
//! transaction, with a pause between them: ingest waits for one batch at
//! most (SQLite: the write lock; PostgreSQL: nothing, the rows differ).
//! A run's age is counted from when the service received it, not from the
//! start its device claims (a device's wrong clock must not keep data
//! forever nor delete it at once).

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::store::{Store, StoreError, StoreOpener};

/// Runs pruned per transaction.
pub const BATCH_RUNS: u32 = 500;
/// Pause between two batches: a writer waiting for the lock gets it.
pub const PAUSE_BETWEEN_BATCHES: Duration = Duration::from_millis(20);
/// How often `serve --retain` prunes.
pub const DEFAULT_EVERY: Duration = Duration::from_secs(3600);

/// What one pass pruned.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Pruned {
    /// Runs deleted (or, with keep_raw, stripped of their rows).
    pub runs: u64,
    /// Devices deleted (none with keep_raw).
    pub devices: u64,
}

/// Prunes everything received more than `older_than` before `now_unix_ns`:
/// the runs with their rows and the devices not seen since; with
/// `keep_raw` only the runs' syscall and peer rows (runs, raw summaries
/// and devices stay).
pub fn prune(
    store: &mut dyn Store,
    older_than: Duration,
    keep_raw: bool,
    now_unix_ns: u64,
) -> Result<Pruned, StoreError> {
    let before =
        now_unix_ns.saturating_sub(u64::try_from(older_than.as_nanos()).unwrap_or(u64::MAX));
    let mut pruned = Pruned::default();
    loop {
        let n = store.prune_batch(before, keep_raw, BATCH_RUNS)?;
        pruned.runs += n;
        if n < u64::from(BATCH_RUNS) {
            break;
        }
        std::thread::sleep(PAUSE_BETWEEN_BATCHES);
    }
    if !keep_raw {
        pruned.devices = store.prune_devices(before)?;
    }
    Ok(pruned)
}

/// Now, ns since the Unix epoch.
pub fn now_unix_ns() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
}

/// Reads an age: a number and a unit, `30d`, `12h`, `90m`, `45s` (the
/// workspace's duration rule, `agent_core::duration`); a bare number is
/// refused, as `30` could mean days or seconds.
pub fn parse_age(text: &str) -> Result<Duration, String> {
    agent_core::duration::parse(text, agent_core::duration::Bare::Refused)
        .map_err(|e| format!("`{}` {e}", text.trim()))
}

/// Starts the thread of `serve --retain`: every `every`, a pass on a
/// connection of its own; a failed pass is reported and tried again at the
/// next.
pub fn start(
    open_store: StoreOpener,
    retain: Duration,
    keep_raw: bool,
    every: Duration,
) -> std::io::Result<()> {
    std::thread::Builder::new()
        .name("store-retention".into())
        .spawn(move || loop {
            std::thread::sleep(every);
            let pass = open_store()
                .and_then(|mut store| prune(store.as_mut(), retain, keep_raw, now_unix_ns()));
            match pass {
                Ok(p) if p.runs + p.devices > 0 => eprintln!(
                    "edge-service: retention: pruned {} run(s){}, {} device(s)",
                    p.runs,
                    if keep_raw { " (raw kept)" } else { "" },
                    p.devices
                ),
                Ok(_) => {}
                Err(e) => eprintln!("edge-service: retention: {e}"),
            }
        })?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ages_have_a_unit() {
        assert_eq!(parse_age("30d"), Ok(Duration::from_secs(30 * 86_400)));
        assert_eq!(parse_age("12h"), Ok(Duration::from_secs(12 * 3600)));
        assert_eq!(parse_age("90m"), Ok(Duration::from_secs(5400)));
        assert_eq!(parse_age("0s"), Ok(Duration::ZERO));
        assert!(parse_age("30").unwrap_err().contains("no unit"));
        assert!(parse_age("30w").unwrap_err().contains("unit must be"));
        assert!(parse_age("d").unwrap_err().contains("whole number"));
        assert!(parse_age("99999999999999999999d").is_err());
        assert!(parse_age("-1d").is_err());
    }
}
