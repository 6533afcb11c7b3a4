//! The Hadoop method (Khadke et al., §4.2) on slices of windows: per
//! (device, syscall group) the log2 latency histogram and total time of
//! each slice; the training slices give each device an admissible range
//! (minimum..maximum, widened by a margin) per bucket and for the total;
//! the paper's rules then name the culprit:
//! - disk-hog: the device with the most time in `stat` (our traces also
//!   have file reads and writes, and `access`) is above its range and more
//!   than 25 % above every other device (for `stat`, its `access` time must
//!   be above its range too, when it makes `access` calls);
//! - network-hog: the same on `connect` and socket reads;
//! - node isolation: the out-of-range amount of the `bind`, `socket` and
//!   `execve` histograms, summed over buckets, more than 50 % above every
//!   other device's; `accept` total time out of range (and, unlike the
//!   paper, also 50 % further out than every other device, else one noisy
//!   slice flags it) on a device not found network-hogged in that slice.
//!   Cause `unknown`.
//!
//! A (device, group) is reported when its rule fires in at least k of the
//! last n judged slices.
//!
//! [`HistogramParams::strict_paper`] runs §4.2 as written instead: bare
//! min..max, `stat`+`access` and `connect` only, "outside" on either side,
//! the `accept` rule on every device out of range unless any device was
//! network-hogged in the slice, and one firing flags.

use std::collections::BTreeMap;

use agent_core::histogram::BUCKETS;

use super::fleet::{Fleet, Slice};
use super::kofn::persistent;
use super::median::MIN_DEVICES;
use super::metrics::{Cause, Group};
use super::phase::Phase;
use super::{Finding, Method, PeerSet};
use crate::fmt::format_duration_ns;

/// The method's settings (docs/peers.md).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct HistogramParams {
    /// Rule firings needed ...
    pub k: usize,
    /// ... among this many consecutive judged slices.
    pub n: usize,
    /// The admissible range is training's min × (1 − margin) .. max × (1 +
    /// margin).
    pub range_margin: f64,
    /// disk-hog / network-hog: how far above every other device (0.25: the
    /// paper's 25 %).
    pub above_others: f64,
    /// node isolation: how far the out-of-range amount must exceed every
    /// other device's (0.5: the paper's 50 %).
    pub isolation_above_others: f64,
    /// Khadke §4.2 exactly, none of this method's departures (docs/peers.md,
    /// "`histogram` (Hadoop)"): bare min..max ranges (`range_margin` taken
    /// as 0), `stat` (with `access`) and `connect` only, "outside" on
    /// either side of a range, the `access` rule even on a device that
    /// makes no `access` calls, the `accept` rule on every device out of
    /// range unless a network hog was found in the slice, and one firing
    /// flags (`k` = `n` = 1).
    pub strict_paper: bool,
}

impl Default for HistogramParams {
    fn default() -> HistogramParams {
        HistogramParams {
            k: 2,
            n: 3,
            range_margin: 0.1,
            above_others: 0.25,
            isolation_above_others: 0.5,
            strict_paper: false,
        }
    }
}

impl HistogramParams {
    /// The settings the method runs with: these, or the paper's where
    /// [`Self::strict_paper`] says so.
    pub fn effective(&self) -> HistogramParams {
        if self.strict_paper {
            HistogramParams {
                k: 1,
                n: 1,
                range_margin: 0.0,
                above_others: 0.25,
                isolation_above_others: 0.5,
                strict_paper: true,
            }
        } else {
            *self
        }
    }
}

/// What the histogram method found in one peer set.
#[derive(Debug)]
pub struct HistogramResult {
    /// Flagged (device, group)s.
    pub findings: Vec<Finding>,
    /// What could not be judged, and why.
    pub notes: Vec<String>,
}

/// A slice scaled to a full slice's windows: totals and bucket counts.
struct Scaled {
    total: [f64; Group::COUNT],
    buckets: [[f64; BUCKETS]; Group::COUNT],
    calls: [f64; Group::COUNT],
}

fn scaled(slice: &Slice, slice_windows: u64) -> Scaled {
    let mut out = Scaled {
        total: [0.0; Group::COUNT],
        buckets: [[0.0; BUCKETS]; Group::COUNT],
        calls: [0.0; Group::COUNT],
    };
    scale_into(slice, slice_windows, &mut out);
    out
}

