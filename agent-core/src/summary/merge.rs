//! Merging entries: used to fold entries into "other" when a summary does
//! not fit, and by the host side to merge syscalls of the same meaning.

use heapless::Vec;

use super::{Consecutive, Failures, Spread, SyscallSummary, Transition, MAX_ERRNOS};

impl SyscallSummary {
    /// Adds `other`'s calls to this entry (the key is kept).
    pub fn merge(&mut self, other: &SyscallSummary) {
        let count = self.count.saturating_add(other.count);
        self.spread = if count > 1 {
            let mut histogram = self.histogram();
            histogram.merge(&other.histogram());
            Some(Spread {
                min_ns: self.min_ns().min(other.min_ns()),
                max_ns: self.max_ns().max(other.max_ns()),
                sum_sq_ns: self.sum_sq_ns().saturating_add(other.sum_sq_ns()),
                histogram,
            })
        } else {
            None
        };
        self.count = count;
        self.total_ns = self.total_ns.saturating_add(other.total_ns);
        self.failures = match (self.failures.take(), &other.failures) {
            (None, None) => None,
            (Some(a), None) => Some(a),
            (None, Some(b)) => Some(b.clone()),
            (Some(a), Some(b)) => Some(Failures::merged(&a, b)),
        };
        self.consecutive = match (self.consecutive, other.consecutive) {
            (None, None) => None,
            (a, b) => {
                let a = a.unwrap_or(Consecutive {
                    count: 0,
                    gap_sum_ns: 0,
                });
                let b = b.unwrap_or(Consecutive {
                    count: 0,
                    gap_sum_ns: 0,
                });
                Some(Consecutive {
                    count: a.count.saturating_add(b.count),
                    gap_sum_ns: a.gap_sum_ns.saturating_add(b.gap_sum_ns),
                })
            }
        };
        self.result_sum = self.result_sum.saturating_add(other.result_sum);
        self.param_sum = match (self.param_sum, other.param_sum) {
            (None, None) => None,
            (a, b) => Some(a.unwrap_or(0).saturating_add(b.unwrap_or(0))),
        };
    }
}

impl Failures {
    /// Both tallies together, keeping the most frequent errnos.
    pub fn merged(a: &Failures, b: &Failures) -> Failures {
        // Every errno of both sides, summed; at most 2 * MAX_ERRNOS.
        let mut all: Vec<(u16, u64), { 2 * MAX_ERRNOS }> = Vec::new();
        for (errno, n) in a.errnos.iter().chain(b.errnos.iter()) {
            match all.iter_mut().find(|(e, _)| e == errno) {
                Some((_, m)) => *m = m.saturating_add(*n),
                // Cannot fail: at most 2 * MAX_ERRNOS distinct entries.
                None => {
                    let _ = all.push((*errno, *n));
                }
            }
        }
        let mut errno_other = a.errno_other.saturating_add(b.errno_other);
        let errnos = top_errnos(&mut all, &mut errno_other);
        Failures {
            errors: a.errors.saturating_add(b.errors),
            errnos,
            errno_other,
            first_ns: a.first_ns.min(b.first_ns),
            last_ns: a.last_ns.max(b.last_ns),
        }
    }
}

/// Sorts `all` by count (descending, ties by errno) and keeps the first
/// `MAX_ERRNOS`; the counts of the rest are added to `other`.
pub(crate) fn top_errnos(all: &mut [(u16, u64)], other: &mut u64) -> Vec<(u16, u64), MAX_ERRNOS> {
    all.sort_unstable_by(|x, y| y.1.cmp(&x.1).then(x.0.cmp(&y.0)));
    let mut top = Vec::new();
    for (i, e) in all.iter().enumerate() {
        if i < MAX_ERRNOS {
            // Cannot fail: i < MAX_ERRNOS.
            let _ = top.push(*e);
        } else {
            *other = other.saturating_add(e.1);
        }
    }
    top
}

impl Transition {
    /// Adds `other`'s count and gaps (the pair is kept).
    pub fn merge(&mut self, other: &Transition) {
        self.count = self.count.saturating_add(other.count);
        self.gap_sum_ns = self.gap_sum_ns.saturating_add(other.gap_sum_ns);
    }
}
