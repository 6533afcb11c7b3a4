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

use std::collections::BTreeMap;

use crate::attributes::RunProfile;

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
/// are the runs' durations. `None` unless there are exactly two classes,
/// each with a run: "extra time of the bad runs" means nothing otherwise.
pub fn rank(
    profiles: &[RunProfile],
    durations_s: &[f64],
    labels: &[u32],
    classes: usize,
) -> Option<TimeGaps> {
    if classes != 2 || profiles.len() != labels.len() || durations_s.len() != labels.len() {
        return None;
    }
    let mut runs = [0usize; 2];
    let mut duration_sum = [0.0f64; 2];
    // Entry -> seconds summed over the runs of each class.
    let mut time_sum: BTreeMap<&str, [f64; 2]> = BTreeMap::new();
    for ((profile, &duration), &label) in profiles.iter().zip(durations_s).zip(labels) {
        let class = usize::from(label != 0);
        runs[class] += 1;
        duration_sum[class] += duration;
        for (name, stats) in &profile.entries {
            time_sum.entry(name.as_str()).or_default()[class] += stats.total_ns as f64 / 1e9;
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
