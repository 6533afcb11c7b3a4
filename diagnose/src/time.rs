//! Times and time ranges as people write them, for the command lines
//! (`diagnose --since`, `peers --train-since ...`) and the web UI's forms
//! alike: RFC 3339 (`2026-11-23T15:00:00Z`), Unix seconds (`1763700000`),
//! Unix nanoseconds (`1763700000000000000ns`) or a time ago in the
//! workspace's duration rule (`90s`, `30m`, `2h`, `7d`,
//! `agent_core::duration`).

use std::time::Duration;

use anyhow::bail;

use crate::peers::fleet::Range;

/// A TIME as a person wrote it: a point in time, or a time ago, which
/// means a point only once "now" is known (when the request runs, not
/// when it is written).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Time {
    /// ns since the Unix epoch.
    Unix(u64),
    /// This long before now.
    Ago(Duration),
}

/// A TIME that does not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TimeError {
    /// None of the forms.
    #[error(
        "time {0:?} is not RFC 3339 (2026-11-23T15:00:00Z), Unix seconds, Unix \
         nanoseconds (ending in ns) or a time ago (90s, 30m, 2h, 7d)"
    )]
    Unknown(String),
    /// An RFC 3339 time before the epoch.
    #[error("time {0:?} is before 1970")]
    BeforeEpoch(String),
}

impl std::str::FromStr for Time {
    type Err = TimeError;

    fn from_str(text: &str) -> Result<Time, TimeError> {
        let t = text.trim();
        let bad = || TimeError::Unknown(text.to_string());
        if let Ok(ts) = t.parse::<jiff::Timestamp>() {
            return u64::try_from(ts.as_nanosecond())
                .map(Time::Unix)
                .map_err(|_| TimeError::BeforeEpoch(text.to_string()));
        }
        if let Some(ns) = t.strip_suffix("ns") {
            return ns.parse::<u64>().map(Time::Unix).map_err(|_| bad());
        }
        if let Ok(secs) = t.parse::<u64>() {
            return secs
                .checked_mul(1_000_000_000)
                .map(Time::Unix)
                .ok_or_else(bad);
        }
        // A bare number was Unix seconds above; here a unit is required.
        let ago = agent_core::duration::parse(t, agent_core::duration::Bare::Refused)
            .map_err(|_| bad())?;
        // A time ago the ns clock cannot count back to is not a time.
        u64::try_from(ago.as_nanos()).map_err(|_| bad())?;
        Ok(Time::Ago(ago))
    }
}

impl Time {
    /// ns since the Unix epoch, a time ago counted back from `now_unix_ns`
    /// (to the epoch at most).
    pub fn at(self, now_unix_ns: u64) -> u64 {
        match self {
            Time::Unix(ns) => ns,
            Time::Ago(ago) => {
                now_unix_ns.saturating_sub(u64::try_from(ago.as_nanos()).unwrap_or(u64::MAX))
            }
        }
    }
}

/// ns since the Unix epoch now (0 if the clock is before it).
pub fn now_unix_ns() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
}

/// Parses a TIME into ns since the Unix epoch (a time ago counts back from
/// `now_unix_ns`).
pub fn parse_time(text: &str, now_unix_ns: u64) -> anyhow::Result<u64> {
    Ok(text.parse::<Time>()?.at(now_unix_ns))
}

fn range(since: u64, until: u64, what: &str) -> anyhow::Result<Range> {
    if since >= until {
        bail!("the {what} range is empty: it must start before it ends");
    }
    Ok(Range { since, until })
}

/// The training and diagnosis ranges of a peers analysis from their times
/// (see [`parse_time`]; `until` defaults to `now`). Errors name the flag of
/// the time that does not parse, an empty range, or ranges that overlap.
pub fn parse_ranges(
    train_since: &str,
    train_until: &str,
    since: &str,
    until: Option<&str>,
    now: u64,
) -> anyhow::Result<(Range, Range)> {
    use anyhow::Context as _;
    let t = |s: &str, flag: &str| s.parse::<Time>().with_context(|| flag.to_string());
    let times = RangeTimes {
        train_since: t(train_since, "--train-since")?,
        train_until: t(train_until, "--train-until")?,
        since: t(since, "--since")?,
        until: until.map(|u| t(u, "--until")).transpose()?,
    };
    times.ranges(now)
}

/// The four times of a peers analysis, as given.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RangeTimes {
    /// Start of the training range.
    pub train_since: Time,
    /// End (exclusive) of the training range.
    pub train_until: Time,
    /// Start of the diagnosis range.
    pub since: Time,
    /// End (exclusive) of the diagnosis range; `None`: now.
    pub until: Option<Time>,
}

impl RangeTimes {
    /// The training and diagnosis ranges at `now`. Errors: an empty range,
    /// or ranges that overlap.
    pub fn ranges(&self, now: u64) -> anyhow::Result<(Range, Range)> {
        let training = range(
            self.train_since.at(now),
            self.train_until.at(now),
            "training (--train-since .. --train-until)",
        )?;
        let until = self.until.map_or(now, |u| u.at(now));
        let diagnosis = range(self.since.at(now), until, "diagnosis (--since .. --until)")?;
        if training.since < diagnosis.until && diagnosis.since < training.until {
            bail!(
                "the training range overlaps the diagnosis range: training must be a separate, \
                 fault-free stretch of time"
            );
        }
        Ok((training, diagnosis))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_parse() {
        let now = 2_000_000_000_000_000_000;
        assert_eq!(
            parse_time("1763700000", now).unwrap(),
            1_763_700_000_000_000_000
        );
        assert_eq!(parse_time("5ns", now).unwrap(), 5);
        assert_eq!(parse_time("2h", now).unwrap(), now - 7_200_000_000_000);
        assert_eq!(parse_time("1d", now).unwrap(), now - 86_400_000_000_000);
        for bad in ["", "h", "2x", "-5", "99999999999999999999"] {
            assert!(parse_time(bad, now).is_err(), "{bad}");
        }
    }

    #[test]
    fn rfc3339_and_unix_times_parse() {
        let now = 2_000_000_000_000_000_000;
        assert_eq!(
            parse_time("2025-11-21T04:40:00Z", now).unwrap(),
            1_763_700_000_000_000_000
        );
        assert_eq!(
            parse_time("2025-11-21T05:40:00+01:00", now).unwrap(),
            1_763_700_000_000_000_000
        );
        assert_eq!(
            parse_time("1763700000", now).unwrap(),
            1_763_700_000_000_000_000
        );
        for bad in [
            "",
            "yesterday",
            "2025-13-01T00:00:00Z",
            "1969-12-31T23:59:59Z",
        ] {
            assert!(parse_time(bad, now).is_err(), "{bad}");
        }
    }
}
