//! The streaming accumulator kept per (syscall, fd kind).

use crate::histogram::Histogram;

/// Statistics of one key, updated in O(1) per event.
///
/// All sums saturate instead of wrapping, so a pathological run yields
/// capped figures, never nonsense.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KeyStats {
    /// Calls.
    pub count: u64,
    /// Calls that failed (`-4095..=-1`).
    pub errors: u64,
    /// Sum of call durations, ns.
    pub total_ns: u64,
    /// Sum of squared call durations, ns² (for the variance).
    pub sum_sq_ns: u128,
    /// Shortest call, ns.
    pub min_ns: u64,
    /// Longest call, ns.
    pub max_ns: u64,
    /// Latency histogram.
    pub histogram: Histogram,
    /// Calls that came right after the same syscall on the same thread.
    pub consecutive: u64,
    /// Sum of the gaps before those calls (start of the later minus end of
    /// the earlier), ns.
    pub consecutive_gap_ns: u64,
    /// Sum of the results of successful calls.
    pub result_sum: i128,
    /// Sum of the requested sizes (read/write family only).
    pub param_sum: u128,
    /// Whether `param_sum` is meaningful for this key.
    pub has_param: bool,
    /// First failure, ns since the collector's start.
    pub first_failure_ns: u64,
    /// Last failure, ns since the collector's start.
    pub last_failure_ns: u64,
    /// Failures whose errno found no room in the errno table.
    pub errno_untracked: u64,
}

impl KeyStats {
    /// An empty accumulator.
    pub const EMPTY: KeyStats = KeyStats {
        count: 0,
        errors: 0,
        total_ns: 0,
        sum_sq_ns: 0,
        min_ns: u64::MAX,
        max_ns: 0,
        histogram: Histogram {
            counts: [0; crate::histogram::BUCKETS],
        },
        consecutive: 0,
        consecutive_gap_ns: 0,
        result_sum: 0,
        param_sum: 0,
        has_param: false,
        first_failure_ns: 0,
        last_failure_ns: 0,
        errno_untracked: 0,
    };

    /// Counts the timing of one call.
    #[inline]
    pub fn add_call(&mut self, dur_ns: u64) {
        self.count = self.count.saturating_add(1);
        self.total_ns = self.total_ns.saturating_add(dur_ns);
        self.sum_sq_ns = self
            .sum_sq_ns
            .saturating_add((dur_ns as u128) * (dur_ns as u128));
        self.min_ns = self.min_ns.min(dur_ns);
        self.max_ns = self.max_ns.max(dur_ns);
        self.histogram.add(dur_ns);
    }

    /// Counts a call that came right after the same syscall, `gap_ns` later.
    #[inline]
    pub fn add_consecutive(&mut self, gap_ns: u64) {
        self.consecutive = self.consecutive.saturating_add(1);
        self.consecutive_gap_ns = self.consecutive_gap_ns.saturating_add(gap_ns);
    }

    /// Counts a failure at `at_ns` (since the collector's start).
    #[inline]
    pub fn add_failure(&mut self, at_ns: u64) {
        self.first_failure_ns = if self.errors == 0 {
            at_ns
        } else {
            self.first_failure_ns.min(at_ns)
        };
        self.errors = self.errors.saturating_add(1);
        self.last_failure_ns = self.last_failure_ns.max(at_ns);
    }

    /// Counts the result of a successful call.
    #[inline]
    pub fn add_result(&mut self, ret: i64) {
        self.result_sum = self.result_sum.saturating_add(ret as i128);
    }

    /// Counts the requested size of a read/write-family call.
    #[inline]
    pub fn add_param(&mut self, size: u64) {
        self.has_param = true;
        self.param_sum = self.param_sum.saturating_add(size as u128);
    }

    /// Adds the calls `other` counted (of the same key, failure times on
    /// the same origin): the statistics of both sets of calls together,
    /// as if each had been added here.
    pub fn merge(&mut self, other: &KeyStats) {
        if other.count == 0 {
            return;
        }
        self.count = self.count.saturating_add(other.count);
        self.total_ns = self.total_ns.saturating_add(other.total_ns);
        self.sum_sq_ns = self.sum_sq_ns.saturating_add(other.sum_sq_ns);
        self.min_ns = self.min_ns.min(other.min_ns);
        self.max_ns = self.max_ns.max(other.max_ns);
        self.histogram.merge(&other.histogram);
        self.consecutive = self.consecutive.saturating_add(other.consecutive);
        self.consecutive_gap_ns = self
            .consecutive_gap_ns
            .saturating_add(other.consecutive_gap_ns);
        if other.errors > 0 {
            self.first_failure_ns = if self.errors == 0 {
                other.first_failure_ns
            } else {
                self.first_failure_ns.min(other.first_failure_ns)
            };
            self.last_failure_ns = self.last_failure_ns.max(other.last_failure_ns);
        }
        self.errors = self.errors.saturating_add(other.errors);
        self.result_sum = self.result_sum.saturating_add(other.result_sum);
        self.has_param |= other.has_param;
        self.param_sum = self.param_sum.saturating_add(other.param_sum);
        self.errno_untracked = self.errno_untracked.saturating_add(other.errno_untracked);
    }
}

impl Default for KeyStats {
    fn default() -> Self {
        KeyStats::EMPTY
    }
}
