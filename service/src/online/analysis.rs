//! One tick of the live analysis over every group: the recent windows of
//! each group judged against its baseline by `diagnose::peers::analyse`,
//! the findings turned into incident changes, the windows settled (clean
//! ones into the baseline, flagged ones dropped). Pure: no store, no
//! clock, no printing; the task ([`super::task`]) feeds it and acts on
//! what it returns.

use std::collections::{BTreeMap, BTreeSet, HashSet};

use agent_core::Summary;
use diagnose::peers::fleet::LINK_SLICE_WINDOWS;
use diagnose::peers::hang::HangParams;
use diagnose::peers::metrics::Cause;
use diagnose::peers::{analyse, Method, PeerDiagnosis};
use wire::alert::IncidentCause;

use super::incidents::{Change, Event, Incidents, Key};
use super::windows::{Added, GroupWindows};
use super::{ns, OnlineOptions};
use crate::store::IncidentRow;

/// Windows per histogram slice (the `peers` command's default).
pub const SLICE_WINDOWS: u64 = 10;

/// What one tick did.
#[derive(Debug, Default)]
pub struct Tick {
    /// Incidents opened, updated or closed, in order.
    pub changes: Vec<Change>,
    /// One line per decision that is not an incident change (a group
    /// starting to judge, a note of the methods, seen once).
    pub lines: Vec<String>,
    /// Window summaries judged (recent windows of every group).
    pub judged: usize,
}

#[derive(Debug, Default)]
struct Group {
    windows: GroupWindows,
    incidents: Incidents,
    /// Whether the baseline was full at the last tick.
    judging: bool,
    /// Lines already said (the methods repeat their notes every tick).
    said: HashSet<String>,
    /// Window ranges of closed incidents, kept out of the baseline until
    /// they have settled (see [`held_out_windows`]).
    quarantine: Vec<(u64, u64)>,
}

/// The live analysis' state: per group its windows and open incidents.
#[derive(Debug)]
pub struct Online {
    options: OnlineOptions,
    methods: diagnose::peers::Options,
    groups: BTreeMap<String, Group>,
}

impl Online {
    /// An analysis with these (checked) options and nothing held.
    pub fn new(options: OnlineOptions) -> Online {
        Online {
            methods: options.methods(),
            options,
            groups: BTreeMap::new(),
        }
    }

    /// Its options.
    pub fn options(&self) -> &OnlineOptions {
        &self.options
    }

    /// Takes one window summary of `group`.
    pub fn add(&mut self, group: &str, summary: Box<Summary>) -> Added {
        if !self.groups.contains_key(group) {
            self.groups.insert(group.to_string(), Group::default());
        }
        let Some(g) = self.groups.get_mut(group) else {
            return Added::NotPeer;
        };
        let device = summary.origin.device;
        let start = summary.run.start_unix_ns;
        let active = summary.syscalls.iter().any(|s| s.count > 0);
        let added = g.windows.add(summary);
        if matches!(added, Added::Taken | Added::Late) {
            // The index as the windows file it (starts rounded to the
            // nearest window).
            let window_ns = g.windows.window_ns().max(1);
            let index = start.saturating_add(window_ns / 2) / window_ns;
            g.incidents.saw(device, index, active);
        }
        added
    }

    /// Takes back an incident stored open by an earlier process, so that
    /// it is extended or closed rather than opened twice.
    pub fn restore(&mut self, row: IncidentRow) {
        self.groups
            .entry(row.group.clone())
            .or_default()
            .incidents
            .restore(row);
    }

    /// Sets the store's id of an incident just opened.
    pub fn set_id(&mut self, group: &str, key: &Key, id: i64) {
        if let Some(g) = self.groups.get_mut(group) {
            g.incidents.set_id(key, id);
        }
    }

    /// The open incidents of every group.
    pub fn open_incidents(&self) -> Vec<&IncidentRow> {
        self.groups
            .values()
            .flat_map(|g| g.incidents.open().map(|(_, row)| row))
            .collect()
    }

    /// Summaries held in memory (baselines and recent windows).
    pub fn summaries_held(&self) -> usize {
        self.groups.values().map(|g| g.windows.summaries()).sum()
    }

