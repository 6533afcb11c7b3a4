//! Window summaries in a diagnosis. The diagnosis compares whole runs; a
//! traced run cut into time windows (`--window`) arrives as one summary per
//! window, all sharing its device and stream id. Without `--merge-windows`
//! they are left out (counted in a note); with it, the windows of each
//! stream become one run, summed exactly ([`merge_stream`]).

use std::collections::BTreeMap;

use agent_core::summary::{MAX_PEERS, MAX_SUMMARY_SYSCALLS, MAX_SUMMARY_TRANSITIONS};
use agent_core::{
    CpuTime, DeviceId, Key, Peer, PeerAddr, PeerRest, Peers, StreamId, Summary, SyscallId,
    SyscallSummary, Transition,
};

/// What [`whole_runs`] did with the window summaries, for the note on
/// stderr.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WindowNote {
    /// Window summaries read.
    pub windows: usize,
    /// Streams they belong to.
    pub streams: usize,
    /// Whether they were merged (else left out).
    pub merged: bool,
    /// Streams with window indices missing (a window lost or not uploaded
    /// yet): merged all the same, from the windows there are.
    pub incomplete: usize,
    /// Windows without a stream id, which no stream can take: left out.
    pub orphans: usize,
    /// Windows whose index repeats one already taken in their stream (same
    /// window, another summary id): the later one is left out.
    pub repeats: usize,
}

impl std::fmt::Display for WindowNote {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.merged {
            write!(
                f,
                "merged {} window summaries into {} runs (one per stream)",
                self.windows - self.orphans - self.repeats,
                self.streams
            )?;
            if self.incomplete > 0 {
                write!(
                    f,
                    "; {} stream(s) have windows missing and count only the windows read",
                    self.incomplete
                )?;
            }
            if self.orphans + self.repeats > 0 {
                write!(
                    f,
                    "; left out {} window(s) without a stream id and {} repeated window(s)",
                    self.orphans, self.repeats
                )?;
            }
            Ok(())
        } else {
            write!(
                f,
                "left out {} window summaries of {} stream(s): the diagnosis compares whole runs; \
                 --merge-windows makes each stream one run",
                self.windows, self.streams
            )
        }
    }
}

/// The runs to diagnose: the whole runs as they are, and, with `merge`,
/// each stream's windows merged into one run (placed where its first
/// window was). Without `merge` the windows are left out. The note is
/// `None` when there was no window.
pub fn whole_runs(summaries: Vec<Summary>, merge: bool) -> (Vec<Summary>, Option<WindowNote>) {
    let mut note = WindowNote {
        merged: merge,
        ..WindowNote::default()
    };
    // Whole runs, and a slot for each stream at its first window.
    enum Slot {
        Run(Box<Summary>),
        Stream(usize),
    }
    let mut slots = Vec::with_capacity(summaries.len());
    let mut streams: Vec<Vec<Summary>> = Vec::new();
    let mut stream_of: BTreeMap<(DeviceId, StreamId), usize> = BTreeMap::new();
    for s in summaries {
        if s.run.window == 0 {
            slots.push(Slot::Run(Box::new(s)));
            continue;
        }
        note.windows += 1;
        if s.origin.stream.is_zero() {
            note.orphans += 1;
            continue;
        }
        let key = (s.origin.device, s.origin.stream);
        let at = *stream_of.entry(key).or_insert_with(|| {
            streams.push(Vec::new());
            slots.push(Slot::Stream(streams.len() - 1));
            streams.len() - 1
        });
        streams[at].push(s);
    }
    note.streams = streams.len();
    if note.windows == 0 {
        let runs = slots
            .into_iter()
            .filter_map(|slot| match slot {
                Slot::Run(s) => Some(*s),
                Slot::Stream(_) => None,
            })
            .collect();
        return (runs, None);
    }
    let mut merged: Vec<Option<Summary>> = streams
        .into_iter()
        .map(|mut windows| {
            if !merge {
                return None;
            }
            windows.sort_by_key(|w| w.run.window);
            let before = windows.len();
            windows.dedup_by_key(|w| w.run.window);
            note.repeats += before - windows.len();
            let first = windows[0].run.window;
            let last = windows[windows.len() - 1].run.window;
            if first != 1 || (last - first) as usize + 1 != windows.len() {
                note.incomplete += 1;
            }
            Some(merge_stream(&windows))
        })
        .collect();
    let runs = slots
        .into_iter()
        .filter_map(|slot| match slot {
            Slot::Run(s) => Some(*s),
            Slot::Stream(i) => merged[i].take(),
        })
        .collect();
    (runs, Some(note))
}

