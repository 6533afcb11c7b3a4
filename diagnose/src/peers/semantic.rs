//! The semantic method of Khadke et al. (§4.1.2, §4.3) on what the windows
//! carry: the paper parses `strace -fTttt` logs and matches each call to
//! the "same syscall, arguments and return code" of the control runs; our
//! windows keep no call log, but they keep per socket peer the calls, time
//! and errors of the sockets to it, and per syscall group the calls and
//! time. So an *invocation* here is:
//! - network: one device's socket calls to one peer address in a slice of
//!   [`LINK_SLICE_WINDOWS`] windows (the peer address standing for the
//!   paper's parsed parameters), its time the mean per call;
//! - file system: one device's calls of one file group (`stat`, `access`,
//!   file reads, file writes) in a histogram slice, its time the mean per
//!   call.
//!
//! Training (the control runs): per invocation, the minimum and maximum of
//! its time over the training slices in which it made at least
//! `min_calls` calls. Diagnosis, per slice:
//! - a socket invocation out of range adds one to the score *scr* of the
//!   pair (its device's address, the peer's address);
//! - a file invocation out of range adds one to its device's disk score
//!   (the paper reports a disk hog when "the error involves filesystem
//!   calls"; a `role=client` device's file calls cross the network and are
//!   not counted).
//!
//! Then, as §4.3: "isolate a node as faulty if all the highest *scr*
//! values involve that node with a different node", cause network; and
//! the device with the highest disk score, alone at the top, cause disk.
//! Otherwise nothing.
//!
//! Departures by default ([`SemanticParams::strict_paper`] off), each
//! because the paper's rule as written flags fault-free nodes of a short
//! training (docs/peers.md, "`semantic` (Hadoop §4.3)"):
//! - only *slower* than the range counts, and the maximum is widened by
//!   `margin` (the paper: outside min..max either side);
//! - "the highest *scr* values" are every pair scoring at least half the
//!   top score (the paper: the pairs at the top score; a single top pair
//!   names no node, a tie between two unrelated pairs neither);
//! - a node or disk needs `min_score` out-of-range slices, and at least
//!   two of its pairs among the highest (one slow peer is that peer's
//!   trouble as much as its own);
//! - a disk score must be 50 % above every other device's (the paper's
//!   isolation rule of §4.2), not merely the highest: over a few slices
//!   and four file groups, fault-free devices leave a bare range often.

use std::collections::{BTreeMap, BTreeSet};
use std::net::IpAddr;

use super::fleet::{Fleet, LINK_SLICE_WINDOWS};
use super::link::device_at;
use super::metrics::{Cause, Group};
use super::phase::Phase;
use super::{Finding, Method};
use crate::fmt::format_duration_ns;

/// The method's settings (docs/peers.md, "`semantic` (Hadoop §4.3)").
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SemanticParams {
    /// Fewest calls an invocation needs in a slice to be timed (a few
    /// calls' mean is noise).
    pub min_calls: u64,
    /// Out of range: slower than the training maximum × (1 + margin).
    pub margin: f64,
    /// Fewest out-of-range slices a flagged node's top pair, or a disk
    /// score, needs.
    pub min_score: u64,
    /// A disk score must be this much above every other device's (0.5:
    /// the paper's node-isolation "more than a 50 % difference", §4.2).
    pub above_others: f64,
    /// Khadke §4.3 as written: bare min..max, either side, the top score's
    /// pairs only, any score (`margin` 0, `min_score` 1).
    pub strict_paper: bool,
}

impl Default for SemanticParams {
    fn default() -> SemanticParams {
        SemanticParams {
            min_calls: 20,
            margin: 0.25,
            min_score: 2,
            above_others: 0.5,
            strict_paper: false,
        }
    }
}

impl SemanticParams {
    /// The settings the method runs with: these, or the paper's.
    pub fn effective(&self) -> SemanticParams {
        if self.strict_paper {
            SemanticParams {
                min_calls: self.min_calls,
                margin: 0.0,
                min_score: 1,
                above_others: 0.0,
                strict_paper: true,
            }
        } else {
            *self
        }
    }

