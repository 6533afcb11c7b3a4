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
    let (_, best) = running_sums(values, n)?;
    Some(best / n.clamp(1, values.len()) as f64)
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
        .map(|w| kth_largest(&mut buf, w, k))
        .reduce(f64::max)
}

/// [`sustained`] and [`highest_mean`] of one series, kept between calls
/// for a series that grows at its end: the live analysis takes both over
/// each server's and metric's hundreds of baseline windows at every tick,
/// while a tick adds only its few new windows to the baseline. When the
/// values of the last call are still the first values of this one (bit
/// for bit), only the stretches ending in the new values are taken, and
/// the running maximum and sum go on from where they stopped: the same
/// operations in the same order as the functions', so the same results to
/// the bit. Any other change (the oldest windows evicted, a value
/// changed) takes the whole series again.
#[derive(Debug, Clone, Default)]
pub struct Levels {
    /// The series of the last call.
    values: Vec<f64>,
    /// The k and n of the last call.
    k: usize,
    n: usize,
    /// [`sustained`]'s running maximum, after the last call's values.
    sustained: Option<f64>,
    /// [`highest_mean`]'s running sum and highest sum, after them.
    sums: Option<(f64, f64)>,
}

impl Levels {
    /// `(sustained(values, k, n), highest_mean(values, n))`.
    pub fn of(&mut self, values: &[f64], k: usize, n: usize) -> (Option<f64>, Option<f64>) {
        let n = n.max(1);
        let k = k.clamp(1, n);
        let old = self.values.len();
        // Going on needs whole stretches of n already (with fewer values
        // both functions take shorter stretches) and the old values kept.
        let goes_on = self.k == k
            && self.n == n
            && old >= n
            && values.len() >= old
            && self.sums.is_some()
            && self
                .values
                .iter()
                .zip(values)
                .all(|(a, b)| a.to_bits() == b.to_bits());
        if !goes_on {
            self.k = k;
            self.n = n;
            self.values.clear();
            self.sustained = sustained(values, k, n);
            self.sums = running_sums(values, n);
        } else if values.len() > old {
            // The stretches ending in the new values, in order.
            let mut buf = Vec::with_capacity(n);
            for w in values[old + 1 - n..].windows(n) {
                let level = kth_largest(&mut buf, w, k);
                self.sustained = Some(match self.sustained {
                    Some(s) => s.max(level),
                    None => level,
                });
            }
            if let Some((mut sum, mut best)) = self.sums {
                for i in old..values.len() {
                    sum += values[i] - values[i - n];
                    best = best.max(sum);
                }
                self.sums = Some((sum, best));
            }
        }
        self.values.clear();
        self.values.extend_from_slice(values);
        let highest = self
            .sums
            .map(|(_, best)| best / n.clamp(1, values.len().max(1)) as f64);
        (self.sustained, highest)
    }
}

/// [`highest_mean`]'s running sum after the last value and highest sum
/// (`None` when empty).
fn running_sums(values: &[f64], n: usize) -> Option<(f64, f64)> {
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
    Some((sum, best))
}

/// The `k`-th largest of `w` (`1 ≤ k ≤ w.len()`), selected in `buf`.
fn kth_largest(buf: &mut Vec<f64>, w: &[f64], k: usize) -> f64 {
    buf.clear();
    buf.extend_from_slice(w);
    *buf.select_nth_unstable_by(k - 1, |a, b| b.total_cmp(a)).1
}

#[cfg(test)]
mod tests {
    use super::{highest_mean, persistent, persistent_or_strong, sustained, Levels};

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

    /// Kept between calls, the levels are the functions' to the bit, over
    /// a series that grows a few values at a time, loses its oldest ones,
    /// has one changed or is taken with other k and n; and the new values
    /// alone are read while it only grows (its maximum is seen in them).
    #[test]
    fn the_levels_kept_between_calls_are_the_functions_levels() {
        let mut x = 11u64;
        let mut next = || {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            // Repeats and zeros on purpose, fractions that round in sums.
            ((x >> 33) % 17) as f64 * 0.1
        };
        for (k, n) in [(4, 5), (1, 1), (2, 3), (5, 5)] {
            let mut levels = Levels::default();
            let mut values: Vec<f64> = Vec::new();
            for step in 0..300 {
                match step % 37 {
                    // The oldest windows evicted.
                    36 => {
                        values.drain(..values.len() / 3);
                    }
                    // A value changed where it was read already.
                    20 if values.len() > 3 => values[2] += 1.0,
                    _ => {
                        for _ in 0..step % 4 {
                            values.push(next());
                        }
                    }
                }
                let want = (sustained(&values, k, n), highest_mean(&values, n));
                let got = levels.of(&values, k, n);
                let bits =
                    |l: (Option<f64>, Option<f64>)| (l.0.map(f64::to_bits), l.1.map(f64::to_bits));
                assert_eq!(bits(got), bits(want), "k {k} n {n} step {step}: {values:?}");
            }
            // Other k and n on the same series.
            let got = levels.of(&values, 1, 2);
            assert_eq!(got, (sustained(&values, 1, 2), highest_mean(&values, 2)));
        }
        // While the series only grows, what was kept is gone on from (a
        // level planted in it stays), not taken again from the start.
        let mut levels = Levels::default();
        let mut values = vec![1.0; 50];
        assert_eq!(levels.of(&values, 1, 1), (Some(1.0), Some(1.0)));
        levels.sustained = Some(9.0);
        levels.sums = levels.sums.map(|(sum, _)| (sum, 9.0));
        values.push(7.0);
        assert_eq!(levels.of(&values, 1, 1), (Some(9.0), Some(9.0)));
        values[0] = 2.0;
        assert_eq!(levels.of(&values, 1, 1), (Some(7.0), Some(7.0)));
    }

    #[test]
    fn the_highest_mean_of_a_stretch() {
        assert_eq!(highest_mean(&[1.0, 3.0, 2.0, 0.0, 9.0], 2), Some(4.5));
        assert_eq!(highest_mean(&[1.0, 3.0], 5), Some(2.0));
        assert_eq!(highest_mean(&[], 5), None);
    }
}