/// The windows of one stream as one run: counts, times, errors,
/// histograms, consecutive calls, results and sizes of each (syscall, fd
/// kind) summed exactly (`SyscallSummary::merge`; failure times moved to be
/// relative to the first window's start), transitions and peers summed per
/// pair and per peer. The run starts at the first window's start and lasts
/// until the last window's end, and ends as the last window ended (its exit
/// and its calls in flight). Events, overflow and dropped summaries are
/// summed; processes and threads are the largest of any window (a process
/// alive in several windows is counted in each, so a sum would overcount);
/// the CPU time is summed when every window measured it. The id, the
/// facts and the coverage are the first window's, except its source: in
/// process if any window's is (`Source::combined`). The result is a whole run (`window` 0,
/// `window_ns` 0).
///
/// Exact as long as no window folded entries: a key or transition a window
/// folded into "other" stays there. When the merged run has more keys or
/// transitions than a summary holds, the least frequent are folded into
/// "other" and the run is marked truncated.
///
/// # Panics
/// When `windows` is empty.
pub fn merge_stream(windows: &[Summary]) -> Summary {
    let first = &windows[0];
    let last = &windows[windows.len() - 1];
    let mut out = first.clone();
    let r = &mut out.run;
    r.window = 0;
    r.exit = last.run.exit;
    r.duration_ns = last
        .run
        .start_unix_ns
        .saturating_add(last.run.duration_ns)
        .saturating_sub(first.run.start_unix_ns);
    r.events = 0;
    r.overflow = Default::default();
    r.spool_dropped = 0;
    for w in windows {
        let wr = &w.run;
        r.events = r.events.saturating_add(wr.events);
        r.overflow.keys = r.overflow.keys.saturating_add(wr.overflow.keys);
        r.overflow.transitions = r
            .overflow
            .transitions
            .saturating_add(wr.overflow.transitions);
        r.overflow.threads = r.overflow.threads.saturating_add(wr.overflow.threads);
        r.overflow.errnos = r.overflow.errnos.saturating_add(wr.overflow.errnos);
        r.spool_dropped = r.spool_dropped.saturating_add(wr.spool_dropped);
        r.processes = r.processes.max(wr.processes);
        r.threads = r.threads.max(wr.threads);
    }
    out.origin.window_ns = 0;
    out.cpu = windows.iter().try_fold(CpuTime::default(), |sum, w| {
        w.cpu.map(|c| CpuTime {
            user_ns: sum.user_ns.saturating_add(c.user_ns),
            system_ns: sum.system_ns.saturating_add(c.system_ns),
        })
    });
    out.in_flight = last.in_flight.clone();
    let (syscalls, folded_keys) = merged_syscalls(windows);
    let (transitions, folded_pairs) = merged_transitions(windows);
    out.syscalls = syscalls;
    out.transitions = transitions;
    out.truncated = windows.iter().any(|w| w.truncated) || folded_keys || folded_pairs;
    out.peers = merged_peers(windows);
    // Lateness is the same in every window of a stream (the first's is
    // kept); the source is in-process if any window's is: the merged
    // counts lack libc's own calls as soon as one part lacks them.
    out.coverage.source = windows
        .iter()
        .fold(first.coverage.source, |s, w| s.combined(w.coverage.source));
    out
}