fn scale_into(slice: &Slice, slice_windows: u64, out: &mut Scaled) {
    let f = slice_windows as f64 / slice.windows.max(1) as f64;
    for (g, c) in slice.groups.iter().enumerate() {
        out.total[g] = c.total_ns as f64 * f;
        out.calls[g] = c.count as f64 * f;
        for (b, n) in c.histogram.iter().enumerate() {
            out.buckets[g][b] = *n as f64 * f;
        }
    }
}

/// A device's admissible range, learnt from its training slices.
#[derive(Clone)]
struct Admissible {
    total: [(f64, f64); Group::COUNT],
    buckets: [[(f64, f64); BUCKETS]; Group::COUNT],
    calls: [f64; Group::COUNT],
}

impl Admissible {
    /// The bare min..max (and largest calls) of `slices`, scaled, gone on
    /// from `bounds` (those of the slices before them) or, without, started
    /// at the first slice: a fold in slice order, so the bounds of a
    /// device's slices are the same to the bit whether taken in one go or
    /// gone on from those of its first slices ([`learnt_range`]).
    fn bounds<'a>(
        mut bounds: Option<Admissible>,
        slices: impl Iterator<Item = &'a Slice>,
        slice_windows: u64,
    ) -> Option<Admissible> {
        // Scaled one at a time into one buffer: the live analysis learns
        // from hundreds of training slices per device at every tick.
        let mut buffer: Option<Scaled> = None;
        for slice in slices {
            let s = match &mut buffer {
                Some(s) => {
                    scale_into(slice, slice_windows, s);
                    &*s
                }
                None => &*buffer.insert(scaled(slice, slice_windows)),
            };
            let a = bounds.get_or_insert_with(|| {
                let mut a = Admissible {
                    total: [(0.0, 0.0); Group::COUNT],
                    buckets: [[(0.0, 0.0); BUCKETS]; Group::COUNT],
                    calls: [0.0; Group::COUNT],
                };
                for g in 0..Group::COUNT {
                    a.total[g] = (s.total[g], s.total[g]);
                    for b in 0..BUCKETS {
                        a.buckets[g][b] = (s.buckets[g][b], s.buckets[g][b]);
                    }
                }
                a
            });
            for g in 0..Group::COUNT {
                let t = &mut a.total[g];
                *t = (t.0.min(s.total[g]), t.1.max(s.total[g]));
                a.calls[g] = a.calls[g].max(s.calls[g]);
                for b in 0..BUCKETS {
                    let r = &mut a.buckets[g][b];
                    *r = (r.0.min(s.buckets[g][b]), r.1.max(s.buckets[g][b]));
                }
            }
        }
        bounds
    }

    /// The admissible range: the bounds widened by `margin`.
    fn widened(mut self, margin: f64) -> Admissible {
        let widen = |(lo, hi): (f64, f64)| (lo * (1.0 - margin), hi * (1.0 + margin));
        for g in 0..Group::COUNT {
            self.total[g] = widen(self.total[g]);
            for b in 0..BUCKETS {
                self.buckets[g][b] = widen(self.buckets[g][b]);
            }
        }
        self
    }

    fn above(&self, g: Group, total: f64) -> bool {
        total > self.total[g.index()].1
    }

    /// The paper's "outside the threshold": below the minimum or above the
    /// maximum.
    fn outside_total(&self, g: Group, total: f64) -> bool {
        Admissible::outside(total, self.total[g.index()]) > 0.0
    }

    /// How far `x` lies outside `(lo, hi)`.
    fn outside(x: f64, (lo, hi): (f64, f64)) -> f64 {
        if x > hi {
            x - hi
        } else if x < lo {
            lo - x
        } else {
            0.0
        }
    }

    /// The out-of-range amount of a group's histogram, summed over buckets.
    fn histogram_outside(&self, g: Group, s: &Scaled) -> f64 {
        (0..BUCKETS)
            .map(|b| Admissible::outside(s.buckets[g.index()][b], self.buckets[g.index()][b]))
            .sum()
    }
}