    /// Bytes of the baselines' encoded summaries (the recent windows are
    /// held decoded, [`Summary`]'s size each).
    pub fn baseline_bytes(&self) -> usize {
        self.groups
            .values()
            .map(|g| g.windows.baseline_bytes())
            .sum()
    }

    /// Windows a span of time holds (at least 1).
    fn windows_in(&self, span_ns: u64, window_ns: u64) -> u64 {
        span_ns.div_ceil(window_ns.max(1)).max(1)
    }

    /// How many of the newest windows stay judged before they settle:
    /// enough for the k-of-n rule (twice n), the histogram's 2-of-3 slices,
    /// the link method's slice and a hang's timeout.
    fn recent_windows(&self, window_ns: u64) -> u64 {
        let hang = self.windows_in(self.methods.hang_params.hang_after_ns, window_ns)
            + self.methods.hang_params.quiet_windows
            + 2;
        (2 * self.options.n as u64)
            .max(3 * SLICE_WINDOWS)
            .max(2 * LINK_SLICE_WINDOWS)
            .max(hang)
    }

    /// Judges every group's recent windows at time `now` (Unix ns).
    pub fn tick(&mut self, now: u64) -> Tick {
        let mut out = Tick::default();
        let baseline_ns = ns(self.options.baseline);
        let close_ns = ns(self.options.close_after);
        let names: Vec<String> = self.groups.keys().cloned().collect();
        for name in names {
            let (baseline_windows, keep_recent, close_after) = {
                let w = self.groups[&name].windows.window_ns();
                if w == 0 {
                    continue;
                }
                (
                    self.windows_in(baseline_ns, w),
                    self.recent_windows(w),
                    self.windows_in(close_ns, w),
                )
            };
            let methods = self.methods.clone();
            let Some(g) = self.groups.get_mut(&name) else {
                continue;
            };
            let Some(newest) = g.windows.newest() else {
                continue;
            };
            let window_ns = g.windows.window_ns();
            let group_changes = out.changes.len();
            let learning = g.windows.baseline_windows() < baseline_windows;
            let mut flagged = BTreeSet::new();
            if learning {
                if g.said.insert("learning".into()) {
                    out.lines.push(format!(
                        "group {name}: learning its baseline: judging starts once {baseline_windows} windows are in it"
                    ));
                }
            } else {
                if !g.judging {
                    g.judging = true;
                    out.lines.push(format!(
                        "group {name}: baseline of {} windows: judging each new window against it",
                        g.windows.baseline_windows()
                    ));
                }
                out.judged += g.windows.recent_windows() as usize;
                let diagnosis = g.windows.judge(SLICE_WINDOWS, |f| analyse(f, &methods));
                match diagnosis {
                    Some(Ok(d)) => {
                        flagged = flagged_windows(&d, &methods.hang_params);
                        let (changes, notes) =
                            g.incidents.update(&name, &d, newest, close_after, now);
                        out.changes.extend(changes);
                        for n in notes.into_iter().chain(
                            d.notes
                                .iter()
                                .map(|n| format!("group {name}: not judged: {n}")),
                        ) {
                            if g.said.insert(n.clone()) {
                                out.lines.push(n);
                            }
                        }
                    }
                    Some(Err(e)) => {
                        let line = format!("group {name}: not judged: {e:#}");
                        if g.said.insert(line.clone()) {
                            out.lines.push(line);
                        }
                    }
                    None => {}
                }
            }
            // Flags matter only for windows still recent: older ones were
            // decided (a hang open for hours must not flag hours each tick).
            let oldest_recent = g.windows.oldest_recent().unwrap_or(newest);
            out.changes
                .extend(g.incidents.close(window_ns, close_after, now));
            // Every incident closed this tick, by the diagnosis' update or
            // by the close above: its windows stay out of the baseline until
            // they have settled.
            for c in &out.changes[group_changes..] {
                if c.event != Event::Closed {
                    continue;
                }
                let first = incident_since(&c.incident, &methods.hang_params, window_ns);
                g.quarantine.push((first.max(oldest_recent), newest));
            }
            if !learning {
                flagged.extend(held_out_windows(
                    &g.incidents,
                    &methods.hang_params,
                    window_ns,
                    (oldest_recent, newest),
                    baseline_windows,
                ));
                for (first, last) in &g.quarantine {
                    flagged.extend(*first..=*last);
                }
            }
            // A range whose windows have all left the recent ones is done.
            g.quarantine
                .retain(|(_, last)| last.saturating_add(keep_recent) > newest);
            // Lines said long ago may be said again when they come back.
            if g.said.len() > 1000 {
                g.said.clear();
            }
            g.windows
                .settle(&flagged, keep_recent, learning, baseline_windows);
        }
        out
    }
}

