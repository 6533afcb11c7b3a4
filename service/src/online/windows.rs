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
//!
//! The recent windows are held decoded (they are laid over the baseline
//! at every tick); the baseline's encoded, as they came (at most 2 KiB
//! each, against 34 KB decoded: 100 devices' 10 minutes of 1 s windows
//! are about 120 MB instead of 2 GB), decoded only where its reduced form
//! is built or a slice cut by an eviction is summed again.

use std::collections::{BTreeMap, BTreeSet, HashSet};

use agent_core::summary::MAX_ENCODED_LEN;
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
    /// Fault-free windows by index, oldest first, encoded.
    baseline: BTreeMap<u64, Vec<Encoded>>,
    /// Windows still judged, by index.
    recent: BTreeMap<u64, Vec<Box<Summary>>>,
    /// The newest index that left the recent windows.
    decided_through: Option<u64>,
    /// Ids of the summaries held (repeats of a re-read are not kept twice).
    ids: HashSet<RunId>,
    /// The baseline reduced as the peer methods read it (all training),
    /// kept between ticks: promoted windows are added to it, evicted ones
    /// taken out ([`Fleet::evict_training`]), the recent windows laid over
    /// it to judge them ([`GroupWindows::judge`]).
    reduced: Option<Fleet>,
}

/// A baseline window as its summary's encoding.
#[derive(Debug)]
struct Encoded {
    id: RunId,
    bytes: Box<[u8]>,
}

impl Encoded {
    /// Encodes `summary` (decoded from at most [`MAX_ENCODED_LEN`] bytes,
    /// so it fits again unchanged: `encode` folds nothing).
    fn new(summary: &mut Summary) -> Option<Encoded> {
        let mut buf = [0u8; MAX_ENCODED_LEN];
        let id = summary.id;
        let bytes = summary.encode(&mut buf).ok()?;
        Some(Encoded {
            id,
            bytes: bytes.into(),
        })
    }

    /// The summary again. `None` only for a summary that never passed the
    /// decoder's checks (the task hands in decoded ones; a test's made-up
    /// window must be consistent too, or it is left out of the baseline
    /// here while already in the reduced one). Decoded straight into a box:
    /// by value, each step of the iterators that read the baseline copied
    /// its 34 KB again.
    fn decode(&self) -> Option<Box<Summary>> {
        let mut summary = Box::new(Summary::empty());
        Summary::decode_into(&self.bytes, &mut summary).ok()?;
        Some(summary)
    }
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

    /// Bytes of the baseline's encoded summaries.
    pub fn baseline_bytes(&self) -> usize {
        self.baseline
            .values()
            .flatten()
            .map(|e| e.bytes.len())
            .sum()
    }

    /// The oldest window index still being judged.
    pub fn oldest_recent(&self) -> Option<u64> {
        self.recent.first_key_value().map(|(i, _)| *i)
    }

    /// The newest window index held.
    pub fn newest(&self) -> Option<u64> {
        self.recent
            .last_key_value()
            .map(|(i, _)| *i)
            .or(self.baseline.last_key_value().map(|(i, _)| *i))
    }

    /// Takes one window summary (boxed by the caller: a summary is 34 KB,
    /// and every move of it by value was a copy, a third of the analysis'
    /// CPU time).
    pub fn add(&mut self, summary: Box<Summary>) -> Added {
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
        self.recent.entry(index).or_default().push(summary);
        Added::Taken
    }

    /// Runs `judge` on the fleet the peer methods judge: the baseline as
    /// training, the recent windows as the range to diagnose. `None`
    /// without recent windows. The recent windows are laid over the
    /// reduced baseline and taken out again afterwards
    /// ([`Fleet::overlay`]): the baseline is never copied.
    pub fn judge<T>(&mut self, slice_windows: u64, judge: impl FnOnce(&Fleet) -> T) -> Option<T> {
        let first = *self.recent.first_key_value()?.0;
        // A window of index i starts within half a window of i × length
        // (see `add`): the boundary between the two ranges.
        let boundary = first
            .saturating_mul(self.window_ns)
            .saturating_sub(self.window_ns / 2);
        let baseline = &self.baseline;
        let reduced = self.reduced.get_or_insert_with(|| {
            let mut fleet = Fleet::new(ALL, NONE, slice_windows);
            for s in baseline.values().flatten().filter_map(Encoded::decode) {
                fleet.add(&s);
            }
            fleet
        });
        reduced.overlay(boundary);
        for s in self.recent.values().flatten() {
            reduced.add(s);
        }
        let out = judge(reduced);
        reduced.end_overlay();
        Some(out)
    }

    /// The reduced baseline kept between ticks, if built (tests compare
    /// it with one reduced from scratch).
    pub fn reduced(&self) -> Option<&Fleet> {
        self.reduced.as_ref()
    }

