//! What the anomaly detector decides from the light runs of one (group,
//! program): whether a slow or a failing cluster stands out, and which
//! devices to trace on each side. Pure functions of the runs and the
//! thresholds; [`super::task`] calls them every tick and keeps the state
//! (stability, investigations, freshness).

use std::collections::BTreeMap;
use std::time::Duration;

use agent_core::{DeviceId, Exit};
use diagnose::label::two_means;

use super::reports::{TRIGGER_FAILING, TRIGGER_SLOW};

/// The detector's thresholds (`serve --auto-*`; `docs/proactive.md`).
#[derive(Clone, Debug, PartialEq)]
pub struct Thresholds {
    /// How often it looks.
    pub every: Duration,
    /// It looks at light runs that started at most this long ago.
    pub window: Duration,
    /// Fewest runs in the anomalous cluster, and in the good one.
    pub min_runs: usize,
    /// Slow only when the slow cluster's median duration is at least this
    /// many times the good cluster's (two-means always splits; this keeps
    /// ordinary jitter from being called slow).
    pub min_ratio: f64,
    /// Devices traced on each side, at most.
    pub devices: usize,
    /// Consecutive ticks a cluster must be found before it is investigated.
    pub stable_ticks: u32,
    /// Full runs asked of each device.
    pub runs: u32,
    /// How long the directives stand (and the investigation waits for
    /// their runs).
    pub wait: Duration,
    /// No new investigation of the same (group, program, trigger) while
    /// its latest report is younger than this.
    pub fresh: Duration,
}

impl Default for Thresholds {
    fn default() -> Self {
        Thresholds {
            every: Duration::from_secs(30),
            window: Duration::from_secs(3600),
            min_runs: 3,
            min_ratio: 2.0,
            devices: 2,
            stable_ticks: 2,
            runs: 2,
            wait: Duration::from_secs(1800),
            fresh: Duration::from_secs(3600),
        }
    }
}

/// Thresholds that would make the detector useless. The words name
/// `serve`'s options, the one way people set them.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ThresholdsError {
    /// A period of no time.
    #[error("--auto-every, --auto-window and --auto-wait must be at least 1s")]
    NoTime,
    /// A count of nothing.
    #[error("--auto-min-runs, --auto-devices and --auto-stable must be at least 1")]
    NoCount,
    /// A slow cluster that need not be slower.
    #[error("--auto-min-ratio must be a number of at least 1")]
    Ratio,
    /// Runs a per-device directive cannot ask for.
    #[error("--auto-runs must be 1..={}", crate::proactive::directives::MAX_RUNS)]
    Runs,
}

impl Thresholds {
    /// Refuses thresholds that would make the detector useless.
    pub fn check(&self) -> Result<(), ThresholdsError> {
        if self.every.is_zero() || self.window.is_zero() || self.wait.is_zero() {
            return Err(ThresholdsError::NoTime);
        }
        if self.min_runs == 0 || self.devices == 0 || self.stable_ticks == 0 {
            return Err(ThresholdsError::NoCount);
        }
        if !(self.min_ratio >= 1.0 && self.min_ratio.is_finite()) {
            return Err(ThresholdsError::Ratio);
        }
        if self.runs == 0 || self.runs > crate::proactive::directives::MAX_RUNS {
            return Err(ThresholdsError::Runs);
        }
        Ok(())
    }
}

/// One light run, as the detector needs it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LightRun {
    pub device: DeviceId,
    pub duration_ns: u64,
    pub exit: Exit,
}

/// A cluster worth investigating.
#[derive(Clone, Debug, PartialEq)]
pub struct Finding {
    /// [`TRIGGER_SLOW`] or [`TRIGGER_FAILING`].
    pub trigger: &'static str,
    /// Devices of the anomalous cluster, worst first (at most
    /// [`Thresholds::devices`]).
    pub bad: Vec<DeviceId>,
    /// Devices of the good cluster, most runs first (at most
    /// [`Thresholds::devices`]).
    pub good: Vec<DeviceId>,
    /// The clusters in words, for the log and the report.
    pub description: String,
}

