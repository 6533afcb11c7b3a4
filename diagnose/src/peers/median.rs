//! The PVFS method (Kasick et al., §6): per metric, each device's mean
//! service time per window; each window the median over the devices is the
//! reference; a device whose deviation above it exceeds its threshold —
//! learnt in the training windows — in at least k of the last n windows is
//! flagged.

use std::collections::BTreeMap;

use super::fleet::{Device, Fleet};
use super::kofn::{persistent_or_strong, Levels};
use super::metrics::{Metric, FILE_READ, FILE_WRITE, SOCKET_READ};
use super::phase::Phase;
use super::{Finding, Method, PeerSet, Series};
use crate::fmt::format_duration_ns;

/// The method's settings (docs/peers.md, "Thresholds" and "k of n").
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MedianParams {
    /// Over-threshold windows needed ...
    pub k: usize,
    /// ... among this many consecutive judged windows.
    pub n: usize,
    /// The threshold is the training's largest deviation times (1 + margin)
    /// ...
    pub margin: f64,
    /// ... plus this fraction of the metric's typical (median) value in
    /// training, so that a device that never deviated in training is not
    /// flagged for the smallest wobble.
    pub floor: f64,
    /// A server's whole stretch of n windows whose mean deviation passes
    /// the training's highest stretch mean (times 1 + margin, plus the
    /// floor) needs only this many windows over the threshold (`None`: k,
    /// as always). For a fault whose effect comes and goes, e.g. a disk hog
    /// competing with the server for its disk in bursts: the live analysis
    /// sets it to report sooner (docs/peers.md, "Online"); offline, where a
    /// few seconds do not matter, it is off.
    pub strong_k: Option<usize>,
    /// A window counts as over only when the device is also above the
    /// window's median by more than the peer set's usual relative spread:
    /// this quantile (0 to 1) of every device's training deviation
    /// relative to its window's median (`value / median - 1`, 0 below it),
    /// times (1 + margin). The per-device threshold above is one device's
    /// k-of-n level in a short training; on a bursty workload (Spark's
    /// tasks, whose 1 s means swing ×0.1-×10 around the median) that level
    /// is exceeded in a longer diagnosis by chance (docs/peers.md,
    /// "`median`", step 2). 0 leaves it out.
    pub spread: f64,
}

impl Default for MedianParams {
    fn default() -> MedianParams {
        MedianParams {
            k: 4,
            n: 5,
            margin: 0.25,
            floor: 0.25,
            strong_k: None,
            spread: 0.9,
        }
    }
}

/// Fewest devices a window's median is taken over.
pub const MIN_DEVICES: usize = 3;

/// The `quantile` (0 to 1) of the deviations above the window's median,
/// relative to it (`value / median - 1`; 0 for a value at or below it),
/// over every device and window of `t`: how far above the median a
/// device of the set usually is in a window. 0 when nothing to take it
/// from.
fn relative_spread(t: &Table, quantile: f64) -> f64 {
    let mut rel: Vec<f64> = t
        .values
        .iter()
        .flat_map(|v| v.iter().zip(&t.median))
        .filter_map(|(x, m)| {
            let x = (*x)?;
            (*m > 0.0).then(|| (x / m - 1.0).max(0.0))
        })
        .filter(|r| r.is_finite())
        .collect();
    // NaN or 0 and below: no spread (the request refuses NaN already).
    if rel.is_empty() || quantile.is_nan() || quantile <= 0.0 {
        return 0.0;
    }
    let at = ((quantile.min(1.0) * rel.len() as f64) as usize).min(rel.len() - 1);
    *rel.select_nth_unstable_by(at, f64::total_cmp).1
}

/// Which raw metric and which devices a metric takes.
fn raw_of(metric: Metric) -> usize {
    match metric {
        Metric::Dread => FILE_READ,
        Metric::Dwrite => FILE_WRITE,
        Metric::Nsread | Metric::Ncread => SOCKET_READ,
    }
}

fn takes(metric: Metric, device: &Device) -> bool {
    match metric {
        Metric::Dread | Metric::Dwrite => true,
        Metric::Nsread => device.is_server(),
        Metric::Ncread => !device.is_server(),
    }
}

/// The median of `values` (reordered in place; not empty): the middle
/// value in `f64::total_cmp` order, or the mean of the two middle ones.
pub(super) fn median_of(values: &mut [f64]) -> f64 {
    let odd = values.len() % 2 == 1;
    let m = values.len() / 2;
    // Selecting the middle is linear where sorting is not; the values
    // (and so the median) are those sorting would put there.
    let (low, mid, _) = values.select_nth_unstable_by(m, f64::total_cmp);
    let mid = *mid;
    if odd {
        return mid;
    }
    let below = low.iter().copied().max_by(f64::total_cmp).unwrap_or(mid);
    (below + mid) / 2.0
}