/// A device's slices of a phase, by index; slices with fewer than half
/// their windows are left out (a device that started or stopped within
/// them).
fn full_slices(fleet: &Fleet, d: usize, phase: Phase) -> impl Iterator<Item = (u64, &Slice)> {
    let half = fleet.slice_windows.div_ceil(2);
    fleet.slices[d]
        .range((phase, 0)..=(phase, u64::MAX))
        .filter(move |(_, s)| s.windows >= half)
        .map(|((_, i), s)| (*i, &**s))
}

/// What the method learnt from one device's training slices at an
/// earlier judging of the fleet (the live analysis' baseline, judged at
/// every tick): the bounds of its slices before `before`, valid while the
/// fleet's training windows there are unchanged.
#[derive(Clone, Default)]
pub(super) struct Learnt {
    /// The fleet's training as it was ([`Fleet::training_changes`]).
    devices_epoch: u64,
    evictions: u64,
    generation: u64,
    slice_windows: u64,
    /// The first training slice not in `bounds` (the newest then: it
    /// may still fill up).
    before: u64,
    /// The bare bounds of the full training slices before it.
    bounds: Option<Admissible>,
}

/// Device `d`'s admissible range, from its full training slices: their
/// bounds widened by `margin`, gone on from the bounds kept at the last
/// judging when no training window of the slices they cover changed
/// since, and no device moved or window was evicted. `first_changed`
/// gives the first training window index changed after a generation.
fn learnt_range(
    fleet: &Fleet,
    d: usize,
    margin: f64,
    first_changed: &mut impl FnMut(u64) -> u64,
) -> Option<Admissible> {
    let changes = fleet.training_changes();
    let mut cache = match fleet.learnt.histogram.lock() {
        Ok(c) => c,
        Err(poisoned) => poisoned.into_inner(),
    };
    // Device indices are at most the fleet's devices (kept bounded as
    // they change meaning: an index gone is forgotten).
    cache.retain(|i, _| *i < fleet.devices.len());
    let learnt = cache.entry(d).or_default();
    let valid = learnt.devices_epoch == changes.devices_epoch
        && learnt.evictions == changes.evictions
        && learnt.slice_windows == fleet.slice_windows
        && first_changed(learnt.generation) >= learnt.before.saturating_mul(fleet.slice_windows);
    if !valid {
        *learnt = Learnt {
            devices_epoch: changes.devices_epoch,
            evictions: changes.evictions,
            generation: 0,
            slice_windows: fleet.slice_windows,
            before: 0,
            bounds: None,
        };
    }
    let last = fleet.slices[d]
        .range((Phase::Training, 0)..=(Phase::Training, u64::MAX))
        .next_back()
        .map_or(0, |((_, i), _)| *i)
        .max(learnt.before);
    let slices = |from: u64, to: u64| {
        full_slices(fleet, d, Phase::Training)
            .filter(move |(i, _)| *i >= from && *i < to)
            .map(|(_, s)| s)
    };
    learnt.bounds = Admissible::bounds(
        learnt.bounds.take(),
        slices(learnt.before, last),
        fleet.slice_windows,
    );
    learnt.before = last;
    learnt.generation = changes.generation;
    let all = Admissible::bounds(
        learnt.bounds.clone(),
        slices(last, u64::MAX),
        fleet.slice_windows,
    );
    Some(all?.widened(margin))
}

/// The first training window index changed after `generation` (`changed`:
/// [`Fleet::training_changes`]'), `u64::MAX` for none.
fn first_changed_after(changed: &BTreeMap<u64, u64>, generation: u64) -> u64 {
    changed
        .iter()
        .find(|(_, g)| **g > generation)
        .map_or(u64::MAX, |(i, _)| *i)
}

/// The slices of a device (as [`full_slices`]), scaled.
fn slices_of(fleet: &Fleet, d: usize, phase: Phase) -> BTreeMap<u64, Scaled> {
    full_slices(fleet, d, phase)
        .map(|(i, s)| (i, scaled(s, fleet.slice_windows)))
        .collect()
}

/// One firing of a rule.
struct Fire {
    cause: Cause,
    score: f64,
    value: f64,
    limit: f64,
}

