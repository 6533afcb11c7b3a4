//! The off-peak window (`HH:MM-HH:MM` in local time, possibly wrapping past
//! midnight, read by `wire::window`) and the random start that spreads a
//! fleet over it.

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use rand::Rng;

const DAY_SECS: u32 = 24 * 3600;

/// A daily window `[start, end)` in local time (`wire::window`'s), with
/// where a moment stands in it and the spread of a fleet's starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Window(wire::window::DailyWindow);

impl From<wire::window::DailyWindow> for Window {
    fn from(w: wire::window::DailyWindow) -> Window {
        Window(w)
    }
}

/// `--window`: the workspace's one `HH:MM-HH:MM` rule (`wire::window`),
/// the same the service holds a directive's window to.
impl FromStr for Window {
    type Err = String;

    fn from_str(text: &str) -> Result<Window, String> {
        text.parse::<wire::window::DailyWindow>().map(Window::from)
    }
}

impl fmt::Display for Window {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

/// Where a moment stands relative to the window.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Position {
    /// Inside; the window closes after this long.
    Open {
        /// Time left.
        remaining: Duration,
    },
    /// Outside; the window opens after this long.
    Closed {
        /// Time until it opens.
        opens_in: Duration,
    },
}

impl Window {
    fn start_min(&self) -> u32 {
        u32::from(self.0.start_min())
    }

    fn end_min(&self) -> u32 {
        u32::from(self.0.end_min())
    }

    /// Length of the window.
    pub fn len(&self) -> Duration {
        Duration::from_secs(u64::from(self.span_secs()))
    }

    /// Always false: an empty window is refused when parsed.
    pub fn is_empty(&self) -> bool {
        false
    }

    fn span_secs(&self) -> u32 {
        ((self.end_min() + 24 * 60 - self.start_min()) % (24 * 60)) * 60
    }

    /// Where `secs_of_day` (local seconds since midnight) stands.
    pub fn position(&self, secs_of_day: u32) -> Position {
        let start = self.start_min() * 60;
        let since_start = (secs_of_day % DAY_SECS + DAY_SECS - start) % DAY_SECS;
        let span = self.span_secs();
        if since_start < span {
            Position::Open {
                remaining: Duration::from_secs(u64::from(span - since_start)),
            }
        } else {
            Position::Closed {
                opens_in: Duration::from_secs(u64::from(DAY_SECS - since_start)),
            }
        }
    }

    /// Where the current local time stands.
    pub fn position_now(&self) -> Position {
        self.position(local_secs_of_day())
    }
}

/// A random delay in `[0, remaining / 2)`: devices started together (cron
/// at the window's opening) spread over the first half of what is left,
/// keeping the second half for retries.
pub fn spread_delay(remaining: Duration) -> Duration {
    let half = remaining.as_millis() / 2;
    if half == 0 {
        return Duration::ZERO;
    }
    let ms = rand::rng().random_range(0..half as u64);
    Duration::from_millis(ms)
}

/// Local time of day, seconds since midnight: the zone from `TZ`, else the
/// system's (`/etc/localtime`; on Android the `persist.sys.timezone`
/// property with the platform's tzdata); UTC if none is known.
pub fn local_secs_of_day() -> u32 {
    let time = jiff::Zoned::now().time();
    // A leap second reads as :59, so the day never has more than DAY_SECS.
    (time.hour() as u32) * 3600 + (time.minute() as u32) * 60 + (time.second() as u32).min(59)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn w(s: &str) -> Window {
        s.parse().unwrap()
    }

    #[test]
    fn parses_and_displays() {
        assert_eq!(w("01:30-05:00").to_string(), "01:30-05:00");
        assert_eq!(w("1:05-2:00").to_string(), "01:05-02:00");
        for bad in [
            "",
            "01:00",
            "24:00-01:00",
            "01:60-02:00",
            "01:00-01:00",
            "a:b-c:d",
            "01:0-02:00",
        ] {
            assert!(bad.parse::<Window>().is_err(), "{bad}");
        }
    }

    #[test]
    fn plain_window() {
        let win = w("01:00-05:00");
        assert_eq!(win.len(), Duration::from_secs(4 * 3600));
        assert_eq!(
            win.position(3600),
            Position::Open {
                remaining: Duration::from_secs(4 * 3600)
            }
        );
        assert_eq!(
            win.position(5 * 3600 - 1),
            Position::Open {
                remaining: Duration::from_secs(1)
            }
        );
        assert_eq!(
            win.position(5 * 3600),
            Position::Closed {
                opens_in: Duration::from_secs(20 * 3600)
            }
        );
        assert_eq!(
            win.position(0),
            Position::Closed {
                opens_in: Duration::from_secs(3600)
            }
        );
    }

    #[test]
    fn window_wrapping_midnight() {
        let win = w("23:00-02:00");
        assert_eq!(win.len(), Duration::from_secs(3 * 3600));
        assert_eq!(
            win.position(23 * 3600 + 1800),
            Position::Open {
                remaining: Duration::from_secs(2 * 3600 + 1800)
            }
        );
        assert_eq!(
            win.position(3600),
            Position::Open {
                remaining: Duration::from_secs(3600)
            }
        );
        assert_eq!(
            win.position(12 * 3600),
            Position::Closed {
                opens_in: Duration::from_secs(11 * 3600)
            }
        );
    }

    #[test]
    fn spread_stays_in_first_half() {
        let remaining = Duration::from_secs(600);
        for _ in 0..200 {
            assert!(spread_delay(remaining) < Duration::from_secs(300));
        }
        assert_eq!(spread_delay(Duration::ZERO), Duration::ZERO);
    }
}
