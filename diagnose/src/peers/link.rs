//! The link method: a slow network link, judged from both ends' socket
//! peer tables rather than from call times.
//!
//! Why not service times: servers and clients that wait in `epoll` read a
//! socket only once data has arrived, so a shaped link does not lengthen
//! their socket reads (the PVFS paper's network faults were missed on dd
//! for the same reason). What a slow link changes is how data arrives: in
//! small pieces, so the side receiving over it moves far fewer bytes per
//! call (a brick behind a 20 mbit link read 3 KB per call where its peers
//! read 28 KB; its clients read its replies 2.5 KB at a time against 28 KB
//! from the other bricks).
//!
//! The method, per slice of [`LINK_SLICE_WINDOWS`] windows:
//! - a *link* is one device's sockets to one peer address, as that device's
//!   windows list it (`peers`), both ends kept apart (each end sees the
//!   bytes it received and sent); a link counts when it carried at least
//!   `min_calls` calls in the slice, and both ends are fleet devices known
//!   by their `addr` fact;
//! - a *pair* of hosts is judged by its slower end: only the receiving end
//!   sees the small pieces (under dd reads a slow brick still writes its
//!   replies 36 KB per call while its clients read them 1.7 KB at a time),
//!   so a host's own ends are normal on half its links and a median over
//!   ends would sit between the two;
//! - each host's (address's) score is the median, over the pairs it is
//!   in, of the pair's bytes per call against the median of the slice's
//!   other pairs (those it is not in), and its deviation `-ln(score)` when
//!   below 1 (a host whose pairs all carry a tenth of the usual bytes per
//!   call deviates by 2.3);
//! - a host is over when its deviation exceeds its threshold, learnt from
//!   training: its largest training deviation × (1 + margin) + floor.
//!   The worst host over is taken first and its links set aside before
//!   the others are scored again, so the far ends of a slow host's links
//!   (which share its slow links) are not blamed with it;
//! - a host over in k of n consecutive judged slices is flagged, cause
//!   network, as the device at that address that lists the most links.

use std::collections::{BTreeMap, BTreeSet};
use std::net::IpAddr;

use super::fleet::{Fleet, Traffic, LINK_SLICE_WINDOWS};
use super::kofn::persistent;
use super::median::median_of;
use super::metrics::Cause;
use super::phase::Phase;
use super::{Finding, Method};

/// The method's settings (docs/peers.md, "The link method").
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LinkParams {
    /// Over-threshold slices needed ...
    pub k: usize,
    /// ... among this many consecutive judged slices.
    pub n: usize,
    /// Fewest calls a link needs in a slice to count (the control
    /// chatter of an idle connection carries a few hundred bytes per call
    /// whatever the link).
    pub min_calls: u64,
    /// The threshold is the training's largest deviation times
    /// (1 + margin) ...
    pub margin: f64,
    /// ... plus this (0.5: a host whose links carry 0.6 of the median
    /// bytes per call is over even if training never saw it deviate).
    pub floor: f64,
}

impl Default for LinkParams {
    fn default() -> LinkParams {
        LinkParams {
            k: 2,
            n: 3,
            min_calls: 100,
            margin: 0.25,
            floor: 0.5,
        }
    }
}

/// Fewest pairs a slice needs to be judged (a median of two says nothing).
const MIN_PAIRS: usize = 3;
/// Fewest pairs a host needs to be in to be scored.
const MIN_HOST_PAIRS: usize = 2;
/// Fewest pairs without the host its own are measured against.
const MIN_OTHER_PAIRS: usize = 1;

/// One slice's links: (observing host, far host) → traffic.
type Links = BTreeMap<(IpAddr, IpAddr), Traffic>;
/// One slice's pairs: (lower address, higher address) → the traffic of
/// the pair's slower end.
type Pairs = BTreeMap<(IpAddr, IpAddr), Traffic>;

/// The fleet's pairs, per phase and slice, between hosts known by address
/// (each end's link counted when it made `min_calls` calls).
fn pairs_by_slice(fleet: &Fleet, phase: Phase, min_calls: u64) -> BTreeMap<u64, Pairs> {
    let mut out: BTreeMap<u64, Links> = BTreeMap::new();
    let known: BTreeSet<IpAddr> = fleet.devices.iter().filter_map(|d| d.addr()).collect();
    for (d, device) in fleet.devices.iter().enumerate() {
        let Some(me) = device.addr() else { continue };
        for ((_, slice), table) in fleet.links[d].range((phase, 0)..=(phase, u64::MAX)) {
            for (far, t) in table {
                if *far == me || !known.contains(far) {
                    continue;
                }
                // Two devices at one address (a file system client and its
                // workload) are one end.
                let sum = out
                    .entry(*slice)
                    .or_default()
                    .entry((me, *far))
                    .or_default();
                sum.calls = sum.calls.saturating_add(t.calls);
                sum.bytes = sum.bytes.saturating_add(t.bytes);
            }
        }
    }
    out.into_iter()
        .filter_map(|(slice, mut links)| {
            links.retain(|_, t| t.calls >= min_calls);
            let pairs = slower_ends(&links);
            (pairs.len() >= MIN_PAIRS).then_some((slice, pairs))
        })
        .collect()
}

