//! A group's windows held in memory between ticks: the **baseline** (the
//! most recent windows in which no method flagged anything, bounded to a
//! span of windows) and the **recent** windows still being judged; and the
//! `diagnose` fleet built from both, the baseline as training and the
//! recent windows as the range to diagnose.
//!
//! Windows are kept by their aligned index (start rounded to the window
//! length, as `diagnose::peers::fleet` aligns them), so that a window
//! index moves to the baseline, or is dropped, for every device at once:
//! the median of a window needs its peers' values of the same window.

use std::collections::{BTreeMap, BTreeSet, HashSet};

use agent_core::{RunId, Summary};
use diagnose::peers::fleet::{Fleet, Range};

/// What became of a window handed to [`GroupWindows::add`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Added {
    /// Kept, to be judged.
    Taken,
    /// Already held (the same summary id).
    Repeat,
    /// Its window index was already judged and left the recent windows.
    Late,
    /// A window of another length than the group's first.
    OtherLength,
    /// Not a peer's window: no device id, or a whole run.
    NotPeer,
}

/// Where the windows leaving the recent ones went.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Settled {
    /// Window indices that entered the baseline.
    pub promoted: usize,
    /// Window indices dropped because a method flagged something in them.
    pub dropped: usize,
    /// Baseline indices evicted (older than its span).
    pub evicted: usize,
}

/// One group's windows.
#[derive(Debug, Default)]
pub struct GroupWindows {
    /// The window length, ns (the first window's; 0 before).
    window_ns: u64,
    /// Fault-free windows by index, oldest first.
    baseline: BTreeMap<u64, Vec<Box<Summary>>>,
    /// Windows still judged, by index.
    recent: BTreeMap<u64, Vec<Box<Summary>>>,
    /// The newest index that left the recent windows.
    decided_through: Option<u64>,
    /// Ids of the summaries held (repeats of a re-read are not kept twice).
    ids: HashSet<RunId>,
    /// The baseline reduced as the peer methods read it (all training),
    /// kept between ticks: promoted windows are added to it; evicting
    /// windows drops it (rebuilt at the next tick), which is why the
    /// baseline is evicted by a tenth of its span at a time.
    reduced: Option<Fleet>,
}

/// Every time: the baseline fleet's training range.
const ALL: Range = Range {
    since: 0,
    until: u64::MAX,
};

/// No time: the baseline fleet's diagnosis range.
const NONE: Range = Range {
    since: u64::MAX,
    until: u64::MAX,
};

impl GroupWindows {
    /// The window length, ns (0 before any window).
    pub fn window_ns(&self) -> u64 {
        self.window_ns
    }

    /// Window indices in the baseline.
    pub fn baseline_windows(&self) -> u64 {
        self.baseline.len() as u64
    }

    /// Window indices still being judged.
    pub fn recent_windows(&self) -> u64 {
        self.recent.len() as u64
    }

    /// Summaries held, baseline and recent.
    pub fn summaries(&self) -> usize {
        self.ids.len()
    }

    /// The newest window index held.
    pub fn newest(&self) -> Option<u64> {
        self.recent
            .last_key_value()
            .or(self.baseline.last_key_value())
            .map(|(i, _)| *i)
    }

    /// Takes one window summary.
    pub fn add(&mut self, summary: Summary) -> Added {
        if summary.origin.device == [0; 16]
            || summary.run.window == 0
            || summary.origin.window_ns == 0
        {
            return Added::NotPeer;
        }
        if self.window_ns == 0 {
            self.window_ns = summary.origin.window_ns;
        } else if summary.origin.window_ns != self.window_ns {
            return Added::OtherLength;
        }
        let index = summary.run.start_unix_ns.saturating_add(self.window_ns / 2) / self.window_ns;
        if self.decided_through.is_some_and(|d| index <= d) {
            return Added::Late;
        }
        if !self.ids.insert(summary.id) {
            return Added::Repeat;
        }
        self.recent
            .entry(index)
            .or_default()
            .push(Box::new(summary));
        Added::Taken
    }

    /// The fleet the peer methods judge: the baseline as training, the
    /// recent windows as the range to diagnose. `None` without recent
    /// windows.
    pub fn fleet(&mut self, slice_windows: u64) -> Option<Fleet> {
        let first = *self.recent.first_key_value()?.0;
        // A window of index i starts within half a window of i × length
        // (see `add`): the boundary between the two ranges.
        let boundary = first
            .saturating_mul(self.window_ns)
            .saturating_sub(self.window_ns / 2);
        let baseline = &self.baseline;
        let reduced = self.reduced.get_or_insert_with(|| {
            let mut fleet = Fleet::new(ALL, NONE, slice_windows);
            for s in baseline.values().flatten() {
                fleet.add(s);
            }
            fleet
        });
        let mut fleet = reduced.clone();
        fleet.set_ranges(
            Range {
                since: 0,
                until: boundary,
            },
            Range {
                since: boundary,
                until: u64::MAX,
            },
        );
        for s in self.recent.values().flatten() {
            fleet.add(s);
        }
        Some(fleet)
    }

    /// Moves the recent windows older than the newest `keep_recent` out:
    /// into the baseline unless `flagged` holds their index (then they are
    /// dropped), all of them while `learning`. Then, once the baseline is a
    /// tenth over `baseline_windows`, evicts its oldest indices down to it.
    pub fn settle(
        &mut self,
        flagged: &BTreeSet<u64>,
        keep_recent: u64,
        learning: bool,
        baseline_windows: u64,
    ) -> Settled {
        let mut out = Settled::default();
        let Some(newest) = self.newest() else {
            return out;
        };
        while let Some(entry) = self.recent.first_entry() {
            let index = *entry.key();
            if index.saturating_add(keep_recent) > newest {
                break;
            }
            let windows = entry.remove();
            self.decided_through = Some(index);
            if learning || !flagged.contains(&index) {
                if let Some(reduced) = &mut self.reduced {
                    for w in &windows {
                        reduced.add(w);
                    }
                }
                self.baseline.insert(index, windows);
                out.promoted += 1;
            } else {
                for w in &windows {
                    self.ids.remove(&w.id);
                }
                out.dropped += 1;
            }
        }
        // Evicted a tenth of the span at a time: each eviction rebuilds the
        // reduced baseline.
        let span = baseline_windows.max(1);
        if self.baseline.len() as u64 <= span + span / 10 {
            return out;
        }
        self.reduced = None;
        while self.baseline.len() as u64 > span {
            if let Some((_, windows)) = self.baseline.pop_first() {
                for w in &windows {
                    self.ids.remove(&w.id);
                }
                out.evicted += 1;
            }
        }
        out
    }
}