    /// Whether a time is out of the range `(lo, hi)`.
    fn out(&self, t: f64, (lo, hi): (f64, f64)) -> bool {
        if self.strict_paper {
            t < lo || t > hi
        } else {
            t > hi * (1.0 + self.margin)
        }
    }
}

/// File groups: a disk hog's calls.
const FILE_GROUPS: [Group; 4] = [
    Group::Stat,
    Group::Access,
    Group::FileRead,
    Group::FileWrite,
];

/// Per key, the min and max of the mean time per call over training.
fn learn<K: Ord>(ranges: &mut BTreeMap<K, (f64, f64)>, key: K, t: f64) {
    ranges
        .entry(key)
        .and_modify(|r| *r = (r.0.min(t), r.1.max(t)))
        .or_insert((t, t));
}

/// An unordered pair of node addresses.
type Pair = (IpAddr, IpAddr);

fn pair(a: IpAddr, b: IpAddr) -> Pair {
    (a.min(b), a.max(b))
}

/// Socket invocations of one phase: (device, peer address, link slice) →
/// mean time per call, for those with at least `min_calls` calls. The
/// device's own address and loopback are left out (no pair of nodes).
fn socket_invocations(
    fleet: &Fleet,
    phase: Phase,
    min_calls: u64,
) -> Vec<(usize, IpAddr, IpAddr, u64, f64)> {
    let mut out = Vec::new();
    for (d, device) in fleet.devices.iter().enumerate() {
        let Some(me) = device.addr() else { continue };
        for ((_, slice), table) in fleet.links[d].range((phase, 0)..=(phase, u64::MAX)) {
            for (far, t) in table {
                if *far == me || far.is_loopback() || t.calls < min_calls.max(1) {
                    continue;
                }
                out.push((d, me, *far, *slice, t.total_ns as f64 / t.calls as f64));
            }
        }
    }
    out
}

/// File invocations of one phase: (device, group, slice) → mean time per
/// call, for devices whose files are their own.
fn file_invocations(fleet: &Fleet, phase: Phase, min_calls: u64) -> Vec<(usize, Group, u64, f64)> {
    let mut out = Vec::new();
    for (d, device) in fleet.devices.iter().enumerate() {
        if device.files_over_network() {
            continue;
        }
        for ((_, slice), s) in fleet.slices[d].range((phase, 0)..=(phase, u64::MAX)) {
            for g in FILE_GROUPS {
                let c = &s.groups[g.index()];
                if c.count < min_calls.max(1) {
                    continue;
                }
                out.push((d, g, *slice, c.total_ns as f64 / c.count as f64));
            }
        }
    }
    out
}

/// The node isolated by the pair scores: common to every pair among the
/// highest, and a fleet device. `None` when no node or more than one is.
fn isolate(scr: &BTreeMap<Pair, u64>, params: &SemanticParams) -> Option<(IpAddr, Vec<Pair>)> {
    let top = *scr.values().max()?;
    if top < params.min_score {
        return None;
    }
    let highest: Vec<Pair> = scr
        .iter()
        .filter(|(_, s)| {
            if params.strict_paper {
                **s == top
            } else {
                2 * **s >= top
            }
        })
        .map(|(p, _)| *p)
        .collect();
    if !params.strict_paper && highest.len() < 2 {
        return None;
    }
    let mut common: BTreeSet<IpAddr> = [highest[0].0, highest[0].1].into();
    for (a, b) in &highest[1..] {
        common.retain(|n| n == a || n == b);
    }
    (common.len() == 1).then(|| (*common.iter().next().unwrap_or(&highest[0].0), highest))
}