/// Runs the method on one peer set.
pub fn histogram(fleet: &Fleet, set: &PeerSet, params: &HistogramParams) -> HistogramResult {
    let params = &params.effective();
    let strict = params.strict_paper;
    let mut notes = Vec::new();
    let mut devices = Vec::new();
    let mut ranges = Vec::new();
    let mut diag = Vec::new();
    // The first training window changed after a generation, per
    // generation asked (the devices' are mostly one).
    let changes = fleet.training_changes();
    let mut asked: Vec<(u64, u64)> = Vec::new();
    let mut first_changed = |generation: u64| {
        if let Some((_, first)) = asked.iter().find(|(g, _)| *g == generation) {
            return *first;
        }
        let first = first_changed_after(changes.changed, generation);
        asked.push((generation, first));
        first
    };
    for d in &set.devices {
        match learnt_range(fleet, *d, params.range_margin, &mut first_changed) {
            Some(a) => {
                devices.push(*d);
                ranges.push(a);
                diag.push(slices_of(fleet, *d, Phase::Diagnosis));
            }
            None => notes.push(format!(
                "histogram: device {} ({}): no training slice of {} windows: not judged",
                fleet.devices[*d].id,
                set.name(),
                fleet.slice_windows
            )),
        }
    }
    let mut slices: Vec<u64> = diag.iter().flat_map(|m| m.keys().copied()).collect();
    slices.sort_unstable();
    slices.dedup();
    // Per (device position, group): per judged slice, the firing if any.
    let mut fires: BTreeMap<(usize, Group), Vec<Option<Fire>>> = BTreeMap::new();
    let mut judged = Vec::new();
    for s in &slices {
        let present: Vec<usize> = (0..devices.len())
            .filter(|i| diag[*i].contains_key(s))
            .collect();
        if present.len() < MIN_DEVICES {
            continue;
        }
        let at = judged.len();
        judged.push(*s);
        let mut fire = |i: usize, g: Group, f: Fire| {
            let v = fires.entry((i, g)).or_default();
            v.resize_with(at + 1, || None);
            v[at] = Some(f);
        };
        let slice = |i: usize| &diag[i][s];
        let mut network_hog = vec![false; devices.len()];
        // disk-hog and network-hog: the busiest device, out of range and
        // well above every other. The paper has stat (with access) and
        // connect only; our traces also carry file and socket reads and
        // writes per fd kind, which a disk or network fault slows first.
        let rules: &[(Group, Cause)] = if strict {
            &[(Group::Stat, Cause::Disk), (Group::Connect, Cause::Network)]
        } else {
            &[
                (Group::Stat, Cause::Disk),
                (Group::Access, Cause::Disk),
                (Group::FileRead, Cause::Disk),
                (Group::FileWrite, Cause::Disk),
                (Group::Connect, Cause::Network),
                (Group::SocketRead, Cause::Network),
            ]
        };
        for &(g, cause) in rules {
            let gi = g.index();
            let Some(&top) = present
                .iter()
                .max_by(|a, b| slice(**a).total[gi].total_cmp(&slice(**b).total[gi]))
            else {
                continue;
            };
            let value = slice(top).total[gi];
            let out = if strict {
                ranges[top].outside_total(g, value)
            } else {
                value > 0.0 && ranges[top].above(g, value)
            };
            if !out {
                continue;
            }
            let others_below = present
                .iter()
                .filter(|o| **o != top)
                .all(|o| value > (1.0 + params.above_others) * slice(*o).total[gi]);
            if !others_below {
                continue;
            }
            if g == Group::Stat {
                let a = Group::Access;
                let access = slice(top).total[a.index()];
                if strict {
                    // "and the total timing in access() on max is also
                    // outside threshold": a device that makes no access
                    // calls never is.
                    if !ranges[top].outside_total(a, access) {
                        continue;
                    }
                } else {
                    let uses_access =
                        ranges[top].calls[a.index()] > 0.0 || slice(top).calls[a.index()] > 0.0;
                    if uses_access && !ranges[top].above(a, access) {
                        continue;
                    }
                }
            }
            // A file system client's file calls go to its servers.
            let cause = if cause == Cause::Disk && fleet.devices[devices[top]].files_over_network()
            {
                Cause::Network
            } else {
                cause
            };
            if cause == Cause::Network {
                network_hog[top] = true;
            }
            let limit = ranges[top].total[gi].1;
            fire(
                top,
                g,
                Fire {
                    cause,
                    score: value / limit.max(1.0),
                    value,
                    limit,
                },
            );
        }
        // The paper skips the accept rule when it "arrived from a possible
        // network-hog": any device found network-hogged in this slice.
        let any_network_hog = network_hog.iter().any(|h| *h);
        // Node isolation.
        for g in [Group::Bind, Group::Socket, Group::Execve, Group::Accept] {
            let amount: Vec<(usize, f64)> = present
                .iter()
                .map(|i| {
                    let a = if g == Group::Accept {
                        Admissible::outside(slice(*i).total[g.index()], ranges[*i].total[g.index()])
                    } else {
                        ranges[*i].histogram_outside(g, slice(*i))
                    };
                    (*i, a)
                })
                .collect();
            for (i, a) in &amount {
                let hogged = if strict {
                    any_network_hog
                } else {
                    network_hog[*i]
                };
                if *a <= 0.0 || (g == Group::Accept && hogged) {
                    continue;
                }
                // The paper marks every device whose accept time is out of
                // range; one noisy slice then flags it, so by default it
                // must also be 50 % further out than every other device.
                let beyond = (strict && g == Group::Accept)
                    || amount
                        .iter()
                        .filter(|(o, _)| o != i)
                        .all(|(_, b)| *a > (1.0 + params.isolation_above_others) * b);
                if !beyond {
                    continue;
                }
                let (value, limit) = if g == Group::Accept {
                    (slice(*i).total[g.index()], ranges[*i].total[g.index()].1)
                } else {
                    (*a, ranges[*i].calls[g.index()])
                };
                fire(
                    *i,
                    g,
                    Fire {
                        cause: Cause::Unknown,
                        score: 1.0 + a / limit.max(1.0),
                        value,
                        limit,
                    },
                );
            }
        }
    }
    let mut findings = Vec::new();
    for ((i, g), mut v) in fires {
        v.resize_with(judged.len(), || None);
        let over: Vec<bool> = v.iter().map(Option::is_some).collect();
        let flagged = persistent(&over, params.k, params.n);
        if flagged.is_empty() {
            continue;
        }
        let hits: Vec<&Fire> = flagged.iter().filter_map(|j| v[*j].as_ref()).collect();
        let n = hits.len() as f64;
        let score = hits.iter().map(|f| f.score).sum::<f64>() / n;
        let value = hits.iter().map(|f| f.value).sum::<f64>() / n;
        let limit = hits.iter().map(|f| f.limit).sum::<f64>() / n;
        let cause = hits[0].cause;
        let first = judged[flagged[0]] * fleet.slice_windows;
        let last = judged[flagged[flagged.len() - 1]] * fleet.slice_windows;
        let what = match (g, cause) {
            (Group::Bind | Group::Socket | Group::Execve, _) => format!(
                "{} histogram out of its training range by {} calls per slice (training at most \
                 {} calls), more than {} % beyond every other device",
                g.name(),
                crate::fmt::format_number(value.round()),
                crate::fmt::format_number(limit.round()),
                (params.isolation_above_others * 100.0).round()
            ),
            (Group::Accept, _) => format!(
                "{} time {} per slice, outside its training range (max {}){}",
                g.name(),
                format_duration_ns(value),
                format_duration_ns(limit),
                if strict {
                    ""
                } else {
                    " and further out than every other device"
                }
            ),
            _ => format!(
                "{} time {} per slice, {} its training range (max {}) and more than {} % above \
                 every other device",
                g.name(),
                format_duration_ns(value),
                if strict { "outside" } else { "above" },
                format_duration_ns(limit),
                (params.above_others * 100.0).round()
            ),
        };
        findings.push(Finding {
            device: devices[i],
            method: Method::Histogram,
            cause,
            metric: g.name().to_string(),
            first_window_unix_ns: fleet.window_start(first),
            last_window_unix_ns: fleet.window_start(last),
            score,
            windows: flagged
                .iter()
                .map(|j| judged[*j] * fleet.slice_windows)
                .collect(),
            evidence: format!(
                "{what}, in {} of {} slices of {} windows{}",
                flagged.len(),
                judged.len(),
                fleet.slice_windows,
                if strict {
                    " (Khadke §4.2 as written)"
                } else {
                    ""
                }
            ),
        });
    }
    HistogramResult { findings, notes }
}