    /// The baseline's summaries, oldest first (decoded one by one).
    pub fn baseline_summaries(&self) -> impl Iterator<Item = Box<Summary>> + '_ {
        self.baseline.values().flatten().filter_map(Encoded::decode)
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
                let mut encoded = Vec::with_capacity(windows.len());
                for mut w in windows {
                    let id = w.id;
                    match Encoded::new(&mut w) {
                        Some(e) => encoded.push(e),
                        // Cannot happen (it came encoded); not held then.
                        None => {
                            self.ids.remove(&id);
                        }
                    }
                }
                self.baseline.insert(index, encoded);
                out.promoted += 1;
            } else {
                for w in &windows {
                    self.ids.remove(&w.id);
                }
                out.dropped += 1;
            }
        }
        // Evicted a tenth of the span at a time: the windows of the evicted
        // indices are taken out of the reduced baseline, and the histogram
        // and link slices the cut falls in summed again from the windows
        // left in them.
        let span = baseline_windows.max(1);
        if self.baseline.len() as u64 <= span + span / 10 {
            return out;
        }
        let mut evicted = Vec::new();
        while self.baseline.len() as u64 > span {
            if let Some((_, windows)) = self.baseline.pop_first() {
                for w in &windows {
                    self.ids.remove(&w.id);
                }
                evicted.extend(windows);
                out.evicted += 1;
            }
        }
        if let (Some(reduced), Some((&before, _))) =
            (&mut self.reduced, self.baseline.first_key_value())
        {
            reduced.evict_training(
                before,
                evicted.iter().filter_map(Encoded::decode),
                self.baseline.values().flatten().filter_map(Encoded::decode),
            );
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use agent_core::{FdKind, SyscallId};
    use diagnose::peers::fleet::{Fleet, Range};
    use diagnose::peers::{analyse, Options};
    use fixtures::synth::{add_failures, add_in_flight, FleetSpec};

    use super::{GroupWindows, ALL, NONE};

    const SLICE: u64 = 10;

    /// What judging a fleet gives, as text.
    fn judged(fleet: &Fleet) -> String {
        format!(
            "{:?}",
            analyse(fleet, &Options::default()).map_err(|e| e.to_string())
        )
    }

    /// The reduced baseline kept between ticks (windows promoted into it,
    /// evicted out of it, recent windows laid over it and taken out again)
    /// is, after every tick, the fleet reduced from scratch from the same
    /// baseline; and judging through the overlay gives what a fleet built
    /// from scratch of the baseline and the recent windows gives. With a
    /// span that is no multiple of the slices (the cut falls inside
    /// histogram and link slices), windows dropped as flagged, a device
    /// that leaves and one that joins late (the devices' order changes), a
    /// device that stops accepting (its role is inferred), failures and
    /// waits in some training windows.
    #[test]
    fn the_kept_baseline_is_the_baseline_reduced_from_scratch() {
        let spec = FleetSpec {
            role: None,
            links: 3,
            ..FleetSpec::new(5, 0)
        };
        let accept4 = SyscallId::from_name("accept4").unwrap();
        let (span, recent) = (23, 7);
        let mut g = GroupWindows::default();
        let mut evicted = 0;
        for w in 0..170u64 {
            for d in 0..spec.devices {
                if (d == 4 && w >= 60) || (d == 0 && w < 20) {
                    continue;
                }
                let mut s = spec.window(d, w);
                if d == 1 && w >= 40 {
                    s.syscalls.retain(|e| e.key.id != accept4);
                    s.run.events = s.syscalls.iter().map(|e| e.count).sum();
                }
                if w % 7 == 3 {
                    add_failures(&mut s, "pwrite64", FdKind::File, 28, 2, 10, 20);
                }
                if w % 11 == 5 {
                    let start = s.run.start_unix_ns - 2_000_000_000;
                    add_in_flight(&mut s, 9, "read", FdKind::Pipe, start);
                }
                g.add(Box::new(s));
            }
            if (w + 1) % 5 != 0 {
                continue;
            }
            let first = *g.recent.first_key_value().unwrap().0;
            let boundary = first * g.window_ns - g.window_ns / 2;
            let mut scratch = Fleet::new(
                Range {
                    since: 0,
                    until: boundary,
                },
                Range {
                    since: boundary,
                    until: u64::MAX,
                },
                SLICE,
            );
            for s in g
                .baseline_summaries()
                .chain(g.recent.values().flatten().cloned())
            {
                scratch.add(&s);
            }
            assert_eq!(g.judge(SLICE, judged), Some(judged(&scratch)), "window {w}");
            // Every third tick the oldest recent index is taken as flagged.
            let flagged: BTreeSet<u64> = [first].into_iter().filter(|_| w % 3 == 0).collect();
            evicted += g.settle(&flagged, recent, false, span).evicted;
            let mut scratch = Fleet::new(ALL, NONE, SLICE);
            for s in g.baseline_summaries() {
                scratch.add(&s);
            }
            assert_eq!(
                g.reduced().unwrap().reduced_text(),
                scratch.reduced_text(),
                "window {w}"
            );
        }
        assert!(evicted > 100, "{evicted}");
    }
}