/// Runs the method on the whole fleet; findings and notes.
pub fn semantic(fleet: &Fleet, params: &SemanticParams) -> (Vec<Finding>, Vec<String>) {
    let params = &params.effective();
    let mut notes = Vec::new();
    let mut findings = Vec::new();

    // Network: per (device, peer) invocation ranges, then pair scores.
    let mut net_ranges: BTreeMap<(usize, IpAddr), (f64, f64)> = BTreeMap::new();
    for (d, _, far, _, t) in socket_invocations(fleet, Phase::Training, params.min_calls) {
        learn(&mut net_ranges, (d, far), t);
    }
    let mut scr: BTreeMap<Pair, u64> = BTreeMap::new();
    // Per pair: the slices out of range and the worst time against its max.
    let mut pair_slices: BTreeMap<Pair, BTreeSet<u64>> = BTreeMap::new();
    let mut worst: BTreeMap<Pair, (f64, f64)> = BTreeMap::new();
    let mut untrained = 0usize;
    let diag = socket_invocations(fleet, Phase::Diagnosis, params.min_calls);
    for (d, me, far, slice, t) in &diag {
        let Some(range) = net_ranges.get(&(*d, *far)) else {
            untrained += 1;
            continue;
        };
        if params.out(*t, *range) {
            let p = pair(*me, *far);
            *scr.entry(p).or_default() += 1;
            pair_slices.entry(p).or_default().insert(*slice);
            let w = worst.entry(p).or_insert((0.0, range.1));
            if *t / range.1.max(1.0) > w.0 / w.1.max(1.0) {
                *w = (*t, range.1);
            }
        }
    }
    if diag.is_empty() && fleet.links.iter().any(|l| !l.is_empty()) {
        notes.push(format!(
            "semantic: no socket peer of a device known by its addr fact with {} calls in a \
             slice of {LINK_SLICE_WINDOWS} windows: network not judged",
            params.min_calls
        ));
    } else if untrained > 0 {
        notes.push(format!(
            "semantic: {untrained} socket invocation(s) (device, peer, slice) with no training \
             slice of that device and peer: not judged"
        ));
    }
    if let Some((node, highest)) = isolate(&scr, params) {
        if let Some(device) = device_at(fleet, node) {
            let mut slices = BTreeSet::new();
            for p in &highest {
                slices.extend(pair_slices.get(p).into_iter().flatten().copied());
            }
            let windows: Vec<u64> = slices.iter().map(|s| s * LINK_SLICE_WINDOWS).collect();
            let top = highest.iter().map(|p| scr[p]).max().unwrap_or(0);
            let (t, max) = highest
                .iter()
                .filter_map(|p| worst.get(p))
                .copied()
                .max_by(|a, b| (a.0 / a.1.max(1.0)).total_cmp(&(b.0 / b.1.max(1.0))))
                .unwrap_or((0.0, 0.0));
            let others: Vec<String> = highest
                .iter()
                .map(|(a, b)| {
                    let far = if *a == node { b } else { a };
                    format!("{far} ({})", scr[&pair(*a, *b)])
                })
                .collect();
            findings.push(Finding {
                device,
                method: Method::Semantic,
                cause: Cause::Network,
                metric: "socket-time".to_string(),
                first_window_unix_ns: fleet.window_start(windows.first().copied().unwrap_or(0)),
                last_window_unix_ns: fleet.window_start(windows.last().copied().unwrap_or(0)),
                score: top as f64,
                windows,
                evidence: format!(
                    "its socket calls ({node}) were out of their training range with every one \
                     of the highest-scoring pairs: {} (out-of-range slices of \
                     {LINK_SLICE_WINDOWS} windows); worst {} per call against a training \
                     maximum of {}",
                    others.join(", "),
                    format_duration_ns(t),
                    format_duration_ns(max)
                ),
            });
        }
    }

    // Disk: per (device, group) invocation ranges, then disk scores.
    let mut file_ranges: BTreeMap<(usize, Group), (f64, f64)> = BTreeMap::new();
    for (d, g, _, t) in file_invocations(fleet, Phase::Training, params.min_calls) {
        learn(&mut file_ranges, (d, g), t);
    }
    let mut disk: BTreeMap<usize, (u64, BTreeSet<u64>, BTreeSet<Group>)> = BTreeMap::new();
    for (d, g, slice, t) in file_invocations(fleet, Phase::Diagnosis, params.min_calls) {
        let Some(range) = file_ranges.get(&(d, g)) else {
            continue;
        };
        if params.out(t, *range) {
            let e = disk.entry(d).or_default();
            e.0 += 1;
            e.1.insert(slice);
            e.2.insert(g);
        }
    }
    let top = disk.values().map(|e| e.0).max().unwrap_or(0);
    let at_top: Vec<usize> = disk
        .iter()
        .filter(|(_, e)| e.0 == top)
        .map(|(d, _)| *d)
        .collect();
    let clear = |d: usize| {
        disk.iter()
            .filter(|(o, _)| **o != d)
            .all(|(_, e)| top as f64 > (1.0 + params.above_others) * e.0 as f64)
    };
    if top >= params.min_score && at_top.len() == 1 && clear(at_top[0]) {
        let d = at_top[0];
        let (score, slices, groups) = &disk[&d];
        let windows: Vec<u64> = slices.iter().map(|s| s * fleet.slice_windows).collect();
        let names: Vec<&str> = groups.iter().map(|g| g.name()).collect();
        let next = disk
            .iter()
            .filter(|(o, _)| **o != d)
            .map(|(_, e)| e.0)
            .max()
            .unwrap_or(0);
        findings.push(Finding {
            device: d,
            method: Method::Semantic,
            cause: Cause::Disk,
            metric: names.join("+"),
            first_window_unix_ns: fleet.window_start(windows.first().copied().unwrap_or(0)),
            last_window_unix_ns: fleet.window_start(windows.last().copied().unwrap_or(0)),
            score: *score as f64,
            windows,
            evidence: format!(
                "its file calls ({}) were out of their training range {score} time(s), in \
                 slices of {} windows; any other device's at most {next} times{}",
                names.join(", "),
                fleet.slice_windows,
                if params.strict_paper {
                    String::new()
                } else {
                    format!(
                        " (flagged when more than {} % above every other)",
                        (params.above_others * 100.0).round()
                    )
                }
            ),
        });
    }
    (findings, notes)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(d: u8) -> IpAddr {
        IpAddr::from([10, 0, 0, d])
    }

    #[test]
    fn the_node_common_to_every_highest_pair_is_isolated() {
        let mut scr = BTreeMap::new();
        scr.insert(pair(ip(1), ip(2)), 6);
        scr.insert(pair(ip(1), ip(3)), 5);
        scr.insert(pair(ip(2), ip(3)), 1);
        let improved = SemanticParams::default();
        assert_eq!(isolate(&scr, &improved).map(|r| r.0), Some(ip(1)));
        // The paper: the top pair alone names two nodes, not one.
        let strict = SemanticParams {
            strict_paper: true,
            ..improved
        }
        .effective();
        assert_eq!(isolate(&scr, &strict), None);
        scr.insert(pair(ip(1), ip(3)), 6);
        assert_eq!(isolate(&scr, &strict).map(|r| r.0), Some(ip(1)));
        // Two unrelated pairs at the top: no node.
        scr.insert(pair(ip(4), ip(5)), 6);
        assert_eq!(isolate(&scr, &strict), None);
        assert_eq!(isolate(&scr, &improved), None);
    }

    #[test]
    fn by_default_only_slower_past_the_margin_is_out() {
        let improved = SemanticParams::default();
        let strict = SemanticParams {
            strict_paper: true,
            ..improved
        }
        .effective();
        assert!(!improved.out(5.0, (10.0, 20.0)));
        assert!(strict.out(5.0, (10.0, 20.0)));
        assert!(!improved.out(24.0, (10.0, 20.0)));
        assert!(strict.out(24.0, (10.0, 20.0)));
        assert!(improved.out(26.0, (10.0, 20.0)));
    }
}