/// Whether a run succeeded: exit 0 is good, a non-zero exit or a signal
/// bad; `None` for runs whose end was not seen (detached, running).
pub fn outcome_ok(exit: Exit) -> Option<bool> {
    match exit {
        Exit::Code(0) => Some(true),
        Exit::Code(_) | Exit::Signal(_) => Some(false),
        Exit::Running | Exit::Detached => None,
    }
}

/// The clusters worth investigating among one (group, program)'s light
/// runs: a failing one (by outcome) and a slow one (by duration, among the
/// runs that did not fail: a failure's duration says nothing of speed),
/// each only when large enough. Detached runs (the agent saw the process
/// end but not its exit status, e.g. reaped at once by a parent) count
/// for durations, not for outcomes; still running ones for neither.
pub fn find(runs: &[LightRun], t: &Thresholds) -> Vec<Finding> {
    let mut found = Vec::new();
    if let Some(f) = failing(runs, t) {
        found.push(f);
    }
    let ended_well: Vec<LightRun> = runs
        .iter()
        .copied()
        .filter(|r| matches!(r.exit, Exit::Code(0) | Exit::Detached))
        .collect();
    if let Some(f) = slow(&ended_well, t) {
        found.push(f);
    }
    found
}

/// Per device: (runs in the bad class, runs in all).
fn tally(runs: &[LightRun], bad: impl Fn(&LightRun) -> bool) -> BTreeMap<DeviceId, (usize, usize)> {
    let mut by_device: BTreeMap<DeviceId, (usize, usize)> = BTreeMap::new();
    for r in runs {
        let e = by_device.entry(r.device).or_default();
        e.0 += usize::from(bad(r));
        e.1 += 1;
    }
    by_device
}

/// The sides' devices: bad ones (most of their runs bad) worst share
/// first; good ones (most of their runs good) cleanest first, then most
/// runs; ties by id. A good device may have a bad run:
/// one load-slowed run among a device's many (or its few) must not take
/// it off the good side, or a fleet where each device had one bad
/// moment would have no good side at all.
fn pick(
    by_device: &BTreeMap<DeviceId, (usize, usize)>,
    n: usize,
) -> (Vec<DeviceId>, Vec<DeviceId>) {
    let share = |b: usize, all: usize| b as f64 / all.max(1) as f64;
    let mut bad: Vec<(DeviceId, f64)> = by_device
        .iter()
        .filter(|(_, (b, all))| 2 * b > *all)
        .map(|(d, (b, all))| (*d, share(*b, *all)))
        .collect();
    bad.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    let mut good: Vec<(DeviceId, f64, usize)> = by_device
        .iter()
        .filter(|(_, (b, all))| 2 * b < *all)
        .map(|(d, (b, all))| (*d, share(*b, *all), *all))
        .collect();
    good.sort_by(|a, b| a.1.total_cmp(&b.1).then(b.2.cmp(&a.2)).then(a.0.cmp(&b.0)));
    (
        bad.into_iter().take(n).map(|(d, _)| d).collect(),
        good.into_iter().take(n).map(|(d, _, _)| d).collect(),
    )
}

fn failing(runs: &[LightRun], t: &Thresholds) -> Option<Finding> {
    let ended: Vec<LightRun> = runs
        .iter()
        .copied()
        .filter(|r| outcome_ok(r.exit).is_some())
        .collect();
    let failed = ended
        .iter()
        .filter(|r| outcome_ok(r.exit) == Some(false))
        .count();
    let ok = ended.len() - failed;
    if failed < t.min_runs || ok < t.min_runs {
        return None;
    }
    let (bad, good) = pick(
        &tally(&ended, |r| outcome_ok(r.exit) == Some(false)),
        t.devices,
    );
    if bad.is_empty() || good.is_empty() {
        return None;
    }
    Some(Finding {
        trigger: TRIGGER_FAILING,
        description: format!(
            "{failed} of {} runs failed (non-zero exit or signal), on {} device(s) failing most of their runs",
            ended.len(),
            bad.len()
        ),
        bad,
        good,
    })
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    match v.len() {
        0 => 0.0,
        n if n % 2 == 1 => v[n / 2],
        n => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    }
}

