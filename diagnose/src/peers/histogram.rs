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
    fn learn<'a>(
        mut slices: impl Iterator<Item = &'a Slice>,
        slice_windows: u64,
        margin: f64,
    ) -> Option<Admissible> {
        // Scaled one at a time into one buffer: the live analysis learns
        // from hundreds of training slices per device at every tick.
        let mut s = scaled(slices.next()?, slice_windows);
        let first = &s;
        let mut a = Admissible {
            total: [(0.0, 0.0); Group::COUNT],
            buckets: [[(0.0, 0.0); BUCKETS]; Group::COUNT],
            calls: [0.0; Group::COUNT],
        };
        for g in 0..Group::COUNT {
            a.total[g] = (first.total[g], first.total[g]);
            for b in 0..BUCKETS {
                a.buckets[g][b] = (first.buckets[g][b], first.buckets[g][b]);
            }
        }
        loop {
            for g in 0..Group::COUNT {
                let t = &mut a.total[g];
                *t = (t.0.min(s.total[g]), t.1.max(s.total[g]));
                a.calls[g] = a.calls[g].max(s.calls[g]);
                for b in 0..BUCKETS {
                    let r = &mut a.buckets[g][b];
                    *r = (r.0.min(s.buckets[g][b]), r.1.max(s.buckets[g][b]));
                }
            }
            let Some(next) = slices.next() else { break };
            scale_into(next, slice_windows, &mut s);
        }
        let widen = |(lo, hi): (f64, f64)| (lo * (1.0 - margin), hi * (1.0 + margin));
        for g in 0..Group::COUNT {
            a.total[g] = widen(a.total[g]);
            for b in 0..BUCKETS {
                a.buckets[g][b] = widen(a.buckets[g][b]);
            }
        }
        Some(a)
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
    for d in &set.devices {
        let train = full_slices(fleet, *d, Phase::Training).map(|(_, s)| s);
        match Admissible::learn(train, fleet.slice_windows, params.range_margin) {
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
