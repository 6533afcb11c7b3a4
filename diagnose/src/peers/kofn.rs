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

#[cfg(test)]
mod tests {
    use super::persistent;

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
}