fn slow(runs: &[LightRun], t: &Thresholds) -> Option<Finding> {
    // Clustered on the logarithm, as diagnose's labels are: slowness is
    // relative.
    let mut order: Vec<usize> = (0..runs.len()).collect();
    let log = |i: usize| (runs[i].duration_ns.max(1) as f64).ln();
    order.sort_by(|&a, &b| log(a).total_cmp(&log(b)));
    let sorted: Vec<f64> = order.iter().map(|&i| log(i)).collect();
    let split = two_means(&sorted)?;
    let (fast_n, slow_n) = (split, runs.len() - split);
    if fast_n < t.min_runs || slow_n < t.min_runs {
        return None;
    }
    let secs = |i: &usize| runs[*i].duration_ns as f64 / 1e9;
    let fast_median = median(order[..split].iter().map(secs).collect());
    let slow_median = median(order[split..].iter().map(secs).collect());
    if slow_median < t.min_ratio * fast_median {
        return None;
    }
    let boundary = runs[order[split]].duration_ns;
    let (bad, good) = pick(&tally(runs, |r| r.duration_ns >= boundary), t.devices);
    if bad.is_empty() || good.is_empty() {
        return None;
    }
    Some(Finding {
        trigger: TRIGGER_SLOW,
        description: format!(
            "{slow_n} slow run(s) (median {slow_median:.3} s) against {fast_n} (median {fast_median:.3} s), {:.1} times slower",
            slow_median / fast_median.max(1e-9)
        ),
        bad,
        good,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn useless_thresholds_are_refused_by_name() {
        let ok = Thresholds::default();
        assert_eq!(ok.check(), Ok(()));
        let cases = [
            (
                Thresholds {
                    every: Duration::ZERO,
                    ..ok.clone()
                },
                ThresholdsError::NoTime,
            ),
            (
                Thresholds {
                    wait: Duration::ZERO,
                    ..ok.clone()
                },
                ThresholdsError::NoTime,
            ),
            (
                Thresholds {
                    min_runs: 0,
                    ..ok.clone()
                },
                ThresholdsError::NoCount,
            ),
            (
                Thresholds {
                    stable_ticks: 0,
                    ..ok.clone()
                },
                ThresholdsError::NoCount,
            ),
            (
                Thresholds {
                    min_ratio: 0.5,
                    ..ok.clone()
                },
                ThresholdsError::Ratio,
            ),
            (
                Thresholds {
                    min_ratio: f64::NAN,
                    ..ok.clone()
                },
                ThresholdsError::Ratio,
            ),
            (
                Thresholds {
                    runs: 0,
                    ..ok.clone()
                },
                ThresholdsError::Runs,
            ),
            (
                Thresholds {
                    runs: crate::proactive::directives::MAX_RUNS + 1,
                    ..ok.clone()
                },
                ThresholdsError::Runs,
            ),
        ];
        for (t, err) in cases {
            assert_eq!(t.check(), Err(err.clone()), "{t:?}");
        }
    }

    fn run(device: u8, secs: f64, exit: Exit) -> LightRun {
        LightRun {
            device: DeviceId([device; 16]),
            duration_ns: (secs * 1e9) as u64,
            exit,
        }
    }

    fn fleet(slow_devices: &[u8], slow_secs: f64) -> Vec<LightRun> {
        let mut runs = Vec::new();
        for d in 1..=6u8 {
            for k in 0..3 {
                let base = if slow_devices.contains(&d) {
                    slow_secs
                } else {
                    0.2
                };
                runs.push(run(d, base + 0.01 * f64::from(k), Exit::Code(0)));
            }
        }
        runs
    }

    #[test]
    fn finds_the_slow_devices_and_picks_n_per_side() {
        let t = Thresholds::default();
        let found = find(&fleet(&[5, 6], 2.0), &t);
        assert_eq!(found.len(), 1, "{found:?}");
        let f = &found[0];
        assert_eq!(f.trigger, TRIGGER_SLOW);
        let mut bad = f.bad.clone();
        bad.sort();
        assert_eq!(bad, vec![[5; 16], [6; 16]]);
        assert_eq!(f.good.len(), 2);
        assert!(f.good.iter().all(|d| d.0[0] <= 4), "{:?}", f.good);
    }

    /// A fast device with one slow run among its runs (a moment of load)
    /// stays on the good side; a clean device is picked before it, and a
    /// device slow half the time is on neither side.
    #[test]
    fn one_slow_moment_does_not_take_a_device_off_the_good_side() {
        let t = Thresholds::default();
        let mut runs = fleet(&[5, 6], 2.0);
        for d in 1..=4u8 {
            for k in 0..3 {
                runs.push(run(d, 0.2 + 0.01 * f64::from(k), Exit::Code(0)));
            }
        }
        // Devices 1-3: one slow run in 7; 4: none; 7: two in four.
        for d in 1..=3u8 {
            runs.push(run(d, 2.0, Exit::Code(0)));
        }
        for secs in [0.2, 0.21, 2.0, 2.1] {
            runs.push(run(7, secs, Exit::Code(0)));
        }
        let found = find(&runs, &t);
        assert_eq!(found.len(), 1, "{found:?}");
        let f = &found[0];
        assert_eq!(f.good, vec![DeviceId([4; 16]), DeviceId([1; 16])]);
        let mut bad = f.bad.clone();
        bad.sort();
        assert_eq!(bad, vec![[5; 16], [6; 16]]);
    }

    #[test]
    fn detached_runs_count_for_durations() {
        let t = Thresholds::default();
        let runs: Vec<LightRun> = fleet(&[5, 6], 2.0)
            .into_iter()
            .map(|r| LightRun {
                exit: Exit::Detached,
                ..r
            })
            .collect();
        let found = find(&runs, &t);
        assert_eq!(found.len(), 1, "{found:?}");
        assert_eq!(found[0].trigger, TRIGGER_SLOW);
        let still_running: Vec<LightRun> = runs
            .iter()
            .map(|r| LightRun {
                exit: Exit::Running,
                ..*r
            })
            .collect();
        assert!(find(&still_running, &t).is_empty());
    }

    #[test]
    fn ordinary_spread_and_small_clusters_are_not_slow() {
        let t = Thresholds::default();
        // 1.5 times slower: below --auto-min-ratio 2.
        assert!(find(&fleet(&[5, 6], 0.3), &t).is_empty());
        // One slow device with two runs: fewer than --auto-min-runs 3.
        let mut runs = fleet(&[], 0.0);
        runs.push(run(9, 5.0, Exit::Code(0)));
        runs.push(run(9, 5.0, Exit::Code(0)));
        assert!(find(&runs, &t).is_empty());
        // All alike.
        assert!(find(&fleet(&[], 0.0)[..1], &t).is_empty());
    }

    #[test]
    fn failures_form_their_own_cluster_and_stay_out_of_the_durations() {
        let t = Thresholds::default();
        let mut runs = fleet(&[], 0.0);
        for d in [7u8, 8] {
            runs.push(run(d, 0.01, Exit::Code(1)));
            runs.push(run(d, 0.01, Exit::Signal(9)));
        }
        runs.push(run(9, 0.01, Exit::Detached));
        let found = find(&runs, &t);
        assert_eq!(found.len(), 1, "{found:?}");
        assert_eq!(found[0].trigger, TRIGGER_FAILING);
        let mut bad = found[0].bad.clone();
        bad.sort();
        assert_eq!(bad, vec![[7; 16], [8; 16]]);
        assert!(
            !found[0].good.contains(&DeviceId([9; 16])),
            "detached runs are no outcome"
        );
    }
}
