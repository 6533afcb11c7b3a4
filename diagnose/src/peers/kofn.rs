//! "At least k of the last n": which of a device's over-threshold windows
//! belong to a run of trouble long enough to report. A single noisy window
//! (a pause, a burst) is over in one window of n and is not reported; a
//! fault lasting k windows is.

/// The positions of `over` (one flag per judged window, in time order)
/// that lie in some stretch of `n` consecutive judged windows holding at
/// least `k` over-threshold ones. Windows with no value are not in `over`
/// (they neither count nor break a stretch). `k` is at least 1 and at most
/// `n`.
pub fn persistent(over: &[bool], k: usize, n: usize) -> Vec<usize> {
    let n = n.max(1);
    let k = k.clamp(1, n);
    let mut keep = vec![false; over.len()];
    let mut in_window = 0usize;
    for end in 0..over.len() {
        in_window += usize::from(over[end]);
        if end >= n {
            in_window -= usize::from(over[end - n]);
        }
        if in_window >= k {
            let start = (end + 1).saturating_sub(n);
            for (i, o) in over.iter().enumerate().take(end + 1).skip(start) {
                if *o {
                    keep[i] = true;
                }
            }
        }
    }
    keep.iter()
        .enumerate()
        .filter_map(|(i, k)| k.then_some(i))
        .collect()
}

/// [`persistent`], with a second way in for a fault whose effect comes and
/// goes: a whole stretch of `n` consecutive judged windows holding at
/// least `strong_k` windows `over` counts too when the mean of its
/// `deviations` (one per window, as `over`) is over `mean_threshold`, a
/// level learnt apart (see [`highest_mean`]): the windows over are far
/// enough over to carry the ones that dipped. With `strong_k >= k` it is
/// [`persistent`].
pub fn persistent_or_strong(
    over: &[bool],
    deviations: &[f64],
    mean_threshold: f64,
    k: usize,
    strong_k: usize,
    n: usize,
) -> Vec<usize> {
    let n = n.max(1);
    let strong_k = strong_k.max(1);
    let mut keep = vec![false; over.len()];
    for i in persistent(over, k, n) {
        keep[i] = true;
    }
    if strong_k < k.clamp(1, n) && deviations.len() >= n && deviations.len() == over.len() {
        for start in 0..=deviations.len() - n {
            let count = over[start..start + n].iter().filter(|o| **o).count();
            let mean = deviations[start..start + n].iter().sum::<f64>() / n as f64;
            if count >= strong_k && mean > mean_threshold {
                for (i, o) in over.iter().enumerate().skip(start).take(n) {
                    keep[i] |= *o;
                }
            }
        }
    }
    keep.iter()
        .enumerate()
        .filter_map(|(i, k)| k.then_some(i))
        .collect()
}

/// The highest mean of `n` consecutive `values` (one per judged window, in
/// time order): a stretch's mean above it was never seen in training.
/// With fewer than `n` values, their mean. `None` when empty.
pub fn highest_mean(values: &[f64], n: usize) -> Option<f64> {
    if values.is_empty() {
        return None;
    }
    let n = n.clamp(1, values.len());
    // A running sum: the live analysis takes this over hundreds of
    // baseline windows per server and metric at every tick.
    let mut sum: f64 = values[..n].iter().sum();
    let mut best = sum;
    for i in n..values.len() {
        sum += values[i] - values[i - n];
        best = best.max(sum);
    }
    Some(best / n as f64)
}

/// The highest level that `values` (one per judged window, in time order)
/// reach or pass in at least `k` of some `n` consecutive windows: the
/// largest, over every such stretch, of its k-th largest value. A level
/// above it is passed in fewer than k of any n windows, so a threshold
/// set there would not flag the training itself. With `k = n = 1` it is the
/// largest value. With fewer than `k` values no stretch holds k: the
/// largest, to stay on the safe side. `None` when empty.
pub fn sustained(values: &[f64], k: usize, n: usize) -> Option<f64> {
    let n = n.max(1);
    let k = k.clamp(1, n);
    if values.len() < k {
        return values.iter().copied().reduce(f64::max);
    }
    let stretch = n.min(values.len());
    // One buffer for every stretch, and the k-th largest selected rather
    // than sorted for: the live analysis takes this over a baseline of
    // hundreds of windows per device at every tick.
    let mut buf = Vec::with_capacity(stretch);
    values
        .windows(stretch)
        .map(|w| {
            buf.clear();
            buf.extend_from_slice(w);
            *buf.select_nth_unstable_by(k - 1, |a, b| b.total_cmp(a)).1
        })
        .reduce(f64::max)
}

#[cfg(test)]
mod tests {
    use super::{highest_mean, persistent, persistent_or_strong, sustained};

