//! The daily upload window, `HH:MM-HH:MM` in the device's local time,
//! possibly wrapping past midnight (`22:00-06:30`): the one rule for the
//! directive's `window` (which the service stores and sends) and the
//! uploader's `--window` (which the device reads). Hours take one or two
//! digits (`7:00`), minutes two.

use std::fmt;
use std::str::FromStr;

/// A daily window `[start, end)`, minutes since local midnight; never
/// empty (start and end differ).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct DailyWindow {
    start_min: u16,
    end_min: u16,
}

impl DailyWindow {
    /// Minutes since midnight at which the window opens.
    pub fn start_min(&self) -> u16 {
        self.start_min
    }

    /// Minutes since midnight at which it closes (before `start_min` when
    /// it wraps past midnight).
    pub fn end_min(&self) -> u16 {
        self.end_min
    }
}

impl FromStr for DailyWindow {
    type Err = String;

    fn from_str(text: &str) -> Result<DailyWindow, String> {
        let (a, b) = text
            .split_once('-')
            .ok_or_else(|| format!("window `{text}` must be HH:MM-HH:MM"))?;
        let start_min =
            minutes(a).map_err(|why| format!("window `{text}`: bad start `{a}`: {why}"))?;
        let end_min = minutes(b).map_err(|why| format!("window `{text}`: bad end `{b}`: {why}"))?;
        if start_min == end_min {
            return Err(format!("window `{text}` is empty (start equals end)"));
        }
        Ok(DailyWindow { start_min, end_min })
    }
}

/// `HH:MM` (or `H:MM`) as minutes since midnight.
fn minutes(text: &str) -> Result<u16, &'static str> {
    let (h, m) = text.trim().split_once(':').ok_or("expected HH:MM")?;
    if h.is_empty() || h.len() > 2 || m.len() != 2 {
        return Err("expected HH:MM");
    }
    let all_digits = |s: &str| s.bytes().all(|b| b.is_ascii_digit());
    if !all_digits(h) || !all_digits(m) {
        return Err("hours and minutes must be numbers");
    }
    let (h, m): (u16, u16) = (
        h.parse().map_err(|_| "expected HH:MM")?,
        m.parse().map_err(|_| "expected HH:MM")?,
    );
    if h > 23 || m > 59 {
        return Err("time out of range");
    }
    Ok(h * 60 + m)
}

impl fmt::Display for DailyWindow {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{:02}:{:02}-{:02}:{:02}",
            self.start_min / 60,
            self.start_min % 60,
            self.end_min / 60,
            self.end_min % 60
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_rule_for_every_reader() {
        let w: DailyWindow = "22:00-06:30".parse().unwrap();
        assert_eq!((w.start_min(), w.end_min()), (1320, 390));
        assert_eq!(
            "7:05-9:00".parse::<DailyWindow>().unwrap().to_string(),
            "07:05-09:00"
        );
        for (bad, why) in [
            ("", "must be HH:MM-HH:MM"),
            ("01:00", "must be HH:MM-HH:MM"),
            ("0100-0200", "bad start `0100`: expected HH:MM"),
            ("24:00-01:00", "bad start `24:00`: time out of range"),
            ("01:00-01:60", "bad end `01:60`: time out of range"),
            ("01:0-02:00", "expected HH:MM"),
            ("a:bc-01:00", "must be numbers"),
            ("+1:00-02:00", "must be numbers"),
            ("01:00-01:00", "is empty"),
        ] {
            let err = bad.parse::<DailyWindow>().unwrap_err();
            assert!(err.contains(why), "{bad}: {err}");
        }
    }
}