/// The window indices in which a finding (a culprit's, or a symptom set
/// apart) flagged anything: a histogram or link finding flags the slices
/// its windows start; a hang or crash finding flags the window it became
/// certain in and the windows before it back to where it began (the stuck
/// call's start, the first failure), so that the hang method never learns
/// a hung call as one of the program's normal waits from the baseline.
fn flagged_windows(d: &PeerDiagnosis, hang: &HangParams) -> BTreeSet<u64> {
    let mut out = BTreeSet::new();
    for f in d
        .findings
        .iter()
        .chain(d.explained.iter().map(|e| &e.finding))
    {
        let (before, span) = match f.method {
            Method::Histogram => (0, d.slice_windows.max(1)),
            Method::Link => (0, LINK_SLICE_WINDOWS),
            // Its disk findings start histogram slices, its network ones
            // link slices: the longer of the two covers both.
            Method::Semantic => (0, LINK_SLICE_WINDOWS.max(d.slice_windows)),
            Method::Median | Method::Errno => (0, 1),
            // A wait finding's window counts the span of windows before it.
            Method::Wait => (d.wait_span.saturating_sub(1), 1),
            Method::Hang => (lookback(f.cause, hang, d.window_ns), 1),
        };
        for w in &f.windows {
            out.extend(w.saturating_sub(before)..w.saturating_add(span));
        }
    }
    out
}

/// Windows from a crash's first failure, or a hang's call start, to the
/// window the method was certain in.
fn lookback(cause: Cause, hang: &HangParams, window_ns: u64) -> u64 {
    match cause {
        Cause::Hang => hang.hang_after_ns.div_ceil(window_ns.max(1)),
        _ => hang.quiet_windows,
    }
}

/// The first window of an incident: its first flagged window, and for a
/// hang or crash the wait before it (where its stuck call began, or its
/// first failure).
fn incident_since(row: &IncidentRow, hang: &HangParams, window_ns: u64) -> u64 {
    let first = row.first_window_unix_ns / window_ns.max(1);
    let cause = match row.cause {
        IncidentCause::Hang => Cause::Hang,
        IncidentCause::Crash => Cause::Crash,
        _ => return first,
    };
    first.saturating_sub(lookback(cause, hang, window_ns))
}

/// The windows of a group while an incident is open are not fault-free,
/// and the methods flag only some of them: a hang or crash only the window
/// it became certain in, while its clients' windows hold the call that
/// waits on the silent server until it answers; a disk or network fault
/// only the device's over-threshold windows, while its peers' calls stall
/// behind it in others (under 20 % packet loss a bystander's `readv` in
/// flight across 6 windows, enough for the hang method to learn it as one
/// of the program's waits and miss a later hang on it: the fleet run of
/// 2026-11-29, stop 48). So every window from where an open incident began
/// ([`incident_since`]) to the newest stays out of the baseline, and when
/// it closes its range is quarantined until it has settled. While open,
/// only for a baseline span: a server that never answers again, or a fault
/// that never ends, does not freeze its group's baseline for ever (what
/// the fleet does then is its new normal).
fn held_out_windows(
    incidents: &Incidents,
    hang: &HangParams,
    window_ns: u64,
    (oldest_recent, newest): (u64, u64),
    baseline_windows: u64,
) -> BTreeSet<u64> {
    let mut out = BTreeSet::new();
    for (_, row) in incidents.open() {
        let first = incident_since(row, hang, window_ns);
        if newest.saturating_sub(first) <= baseline_windows {
            out.extend(first.max(oldest_recent)..=newest);
        }
    }
    out
}
