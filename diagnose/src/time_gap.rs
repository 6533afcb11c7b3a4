//! Where the time went: the syscall entries ranked by the extra time the
//! bad runs spend in them.
//!
//! Rules say what separates the classes; this says where the bad runs'
//! time goes. For every syscall entry (after the mapping; the plain name
//! summed over fd kinds, and `<name>@<kind>` per fd kind, as the
//! attributes), the mean seconds per run spent in its calls in each class
//! (a run without the entry counts 0, so calls only one class makes are
//! ranked too), their difference (bad − good), and that difference as a
//! share of the difference in mean run duration. Largest difference first.
//!
//! Entries overlap by design: `read` is the sum of every `read@<kind>`. The
//! time in calls is summed over threads, so with several threads the shares
//! can add up to more than 1.
//!
//! The time counted is each call's time beyond the tracer's own cost. A
//! ptrace-traced call's time runs from its entry stop to its exit stop, so
//! it holds two context switches through the tracer as well as the kernel's
//! work: tens of microseconds in every call, whatever it does. Left in, that
//! fixed cost ranks entries by how many calls they make rather than by how
//! long the calls wait (the demo's bad wget runs make eight times as many
//! small writes to the output file, and their writes then topped the reads
//! they wait in). Each run's floor is its fastest call ([`tracer_floor_ns`]),
//! and every call of the run counts its time above that floor, as `strace
//! -c` subtracts its measured overhead. Under eBPF the floor is a few
//! hundred nanoseconds and changes nothing that matters.

use std::collections::BTreeMap;

use agent_core::Summary;

use crate::attributes::RunProfile;

/// The tracer's cost in each call of `summary`'s run: its fastest call's
/// time, ns (0 when it made none). Some call in every traced run does
/// almost nothing in the kernel (a `getpid`, a failing `access`), so its
/// time is the stops around it.
pub fn tracer_floor_ns(summary: &Summary) -> u64 {
    summary
        .syscalls
        .iter()
        .filter(|s| s.count > 0)
        .map(|s| s.spread.map_or(s.total_ns, |spread| spread.min_ns))
        .min()
        .unwrap_or(0)
}

/// One syscall entry's time in each class.
#[derive(Debug, Clone, PartialEq)]
pub struct TimeGap {
    /// The entry: `read`, `read@tcp`.
    pub syscall: String,
    /// Mean seconds per good run spent in its calls.
    pub good_mean_s: f64,
    /// Mean seconds per bad run spent in its calls.
    pub bad_mean_s: f64,
    /// `(bad_mean_s - good_mean_s) / (bad mean duration - good mean
    /// duration)`; `None` when the mean durations are equal.
    pub share: Option<f64>,
}

impl TimeGap {
    /// Extra seconds per run the bad runs spend in the entry (negative when
    /// they spend less).
    pub fn difference_s(&self) -> f64 {
        self.bad_mean_s - self.good_mean_s
    }
}

/// The ranking, with the mean run durations it is measured against.
#[derive(Debug, Clone, PartialEq)]
pub struct TimeGaps {
    /// Mean duration of a good run, seconds.
    pub good_duration_s: f64,
    /// Mean duration of a bad run, seconds.
    pub bad_duration_s: f64,
    /// The entries any run spent time in, largest difference first (ties
    /// by name).
    pub entries: Vec<TimeGap>,
}

/// Ranks the entries of `profiles` (one per run) by the extra time runs of
/// class 1 (bad) spend in them over runs of class 0 (good). `durations_s`
/// are the runs' durations, `floors_ns` the tracer's cost per call in each
/// ([`tracer_floor_ns`]), taken off every call. `None` unless there are
/// exactly two classes, each with a run: "extra time of the bad runs" means
/// nothing otherwise.
pub fn rank(
    profiles: &[RunProfile],
    durations_s: &[f64],
    floors_ns: &[u64],
    labels: &[u32],
    classes: usize,
) -> Option<TimeGaps> {
    if classes != 2
        || profiles.len() != labels.len()
        || durations_s.len() != labels.len()
        || floors_ns.len() != labels.len()
    {
        return None;
    }
    let mut runs = [0usize; 2];
    let mut duration_sum = [0.0f64; 2];
    // Entry -> seconds summed over the runs of each class.
    let mut time_sum: BTreeMap<&str, [f64; 2]> = BTreeMap::new();
    for (((profile, &duration), &floor_ns), &label) in
        profiles.iter().zip(durations_s).zip(floors_ns).zip(labels)
    {
        let class = usize::from(label != 0);
        runs[class] += 1;
        duration_sum[class] += duration;
        for (name, stats) in &profile.entries {
            let tracer_ns = stats.count.saturating_mul(floor_ns);
            let own_ns = stats.total_ns.saturating_sub(tracer_ns);
            time_sum.entry(name.as_str()).or_default()[class] += own_ns as f64 / 1e9;
        }
    }
    if runs.contains(&0) {
        return None;
    }
    let good_duration_s = duration_sum[0] / runs[0] as f64;
    let bad_duration_s = duration_sum[1] / runs[1] as f64;
    let duration_gap = bad_duration_s - good_duration_s;
    let mut entries: Vec<TimeGap> = time_sum
        .into_iter()
        .filter(|(_, sum)| sum[0] > 0.0 || sum[1] > 0.0)
        .map(|(name, sum)| {
            let good_mean_s = sum[0] / runs[0] as f64;
            let bad_mean_s = sum[1] / runs[1] as f64;
            TimeGap {
                syscall: name.to_string(),
                good_mean_s,
                bad_mean_s,
                share: (duration_gap != 0.0).then(|| (bad_mean_s - good_mean_s) / duration_gap),
            }
        })
        .collect();
    // Stable sort over name order: equal differences stay by name.
    entries.sort_by(|a, b| b.difference_s().total_cmp(&a.difference_s()));
    Some(TimeGaps {
        good_duration_s,
        bad_duration_s,
        entries,
    })
}
