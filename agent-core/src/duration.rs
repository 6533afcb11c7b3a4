//! The workspace's one way to write a duration on a command line: a number
//! (whole or decimal, no sign) and a unit, `500ms`, `10s`, `1.5m`, `2min`,
//! `12h`, `30d`. Whether a bare number means seconds is the caller's
//! choice ([`Bare`]): a window length of `10` is plainly seconds, while a
//! retention age of `30` could be days and is refused. Each caller keeps
//! its own range (a window of 1 s to 24 h, an age of any length).

use core::fmt;
use core::time::Duration;

/// What a number without a unit means.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Bare {
    /// Seconds.
    Seconds,
    /// Nothing: a unit is required.
    Refused,
}

/// Why a text is not a duration. Its `Display` reads after the text, as in
/// ``format!("`{text}` {error}")``.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DurationError {
    /// No number at the start (or a sign, or a second decimal point).
    NoNumber,
    /// A number alone where a unit is required.
    NoUnit,
    /// A unit other than ms, s, m, min, h or d.
    UnknownUnit,
    /// Longer than a `Duration` holds.
    TooLong,
}

impl fmt::Display for DurationError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            DurationError::NoNumber => {
                "does not start with a number (a whole number or a decimal, e.g. 30d or 1.5s)"
            }
            DurationError::NoUnit => "has no unit: write e.g. 30d, 12h, 90m or 45s",
            DurationError::UnknownUnit => "has an unknown unit: unit must be ms, s, m, h or d",
            DurationError::TooLong => "is too long",
        })
    }
}

/// Reads a duration (surrounding blanks ignored).
pub fn parse(text: &str, bare: Bare) -> Result<Duration, DurationError> {
    let text = text.trim();
    let split = text
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    // `f64::from_str` would also take `inf`, `1e3` or a sign; none can get
    // here (the number is digits and points), and it refuses `1.2.3` and `.`.
    if number.is_empty() || !number.bytes().any(|b| b.is_ascii_digit()) {
        return Err(DurationError::NoNumber);
    }
    let value: f64 = number.parse().map_err(|_| DurationError::NoNumber)?;
    let seconds_per_unit = match unit.trim() {
        "" => match bare {
            Bare::Seconds => 1.0,
            Bare::Refused => return Err(DurationError::NoUnit),
        },
        "ms" => 0.001,
        "s" => 1.0,
        "m" | "min" => 60.0,
        "h" => 3600.0,
        "d" => 86_400.0,
        _ => return Err(DurationError::UnknownUnit),
    };
    Duration::try_from_secs_f64(value * seconds_per_unit).map_err(|_| DurationError::TooLong)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_and_units() {
        let secs = |s: &str| parse(s, Bare::Seconds).map(|d| d.as_secs_f64());
        assert_eq!(secs("10"), Ok(10.0));
        assert_eq!(secs(" 1.5s "), Ok(1.5));
        assert_eq!(secs("500ms"), Ok(0.5));
        assert_eq!(secs("2m"), Ok(120.0));
        assert_eq!(secs("2min"), Ok(120.0));
        assert_eq!(secs("12h"), Ok(43_200.0));
        assert_eq!(secs("30d"), Ok(2_592_000.0));
        assert_eq!(secs("0s"), Ok(0.0));
        assert_eq!(parse("30", Bare::Refused), Err(DurationError::NoUnit));
        assert_eq!(secs("30w"), Err(DurationError::UnknownUnit));
        for bad in ["", "d", "-1d", "+1s", ".", "1.2.3s", "inf", "1e3s"] {
            assert!(secs(bad).is_err(), "{bad}");
        }
        assert_eq!(secs("99999999999999999999d"), Err(DurationError::TooLong));
    }
}
