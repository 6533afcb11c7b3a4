//! Times and time ranges as people write them, for the command lines
//! (`diagnose --since`, `peers --train-since ...`) and the web UI's forms
//! alike: RFC 3339 (`2026-11-23T15:00:00Z`), Unix seconds (`1763700000`),
//! Unix nanoseconds (`1763700000000000000ns`) or a time ago in the
//! workspace's duration rule (`90s`, `30m`, `2h`, `7d`,
//! `agent_core::duration`).

use anyhow::{bail, Context};

use crate::peers::fleet::Range;

/// Parses a TIME into ns since the Unix epoch (a time ago counts back from
/// `now_unix_ns`).
pub fn parse_time(text: &str, now_unix_ns: u64) -> anyhow::Result<u64> {
    let t = text.trim();
    let bad = || {
        anyhow::anyhow!(
            "time {text:?} is not RFC 3339 (2026-11-23T15:00:00Z), Unix seconds, Unix \
             nanoseconds (ending in ns) or a time ago (90s, 30m, 2h, 7d)"
        )
    };
    if let Ok(ts) = t.parse::<jiff::Timestamp>() {
        return u64::try_from(ts.as_nanosecond())
            .map_err(|_| anyhow::anyhow!("time {text:?} is before 1970"));
    }
    if let Some(ns) = t.strip_suffix("ns") {
        return ns.parse::<u64>().map_err(|_| bad());
    }
    if let Ok(secs) = t.parse::<u64>() {
        return secs.checked_mul(1_000_000_000).ok_or_else(bad);
    }
    // A bare number was Unix seconds above; here a unit is required.
    let ago =
        agent_core::duration::parse(t, agent_core::duration::Bare::Refused).map_err(|_| bad())?;
    let ago = u64::try_from(ago.as_nanos()).map_err(|_| bad())?;
    Ok(now_unix_ns.saturating_sub(ago))
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
    let t = |s: &str, flag: &str| parse_time(s, now).with_context(|| flag.to_string());
    let training = range(
        t(train_since, "--train-since")?,
        t(train_until, "--train-until")?,
        "training (--train-since .. --train-until)",
    )?;
    let until = match until {
        Some(u) => t(u, "--until")?,
        None => now,
    };
    let diagnosis = range(
        t(since, "--since")?,
        until,
        "diagnosis (--since .. --until)",
    )?;
    if training.since < diagnosis.until && diagnosis.since < training.until {
        bail!(
            "the training range overlaps the diagnosis range: training must be a separate, \
             fault-free stretch of time"
        );
    }
    Ok((training, diagnosis))
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
