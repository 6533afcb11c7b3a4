//! Per-device directives as `watch` applies them: "trace the next N runs of
//! program P whose command line holds TEXT, fully, until T". Each new run
//! `watch` notices asks [`DirectedRuns::claim`]; a directive that still has
//! runs to give and has not expired takes it, and the run is traced fully
//! with the fact `directive=<id>` instead of getting a light record.
//!
//! The count is the agent's own, kept per directive id across fetches: the
//! service lists a directive until it has received its runs, so a fetch
//! that comes before the uploads must not give it more.

use std::collections::HashMap;

/// One per-device directive (`device_directives` of `GET /v1/directives`),
/// as `wire` reads it.
pub use wire::directive::DeviceDirective;

/// The directives known and the runs each has taken.
#[derive(Debug, Default)]
pub struct DirectedRuns {
    directives: Vec<DeviceDirective>,
    /// Runs traced per directive id, kept when the service stops listing
    /// it (it may come back in a fetch made before the uploads reached it).
    taken: HashMap<String, u32>,
}

impl DirectedRuns {
    /// Replaces the directives with a fetch's; true when they changed.
    pub fn set(&mut self, directives: Vec<DeviceDirective>) -> bool {
        let changed = directives != self.directives;
        self.directives = directives;
        changed
    }

    /// The directives, one line for a log.
    pub fn describe(&self) -> String {
        if self.directives.is_empty() {
            return "none".into();
        }
        let items: Vec<String> = self
            .directives
            .iter()
            .map(|d| {
                format!(
                    "{} ({} of {} runs taken; program {:?}, match {:?}, until {} s)",
                    d.id,
                    self.taken(&d.id),
                    d.runs,
                    d.program.as_deref().unwrap_or("any"),
                    d.match_text.as_deref().unwrap_or("any"),
                    d.expires_unix_ns / 1_000_000_000
                )
            })
            .collect();
        items.join(", ")
    }

    /// Whether any directive may still take a run at `now_unix_ns`.
    #[cfg(test)]
    pub fn any_open(&self, now_unix_ns: u64) -> bool {
        self.directives.iter().any(|d| self.open(d, now_unix_ns))
    }

    fn open(&self, d: &DeviceDirective, now_unix_ns: u64) -> bool {
        now_unix_ns < d.expires_unix_ns && self.taken.get(&d.id).copied().unwrap_or(0) < d.runs
    }

    /// The id of the first directive that takes a new run of `program` with
    /// command line `cmdline` at `now_unix_ns`, counted as taken; `None`:
    /// the run stays light.
    pub fn claim(&mut self, program: &str, cmdline: &[u8], now_unix_ns: u64) -> Option<String> {
        let id = self.first_taker(program, cmdline, now_unix_ns)?.id.clone();
        *self.taken.entry(id.clone()).or_insert(0) += 1;
        Some(id)
    }

    /// Whether [`DirectedRuns::claim`] would take this run (nothing is
    /// counted).
    pub fn would_claim(&self, program: &str, cmdline: &[u8], now_unix_ns: u64) -> bool {
        self.first_taker(program, cmdline, now_unix_ns).is_some()
    }

    fn first_taker(
        &self,
        program: &str,
        cmdline: &[u8],
        now_unix_ns: u64,
    ) -> Option<&DeviceDirective> {
        self.directives.iter().find(|d| {
            self.open(d, now_unix_ns)
                && d.program.as_deref().is_none_or(|p| p == program)
                && d.match_text
                    .as_deref()
                    .is_none_or(|m| contains(cmdline, m.as_bytes()))
        })
    }

    /// Gives a claimed run back (its process could not be traced).
    pub fn unclaim(&mut self, id: &str) {
        if let Some(n) = self.taken.get_mut(id) {
            *n = n.saturating_sub(1);
        }
    }

    /// Runs traced for directive `id` so far.
    pub fn taken(&self, id: &str) -> u32 {
        self.taken.get(id).copied().unwrap_or(0)
    }
}

/// Whether `haystack` contains `needle`.
fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    needle.is_empty() || haystack.windows(needle.len()).any(|w| w == needle)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn directive(id: &str, program: Option<&str>, m: Option<&str>, runs: u32) -> DeviceDirective {
        DeviceDirective {
            id: id.into(),
            program: program.map(Into::into),
            match_text: m.map(Into::into),
            runs,
            expires_unix_ns: 1_000,
        }
    }

    #[test]
    fn runs_are_counted_per_id_across_fetches_and_expiry_ends_them() {
        let mut d = DirectedRuns::default();
        d.set(vec![directive("a1", Some("wget"), Some("host"), 2)]);
        assert_eq!(d.claim("curl", b"curl host", 10), None, "other program");
        assert_eq!(d.claim("wget", b"wget other", 10), None, "no match");
        assert_eq!(
            d.claim("wget", b"wget http://host/x", 10).as_deref(),
            Some("a1")
        );
        // Listed again by a later fetch: the count stays.
        d.set(vec![directive("a1", Some("wget"), Some("host"), 2)]);
        assert_eq!(d.claim("wget", b"wget host", 10).as_deref(), Some("a1"));
        assert_eq!(d.claim("wget", b"wget host", 10), None, "2 runs given");
        assert_eq!(d.taken("a1"), 2);
        d.unclaim("a1");
        assert!(d.any_open(10));
        assert_eq!(d.claim("wget", b"wget host", 1_000), None, "expired");
        assert!(!d.any_open(1_000));
        // Neither program nor match: any run.
        d.set(vec![directive("b", None, None, 1)]);
        assert_eq!(d.claim("x", b"", 5).as_deref(), Some("b"));
    }
}