fn per_call(t: &Traffic) -> f64 {
    (t.bytes as f64 / t.calls.max(1) as f64).max(1.0)
}

/// Each pair of hosts (lower address first) with the traffic of its end
/// that moved fewer bytes per call: the receiving end of a slow link. A
/// pair seen from one end only has that end's.
fn slower_ends(links: &Links) -> Pairs {
    let mut pairs = Pairs::new();
    for ((me, far), t) in links {
        let pair = ((*me).min(*far), (*me).max(*far));
        pairs
            .entry(pair)
            .and_modify(|kept| {
                if per_call(t) < per_call(kept) {
                    *kept = *t;
                }
            })
            .or_insert(*t);
    }
    pairs
}

/// Each host's deviation in one slice: how far below the median of the
/// other pairs its own pairs carry at their slower end, in bytes per call
/// (0: at or above it). The others only: clients kept waiting on a slow
/// server spend much of a slice on it, and a median over every pair would
/// then be the slow host's own.
fn deviations(pairs: &Pairs) -> BTreeMap<IpAddr, f64> {
    if pairs.len() < MIN_PAIRS {
        return BTreeMap::new();
    }
    let mut all: Vec<f64> = pairs.values().map(per_call).collect();
    all.sort_by(f64::total_cmp);
    let mut mine: BTreeMap<IpAddr, Vec<f64>> = BTreeMap::new();
    for ((a, b), t) in pairs {
        mine.entry(*a).or_default().push(per_call(t));
        mine.entry(*b).or_default().push(per_call(t));
    }
    mine.into_iter()
        .filter(|(_, own)| own.len() >= MIN_HOST_PAIRS)
        .filter_map(|(host, mut own)| {
            own.sort_by(f64::total_cmp);
            let others = median_without(&all, &own)?;
            let mut ratios: Vec<f64> = own.iter().map(|b| b / others).collect();
            Some((host, (-median_of(&mut ratios).ln()).max(0.0)))
        })
        .collect()
}

/// The median of the sorted `all` once the sorted `removed` (values taken
/// from it, with their multiplicity) are left out; `None` when
/// fewer than [`MIN_OTHER_PAIRS`] remain. One walk, no copy: a slice of a
/// large fleet has hundreds of pairs and as many hosts.
fn median_without(all: &[f64], removed: &[f64]) -> Option<f64> {
    let left = all.len().checked_sub(removed.len())?;
    if left < MIN_OTHER_PAIRS {
        return None;
    }
    let (low_rank, high_rank) = ((left - 1) / 2, left / 2);
    let (mut low, mut rank, mut skip) = (0.0, 0, removed.iter().peekable());
    for v in all {
        if skip.next_if(|r| **r == *v).is_some() {
            continue;
        }
        if rank == low_rank {
            low = *v;
        }
        if rank == high_rank {
            return Some((low + v) / 2.0);
        }
        rank += 1;
    }
    None
}

/// The hosts over their threshold in one slice, worst first, each one's
/// pairs set aside before the rest are scored again; with every scored
/// host's deviation as first scored.
fn over_in_slice(
    pairs: &Pairs,
    thresholds: &BTreeMap<IpAddr, f64>,
) -> (BTreeMap<IpAddr, f64>, BTreeMap<IpAddr, f64>) {
    let scored = deviations(pairs);
    let mut over = BTreeMap::new();
    let mut rest = pairs.clone();
    let mut current = scored.clone();
    loop {
        let worst = current
            .iter()
            .filter_map(|(h, dev)| {
                let t = *thresholds.get(h)?;
                (*dev > t).then_some((*h, *dev, dev / t))
            })
            .max_by(|a, b| a.2.total_cmp(&b.2));
        let Some((host, dev, _)) = worst else { break };
        over.insert(host, dev);
        rest.retain(|(a, b), _| *a != host && *b != host);
        current = deviations(&rest);
    }
    (scored, over)
}

/// The device a host's finding names: the one at that address that lists
/// the most links (the process doing the networking, not a workload
/// sharing its address).
pub(super) fn device_at(fleet: &Fleet, host: IpAddr) -> Option<usize> {
    fleet
        .devices
        .iter()
        .enumerate()
        .filter(|(_, d)| d.addr() == Some(host))
        .max_by_key(|(d, _)| (fleet.links[*d].len(), usize::MAX - *d))
        .map(|(d, _)| d)
}

fn format_bytes(b: f64) -> String {
    if b >= 10_000.0 {
        format!("{:.1} KB", b / 1000.0)
    } else {
        format!("{b:.0} B")
    }
}