#[cfg(test)]
mod tests {
    use agent_core::Summary;
    use fixtures::synth::FleetSpec;

    use super::{first_changed_after, full_slices, learnt_range, Admissible};
    use crate::peers::fleet::{Fleet, Range};
    use crate::peers::phase::Phase;

    /// Every bound, bit for bit.
    fn bits(a: &Option<Admissible>) -> Vec<u64> {
        a.iter()
            .flat_map(|a| {
                let pairs = a.total.iter().chain(a.buckets.iter().flatten());
                pairs
                    .flat_map(|(lo, hi)| [lo.to_bits(), hi.to_bits()])
                    .chain(a.calls.iter().map(|c| c.to_bits()))
                    .collect::<Vec<u64>>()
            })
            .collect()
    }

    /// The ranges kept between judgings of a fleet whose training grows a
    /// few windows at a time (windows of two indices a judging, so a slice
    /// fills over judgings), whose oldest windows are evicted (the cut
    /// inside a slice), with a device that joins late and a late window
    /// in an older slice: after every judging
    /// they are the ranges learnt from scratch, bit for bit; and between
    /// evictions the bounds kept are gone on from (a bound planted in
    /// them stays), after one they are learnt again.
    #[test]
    fn the_ranges_kept_between_judgings_are_the_ranges_learnt_from_scratch() {
        const SLICE: u64 = 10;
        let all = Range {
            since: 0,
            until: u64::MAX,
        };
        let none = Range {
            since: u64::MAX,
            until: u64::MAX,
        };
        let spec = FleetSpec::new(4, 0);
        let mut fleet = Fleet::new(all, none, SLICE);
        let mut held: Vec<(u64, Summary)> = Vec::new();
        let mut planted = 0;
        for w in 0..160u64 {
            for d in 0..spec.devices {
                if d == 3 && w < 33 {
                    continue;
                }
                let s = spec.window(d, w);
                fleet.add(&s);
                held.push((spec.window_start(w) / spec.window_ns, s));
            }
            // A late window, in a slice the kept bounds cover.
            if w == 43 {
                let s = spec.window(3, 32);
                fleet.add(&s);
                held.push((spec.window_start(32) / spec.window_ns, s));
            }
            if w % 2 == 0 {
                continue;
            }
            if w % 50 == 49 {
                // Window indices are of Unix time.
                let before = spec.window_start(w - 27) / spec.window_ns;
                let (evicted, kept): (Vec<_>, Vec<_>) = std::mem::take(&mut held)
                    .into_iter()
                    .partition(|(i, _)| *i < before);
                fleet.evict_training(
                    before,
                    evicted.iter().map(|(_, s)| s),
                    kept.iter().map(|(_, s)| s),
                );
                held = kept;
            }
            let changes = fleet.training_changes();
            let mut first = |g: u64| first_changed_after(changes.changed, g);
            for d in 0..fleet.devices.len() {
                let scratch = Admissible::bounds(
                    None,
                    full_slices(&fleet, d, Phase::Training).map(|(_, s)| s),
                    SLICE,
                )
                .map(|a| a.widened(0.1));
                let kept = learnt_range(&fleet, d, 0.1, &mut first);
                let cache = fleet.learnt.histogram.lock().unwrap();
                let was_planted = cache[&d].bounds.as_ref().map(|b| b.calls[0]) == Some(1e300);
                drop(cache);
                if was_planted {
                    // Gone on from the planted bound (`calls` is not widened).
                    assert_eq!(kept.map(|a| a.calls[0]), Some(1e300), "window {w}");
                    planted += 1;
                } else {
                    assert_eq!(bits(&kept), bits(&scratch), "window {w} device {d}");
                }
                // Planted on device 0 at every fifth judging, taken out at
                // the next (the bounds from scratch back).
                let mut cache = fleet.learnt.histogram.lock().unwrap();
                if let Some(b) = cache.get_mut(&d).and_then(|l| l.bounds.as_mut()) {
                    if d == 0 && w % 10 == 1 {
                        b.calls[0] = 1e300;
                    } else if b.calls[0] == 1e300 {
                        cache.remove(&d);
                    }
                }
            }
        }
        assert_eq!(fleet.devices.len(), 4);
        assert!(held.len() < 4 * 40, "{}", held.len());
        // Planted and gone on from, except across the evictions.
        assert!(planted >= 10, "{planted}");
    }
}