/// Every window's entries summed per key; true when some had to be folded
/// into "other" to fit.
fn merged_syscalls(
    windows: &[Summary],
) -> (heapless::Vec<SyscallSummary, MAX_SUMMARY_SYSCALLS>, bool) {
    let start = windows[0].run.start_unix_ns;
    let mut by_key: BTreeMap<Key, SyscallSummary> = BTreeMap::new();
    for w in windows {
        // Failure times are relative to their window's start.
        let shift = w.run.start_unix_ns.saturating_sub(start);
        for s in &w.syscalls {
            let mut s = s.clone();
            if let Some(f) = &mut s.failures {
                f.first_ns = f.first_ns.saturating_add(shift);
                f.last_ns = f.last_ns.saturating_add(shift);
            }
            match by_key.get_mut(&s.key) {
                Some(sum) => sum.merge(&s),
                None => {
                    by_key.insert(s.key, s);
                }
            }
        }
    }
    let mut entries: Vec<SyscallSummary> = by_key.into_values().collect();
    let folded = entries.len() > MAX_SUMMARY_SYSCALLS;
    if folded {
        // Keep the most frequent (ties: lower key) beside "other".
        let mut other = entries
            .iter()
            .position(|s| s.key == Key::OTHER)
            .map(|i| entries.remove(i));
        entries.sort_by(|a, b| b.count.cmp(&a.count).then(a.key.cmp(&b.key)));
        for s in entries.split_off(MAX_SUMMARY_SYSCALLS - 1) {
            match &mut other {
                Some(o) => o.merge(&s),
                None => {
                    other = Some(SyscallSummary {
                        key: Key::OTHER,
                        ..s
                    });
                }
            }
        }
        entries.extend(other);
        entries.sort_by_key(|s| s.key);
    }
    (entries.into_iter().collect(), folded)
}

/// Every window's transitions summed per pair; true when some had to be
/// folded into the "other" pair to fit.
fn merged_transitions(
    windows: &[Summary],
) -> (heapless::Vec<Transition, MAX_SUMMARY_TRANSITIONS>, bool) {
    let mut by_pair: BTreeMap<(SyscallId, SyscallId), Transition> = BTreeMap::new();
    for t in windows.iter().flat_map(|w| w.transitions.iter()) {
        by_pair
            .entry((t.from, t.to))
            .and_modify(|sum| sum.merge(t))
            .or_insert(*t);
    }
    let other_pair = (SyscallId::OTHER, SyscallId::OTHER);
    let mut entries: Vec<Transition> = by_pair.into_values().collect();
    let folded = entries.len() > MAX_SUMMARY_TRANSITIONS;
    if folded {
        let mut other = match entries.iter().position(|t| (t.from, t.to) == other_pair) {
            Some(i) => entries.remove(i),
            None => Transition {
                from: SyscallId::OTHER,
                to: SyscallId::OTHER,
                count: 0,
                gap_sum_ns: 0,
            },
        };
        entries.sort_by(|a, b| {
            b.count
                .cmp(&a.count)
                .then((a.from, a.to).cmp(&(b.from, b.to)))
        });
        for t in entries.split_off(MAX_SUMMARY_TRANSITIONS - 1) {
            other.merge(&t);
        }
        entries.push(other);
        entries.sort_by_key(|t| (t.from, t.to));
    }
    (entries.into_iter().collect(), folded)
}

/// Every window's peers summed per peer, the last call the latest of any
/// window; the busiest [`MAX_PEERS`] kept, the rest folded with the
/// windows' own rests (whose peer count is then an upper bound: a peer
/// folded in two windows counts twice).
fn merged_peers(windows: &[Summary]) -> Peers {
    let mut by_addr: BTreeMap<PeerAddr, Peer> = BTreeMap::new();
    let mut rest = PeerRest::default();
    for w in windows {
        rest.merge(&w.peers.rest);
        for p in &w.peers.list {
            match by_addr.get_mut(&p.addr) {
                Some(sum) => {
                    sum.calls = sum.calls.saturating_add(p.calls);
                    sum.bytes = sum.bytes.saturating_add(p.bytes);
                    sum.total_ns = sum.total_ns.saturating_add(p.total_ns);
                    sum.errors = sum.errors.saturating_add(p.errors);
                    sum.last = match (sum.last, p.last) {
                        (Some(a), Some(b)) if b.end_unix_ns >= a.end_unix_ns => Some(b),
                        (None, b) => b,
                        (a, _) => a,
                    };
                }
                None => {
                    by_addr.insert(p.addr, *p);
                }
            }
        }
    }
    let mut all: Vec<Peer> = by_addr.into_values().collect();
    all.sort_by(|a, b| b.calls.cmp(&a.calls).then(a.addr.cmp(&b.addr)));
    let mut peers = Peers {
        list: heapless::Vec::new(),
        rest,
    };
    for p in all {
        if peers.list.len() < MAX_PEERS {
            // Cannot fail: checked above.
            let _ = peers.list.push(p);
        } else {
            peers.rest.fold(&p);
        }
    }
    peers
}