/// One metric's values in one phase: the windows where at least
/// [`MIN_DEVICES`] of the devices have calls, each device's mean there
/// (`None`: no calls) and the median.
struct Table {
    windows: Vec<u64>,
    values: Vec<Vec<Option<f64>>>,
    median: Vec<f64>,
}

/// The sorted union of sorted `a` and `b`, without repeats.
fn union_sorted(a: &[u64], b: impl Iterator<Item = u64>) -> Vec<u64> {
    let mut out = Vec::with_capacity(a.len());
    let mut a = a.iter().copied().peekable();
    for x in b {
        while let Some(y) = a.next_if(|y| *y < x) {
            out.push(y);
        }
        a.next_if_eq(&x);
        if out.last() != Some(&x) {
            out.push(x);
        }
    }
    out.extend(a);
    out
}

fn table(fleet: &Fleet, devices: &[usize], metric: Metric, phase: Phase) -> Table {
    let raw = raw_of(metric);
    let range = (phase, 0)..=(phase, u64::MAX);
    // Each device's windows come in order: merged, not sorted (a baseline
    // holds hundreds of windows of a hundred devices).
    let mut windows: Vec<u64> = Vec::new();
    for d in devices {
        let with_calls = fleet.service[*d]
            .range(range.clone())
            .filter(|(_, m)| m[raw].count > 0)
            .map(|((_, w), _)| *w);
        windows = union_sorted(&windows, with_calls);
    }
    // Walked alongside `windows`, in order, rather than looked up.
    let mut values: Vec<Vec<Option<f64>>> = devices
        .iter()
        .map(|d| {
            let mut v = vec![None; windows.len()];
            let mut at = 0;
            for ((_, w), m) in fleet.service[*d].range(range.clone()) {
                while at < windows.len() && windows[at] < *w {
                    at += 1;
                }
                if at < windows.len() && windows[at] == *w {
                    v[at] = m[raw].mean_ns();
                }
            }
            v
        })
        .collect();
    let mut keep = Vec::with_capacity(windows.len());
    let mut median = Vec::with_capacity(windows.len());
    let mut column = Vec::with_capacity(devices.len());
    for i in 0..windows.len() {
        column.clear();
        column.extend(values.iter().filter_map(|v| v[i]));
        keep.push(column.len() >= MIN_DEVICES);
        if column.len() >= MIN_DEVICES {
            median.push(median_of(&mut column));
        }
    }
    let mut k = keep.iter();
    windows.retain(|_| *k.next().unwrap_or(&false));
    for v in &mut values {
        let mut k = keep.iter();
        v.retain(|_| *k.next().unwrap_or(&false));
    }
    Table {
        windows,
        values,
        median,
    }
}

/// A training table as learnt at some generation of the fleet's training
/// windows ([`Fleet::training_changes`]): its columns (the windows kept:
/// each device's mean, the median), which depend on that window's values
/// alone, so only windows changed since are computed again.
#[derive(Debug, Default)]
pub(super) struct Learnt {
    devices_epoch: u64,
    generation: u64,
    columns: BTreeMap<u64, (Vec<Option<f64>>, f64)>,
    /// Per device (as `devices`), its deviations' levels ([`Levels`]).
    levels: Vec<Levels>,
}

/// Per device of `devices` (the rows of `train`, their training table):
/// the sustained level of its deviations above the median (floored at 0)
/// and their highest stretch mean ([`super::kofn::sustained`],
/// [`super::kofn::highest_mean`]), gone on from the last judging of the
/// fleet while its training only grew ([`Levels`]).
fn training_levels(
    fleet: &Fleet,
    devices: &[usize],
    metric: Metric,
    train: &Table,
    params: &MedianParams,
) -> Vec<(Option<f64>, Option<f64>)> {
    let mut cache = match fleet.learnt.median.lock() {
        Ok(c) => c,
        Err(poisoned) => poisoned.into_inner(),
    };
    let learnt = cache.entry((devices.to_vec(), raw_of(metric))).or_default();
    learnt.levels.resize_with(devices.len(), Levels::default);
    let mut devs = Vec::with_capacity(train.median.len());
    train
        .values
        .iter()
        .zip(&mut learnt.levels)
        .map(|(v, levels)| {
            devs.clear();
            devs.extend(
                v.iter()
                    .zip(&train.median)
                    .filter_map(|(x, m)| x.map(|x| (x - m).max(0.0))),
            );
            levels.of(&devs, params.k, params.n)
        })
        .collect()
}