    /// [`persistent_or_strong`] with windows over `threshold` counted.
    fn strong(
        devs: &[f64],
        threshold: f64,
        mean_threshold: f64,
        k: usize,
        sk: usize,
        n: usize,
    ) -> Vec<usize> {
        let over: Vec<bool> = devs.iter().map(|d| *d > threshold).collect();
        persistent_or_strong(&over, devs, mean_threshold, k, sk, n)
    }

    #[test]
    fn the_sustained_level_ignores_lone_spikes() {
        let values = [1.0, 2.0, 90.0, 1.0, 3.0, 2.0, 1.0, 50.0];
        assert_eq!(sustained(&values, 1, 1), Some(90.0));
        // 4 of 5: in 2 90 1 3 2 the fourth largest is 2 (and 3 in none).
        assert_eq!(sustained(&values, 4, 5), Some(2.0));
        // 2 of 5: 90 and 50 are 5 apart, never in one stretch.
        assert_eq!(sustained(&values, 2, 5), Some(3.0));
        assert_eq!(sustained(&values, 2, 6), Some(50.0));
        // Fewer values than n: one stretch; fewer than k: the largest.
        assert_eq!(sustained(&[5.0, 1.0, 4.0], 2, 5), Some(4.0));
        assert_eq!(sustained(&[5.0, 1.0], 4, 5), Some(5.0));
        assert_eq!(sustained(&[], 4, 5), None);
        // A level above it is never over in k of n: the training is clean.
        let level = sustained(&values, 4, 5).unwrap();
        let over: Vec<bool> = values.iter().map(|v| *v > level).collect();
        assert!(persistent(&over, 4, 5).is_empty());
    }

    #[test]
    fn a_single_window_is_not_enough() {
        let mut over = vec![false; 20];
        over[7] = true;
        assert!(persistent(&over, 3, 5).is_empty());
        over[9] = true;
        assert!(persistent(&over, 3, 5).is_empty());
        over[11] = true;
        assert_eq!(persistent(&over, 3, 5), vec![7, 9, 11]);
        // 7 and 12 are 6 apart: never 3 in a stretch of 5 with 9 alone.
        let mut over = vec![false; 20];
        over[7] = true;
        over[9] = true;
        over[12] = true;
        assert!(persistent(&over, 3, 5).is_empty());
        assert_eq!(persistent(&over, 1, 1), vec![7, 9, 12]);
    }

    #[test]
    fn a_stretch_far_over_on_average_needs_fewer_windows_over() {
        // Threshold 1, mean threshold 1: over in 3 of 5 (2, 2.5, 2.2) with
        // two dips; the stretch's mean (1.4) is over too.
        let devs = [0.0, 0.1, 2.0, 2.5, 0.2, 2.2, 0.0, 0.1];
        let over: Vec<bool> = devs.iter().map(|d| *d > 1.0).collect();
        assert!(persistent(&over, 4, 5).is_empty());
        assert_eq!(strong(&devs, 1.0, 1.0, 4, 3, 5), vec![2, 3, 5]);
        // The same with a mean threshold the training's stretches reached.
        assert!(strong(&devs, 1.0, 1.5, 4, 3, 5).is_empty());
        // Three just over (mean under the threshold): not enough.
        let devs = [0.0, 0.1, 1.1, 1.2, 0.0, 1.1, 0.0, 0.1];
        assert!(strong(&devs, 1.0, 1.0, 4, 3, 5).is_empty());
        // One huge spike: 1 of 5 over, whatever its mean.
        let devs = [0.0, 9.0, 0.0, 0.0, 0.0, 0.0];
        assert!(strong(&devs, 1.0, 1.0, 4, 3, 5).is_empty());
        // strong_k >= k: exactly persistent.
        let devs = [0.0, 0.1, 2.0, 2.5, 0.2, 2.2, 0.0, 0.1];
        assert!(strong(&devs, 1.0, 1.0, 4, 4, 5).is_empty());
        // Fewer judged windows than n: no whole stretch to average.
        assert!(strong(&[3.0, 3.0, 3.0], 1.0, 1.0, 4, 3, 5).is_empty());
        // 4 of 5 still holds on its own, whatever the mean.
        let devs = [1.1, 1.1, 1.1, 1.1, 0.0];
        assert_eq!(strong(&devs, 1.0, 9.0, 4, 3, 5), vec![0, 1, 2, 3]);
    }

    #[test]
    fn the_highest_mean_of_a_stretch() {
        assert_eq!(highest_mean(&[1.0, 3.0, 2.0, 0.0, 9.0], 2), Some(4.5));
        assert_eq!(highest_mean(&[1.0, 3.0], 5), Some(2.0));
        assert_eq!(highest_mean(&[], 5), None);
    }
}