/// Runs the method on the whole fleet; findings and notes.
pub fn link(fleet: &Fleet, params: &LinkParams) -> (Vec<Finding>, Vec<String>) {
    let mut notes = Vec::new();
    let training = pairs_by_slice(fleet, Phase::Training, params.min_calls);
    let diagnosis = pairs_by_slice(fleet, Phase::Diagnosis, params.min_calls);
    if diagnosis.is_empty() {
        if fleet.links.iter().any(|l| !l.is_empty()) {
            notes.push(format!(
                "link: no slice of {LINK_SLICE_WINDOWS} windows with {MIN_PAIRS} or more pairs \
                 of devices known by their addr fact with links of {} calls: not judged",
                params.min_calls
            ));
        }
        return (Vec::new(), notes);
    }
    let mut worst_trained: BTreeMap<IpAddr, f64> = BTreeMap::new();
    for pairs in training.values() {
        for (host, dev) in deviations(pairs) {
            let w = worst_trained.entry(host).or_insert(0.0);
            *w = w.max(dev);
        }
    }
    let thresholds: BTreeMap<IpAddr, f64> = worst_trained
        .iter()
        .map(|(h, d)| (*h, d * (1.0 + params.margin) + params.floor))
        .collect();
    // Per host, in slice order: (slice, deviation, over).
    let mut judged: BTreeMap<IpAddr, Vec<(u64, f64, bool)>> = BTreeMap::new();
    let mut untrained: BTreeSet<IpAddr> = BTreeSet::new();
    for (slice, pairs) in &diagnosis {
        let (scored, over) = over_in_slice(pairs, &thresholds);
        for (host, dev) in scored {
            if !thresholds.contains_key(&host) {
                untrained.insert(host);
                continue;
            }
            judged
                .entry(host)
                .or_default()
                .push((*slice, dev, over.contains_key(&host)));
        }
    }
    for host in &untrained {
        notes.push(format!(
            "link: host {host}: no training slice with its links: not judged"
        ));
    }
    let mut findings = Vec::new();
    for (host, slices) in &judged {
        let over: Vec<bool> = slices.iter().map(|s| s.2).collect();
        let flagged = persistent(&over, params.k, params.n);
        if flagged.is_empty() {
            continue;
        }
        let Some(device) = device_at(fleet, *host) else {
            continue;
        };
        let threshold = thresholds[host];
        let mean_dev = flagged.iter().map(|i| slices[*i].1).sum::<f64>() / flagged.len() as f64;
        let (mine, others) =
            bytes_per_call(&diagnosis, *host, flagged.iter().map(|i| slices[*i].0));
        let first_window = slices[flagged[0]].0 * LINK_SLICE_WINDOWS;
        let last_window = slices[flagged[flagged.len() - 1]].0 * LINK_SLICE_WINDOWS;
        findings.push(Finding {
            device,
            method: Method::Link,
            cause: Cause::Network,
            metric: "bytes-per-call".to_string(),
            first_window_unix_ns: fleet.window_start(first_window),
            last_window_unix_ns: fleet.window_start(last_window),
            score: mean_dev / threshold,
            windows: flagged
                .iter()
                .map(|i| slices[*i].0 * LINK_SLICE_WINDOWS)
                .collect(),
            evidence: format!(
                "its links ({host}) carried {} per socket call at their slower end against {} \
                 on the other links, \
                 in {} of {} slices of {LINK_SLICE_WINDOWS} windows (over when below 1/{:.1} \
                 of the median, from training)",
                format_bytes(mine),
                format_bytes(others),
                flagged.len(),
                slices.len(),
                threshold.exp()
            ),
        });
    }
    (findings, notes)
}

/// Bytes per call at the slower end of `host`'s pairs and of the others,
/// over `slices`.
fn bytes_per_call(
    diagnosis: &BTreeMap<u64, Pairs>,
    host: IpAddr,
    slices: impl Iterator<Item = u64>,
) -> (f64, f64) {
    let (mut mine, mut others) = (Traffic::default(), Traffic::default());
    for slice in slices {
        let Some(pairs) = diagnosis.get(&slice) else {
            continue;
        };
        for ((a, b), t) in pairs {
            let sum = if *a == host || *b == host {
                &mut mine
            } else {
                &mut others
            };
            sum.calls = sum.calls.saturating_add(t.calls);
            sum.bytes = sum.bytes.saturating_add(t.bytes);
        }
    }
    let per = |t: Traffic| t.bytes as f64 / t.calls.max(1) as f64;
    (per(mine), per(others))
}

#[cfg(test)]
mod tests {
    use super::median_without;

    #[test]
    fn median_without_leaves_out_each_removed_value_once() {
        let all = [1.0, 2.0, 2.0, 3.0, 4.0, 5.0];
        // 1 2 3 4 5 → 3; 1 2 3 4 → 2.5.
        assert_eq!(median_without(&all, &[2.0]), Some(3.0));
        assert_eq!(median_without(&all, &[2.0, 5.0]), Some(2.5));
        assert_eq!(median_without(&all, &[1.0, 2.0, 2.0, 3.0, 4.0]), Some(5.0));
        assert_eq!(median_without(&all, &all), None);
        assert_eq!(median_without(&all, &[]), Some(2.5));
    }
}