/// The training table of `devices` on `metric`, from what was learnt at
/// an earlier judging of the fleet when it is kept (the live analysis'
/// baseline): the windows changed since are computed again, those gone
/// dropped; what [`table`] gives.
fn training_table(fleet: &Fleet, devices: &[usize], metric: Metric) -> Table {
    let raw = raw_of(metric);
    let changes = fleet.training_changes();
    let mut cache = match fleet.learnt.median.lock() {
        Ok(c) => c,
        Err(poisoned) => poisoned.into_inner(),
    };
    // Peer sets' device lists change seldom; an old one's is forgotten.
    if cache.len() > 64 {
        cache.clear();
    }
    let learnt = cache.entry((devices.to_vec(), raw)).or_default();
    if learnt.columns.is_empty() || learnt.devices_epoch != changes.devices_epoch {
        let t = table(fleet, devices, metric, Phase::Training);
        learnt.columns = t
            .windows
            .iter()
            .enumerate()
            .map(|(i, w)| (*w, (t.values.iter().map(|v| v[i]).collect(), t.median[i])))
            .collect();
    } else {
        let first = changes.changed.keys().next().copied().unwrap_or(u64::MAX);
        learnt.columns = learnt.columns.split_off(&first);
        let mut column = Vec::with_capacity(devices.len());
        for (w, _) in changes
            .changed
            .iter()
            .filter(|(_, g)| **g > learnt.generation)
        {
            let values: Vec<Option<f64>> = devices
                .iter()
                .map(|d| {
                    fleet.service[*d]
                        .get(&(Phase::Training, *w))
                        .and_then(|m| m[raw].mean_ns())
                })
                .collect();
            column.clear();
            column.extend(values.iter().flatten().copied());
            if column.len() >= MIN_DEVICES {
                learnt.columns.insert(*w, (values, median_of(&mut column)));
            } else {
                learnt.columns.remove(w);
            }
        }
    }
    learnt.devices_epoch = changes.devices_epoch;
    learnt.generation = changes.generation;
    let mut out = Table {
        windows: Vec::with_capacity(learnt.columns.len()),
        values: vec![Vec::with_capacity(learnt.columns.len()); devices.len()],
        median: Vec::with_capacity(learnt.columns.len()),
    };
    for (w, (values, median)) in &learnt.columns {
        out.windows.push(*w);
        out.median.push(*median);
        for (row, v) in out.values.iter_mut().zip(values) {
            row.push(*v);
        }
    }
    out
}

/// What the median method found in one peer set.
#[derive(Debug)]
pub struct MedianResult {
    /// Flagged devices, one finding per (device, metric).
    pub findings: Vec<Finding>,
    /// Every metric's diagnosis time series (for the HTML report).
    pub series: Vec<Series>,
    /// What could not be judged, and why.
    pub notes: Vec<String>,
}

/// Runs the method on one peer set.
pub fn median(fleet: &Fleet, set: &PeerSet, params: &MedianParams) -> MedianResult {
    let mut out = MedianResult {
        findings: Vec::new(),
        series: Vec::new(),
        notes: Vec::new(),
    };
    for metric in Metric::ALL {
        let devices: Vec<usize> = set
            .devices
            .iter()
            .copied()
            .filter(|d| takes(metric, &fleet.devices[*d]))
            .collect();
        let train = training_table(fleet, &devices, metric);
        let diag = table(fleet, &devices, metric, Phase::Diagnosis);
        if diag.windows.is_empty() {
            let with_calls = devices
                .iter()
                .filter(|d| {
                    fleet.service[**d]
                        .range((Phase::Diagnosis, 0)..=(Phase::Diagnosis, u64::MAX))
                        .any(|(_, m)| m[raw_of(metric)].count > 0)
                })
                .count();
            if with_calls > 0 {
                out.notes.push(format!(
                    "median: {} of {}: no window where {MIN_DEVICES} or more devices made \
                     these calls ({with_calls} device(s) made them): not judged",
                    metric.name(),
                    set.name()
                ));
            }
            continue;
        }
        if train.windows.is_empty() {
            out.notes.push(format!(
                "median: {} of {}: no training window where {MIN_DEVICES} or more devices made \
                 these calls: not judged",
                metric.name(),
                set.name()
            ));
            continue;
        }
        let typical = median_of(&mut train.median.clone());
        // Over the median by more than the set's usual relative spread,
        // whatever each device's own training level (see `spread`).
        let spread = relative_spread(&train, params.spread) * (1.0 + params.margin);
        // Servers only: a client's slow reads are mostly its servers'
        // (their symptoms), and a client reported sooner than the server's
        // own finding can be filed under it would name the symptom first
        // (docs/peers.md, "median", "Bursts").
        let strong_k_of = |d: usize| match params.strong_k {
            Some(k) if k < params.k && fleet.devices[d].is_server() => k,
            _ => params.k,
        };
        // Per device: the threshold, and the stretch mean's when the burst
        // rule judges it (infinite otherwise: never passed). Both learn
        // from deviations floored at 0 while the stretches judged keep
        // their windows below the median: a dip weighs against the burst
        // rule, never for it.
        let thresholds: Vec<Option<(f64, f64)>> =
            training_levels(fleet, &devices, metric, &train, params)
                .into_iter()
                .zip(&devices)
                .map(|((sustained, highest_mean), d)| {
                    let level = |d: f64| d * (1.0 + params.margin) + params.floor * typical;
                    let threshold = level(sustained?);
                    let mean_threshold = if strong_k_of(*d) < params.k {
                        level(highest_mean?)
                    } else {
                        f64::INFINITY
                    };
                    Some((threshold, mean_threshold))
                })
                .collect();
        for (i, d) in devices.iter().enumerate() {
            let Some((threshold, mean_threshold)) = thresholds[i] else {
                if diag.values[i].iter().any(Option::is_some) {
                    out.notes.push(format!(
                        "median: {} of device {}: no training window: not judged",
                        metric.name(),
                        fleet.devices[*d].id
                    ));
                }
                continue;
            };
            let judged: Vec<(usize, f64)> = diag.values[i]
                .iter()
                .enumerate()
                .filter_map(|(w, x)| x.map(|x| (w, x - diag.median[w])))
                .collect();
            let over: Vec<bool> = judged
                .iter()
                .map(|(w, dev)| *dev > threshold && *dev > spread * diag.median[*w])
                .collect();
            let deviations: Vec<f64> = judged.iter().map(|(_, dev)| *dev).collect();
            let flagged = persistent_or_strong(
                &over,
                &deviations,
                mean_threshold,
                params.k,
                strong_k_of(*d),
                params.n,
            );
            if flagged.is_empty() {
                continue;
            }
            let at = |j: usize| judged[j].0;
            let first = diag.windows[at(flagged[0])];
            let last = diag.windows[at(flagged[flagged.len() - 1])];
            let score = flagged
                .iter()
                .map(|j| judged[*j].1 / threshold)
                .sum::<f64>()
                / flagged.len() as f64;
            let mean_of = |f: &dyn Fn(usize) -> f64| {
                flagged.iter().map(|j| f(*j)).sum::<f64>() / flagged.len() as f64
            };
            let value = mean_of(&|j| diag.median[at(j)] + judged[j].1);
            let reference = mean_of(&|j| diag.median[at(j)]);
            out.findings.push(Finding {
                device: *d,
                method: Method::Median,
                cause: metric.cause(fleet.devices[*d].files_over_network()),
                metric: metric.name().to_string(),
                first_window_unix_ns: fleet.window_start(first),
                last_window_unix_ns: fleet.window_start(last),
                score,
                windows: flagged.iter().map(|j| diag.windows[at(*j)]).collect(),
                evidence: format!(
                    "{} mean {} against the median {} of {} {} devices in {} of {} windows \
                     (threshold: median + {}, from training)",
                    metric.name(),
                    format_duration_ns(value),
                    format_duration_ns(reference),
                    devices.len(),
                    set.name(),
                    flagged.len(),
                    judged.len(),
                    format_duration_ns(threshold)
                ),
            });
        }
        out.series.push(Series {
            program: set.name(),
            metric: metric.name().to_string(),
            devices: devices.clone(),
            windows: diag.windows,
            values: diag.values,
            median: diag.median,
            // The plot's line: the per-window threshold (the mean one
            // judges stretches, not windows).
            thresholds: thresholds.iter().map(|t| t.map(|(w, _)| w)).collect(),
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::{median_of, union_sorted};

    #[test]
    fn the_median_selected_is_the_median_of_the_sorted_values() {
        let sorted_median = |v: &[f64]| {
            let mut v = v.to_vec();
            v.sort_by(f64::total_cmp);
            let m = v.len() / 2;
            if v.len() % 2 == 1 {
                v[m]
            } else {
                (v[m - 1] + v[m]) / 2.0
            }
        };
        let mut x = 7u64;
        for len in 1..40 {
            let v: Vec<f64> = (0..len)
                .map(|_| {
                    x = x
                        .wrapping_mul(6364136223846793005)
                        .wrapping_add(1442695040888963407);
                    // Repeats on purpose: few distinct values.
                    ((x >> 33) % 13) as f64 * 1.5
                })
                .collect();
            assert_eq!(median_of(&mut v.clone()), sorted_median(&v), "{v:?}");
        }
    }

    #[test]
    fn windows_are_merged_in_order_without_repeats() {
        assert_eq!(union_sorted(&[], [3, 5].into_iter()), vec![3, 5]);
        assert_eq!(union_sorted(&[1, 4, 9], [].into_iter()), vec![1, 4, 9]);
        assert_eq!(
            union_sorted(&[1, 4, 9], [0, 4, 5, 9, 12].into_iter()),
            vec![0, 1, 4, 5, 9, 12]
        );
    }
}
