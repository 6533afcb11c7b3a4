//! The intersection: only syscalls every run made become tree attributes
//! (a syscall one platform lacks cannot be compared). The rest are reported
//! on the side, with the same statistics per class, so nothing important is
//! hidden.

use std::collections::BTreeSet;

use crate::attributes::{Common, EntryStats, RunProfile};

/// A syscall entry outside the intersection, summarised per class.
#[derive(Debug, Clone, PartialEq)]
pub struct OutsideEntry {
    /// Entry name (`read@pipe`).
    pub name: String,
    /// One per class, in class order.
    pub per_class: Vec<OutsideClass>,
}

/// The runs of one class and the entry.
#[derive(Debug, Clone, PartialEq)]
pub struct OutsideClass {
    /// Runs of the class.
    pub runs: usize,
    /// Of those, runs that made the call.
    pub runs_with: usize,
    /// Mean of each statistic (`num`, `time`, ...) over the runs that made
    /// the call.
    pub means: Vec<(&'static str, f64)>,
}

impl OutsideEntry {
    /// How differently often the classes made the call: the largest
    /// difference between two classes' shares of runs that made it.
    pub fn imbalance(&self) -> f64 {
        let shares: Vec<f64> = self
            .per_class
            .iter()
            .filter(|c| c.runs > 0)
            .map(|c| c.runs_with as f64 / c.runs as f64)
            .collect();
        let max = shares.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        let min = shares.iter().copied().fold(f64::INFINITY, f64::min);
        if shares.is_empty() {
            0.0
        } else {
            max - min
        }
    }
}

/// The entries and transitions common to every run, and the entries
/// outside, most unevenly spread between classes first.
pub fn intersect(
    profiles: &[RunProfile],
    labels: &[u32],
    classes: usize,
) -> (Common, Vec<OutsideEntry>) {
    let Some(base) = profiles.first() else {
        return (Common::default(), Vec::new());
    };
    // The research's method: one run is the base set; keep what every other
    // run has too.
    let entries: Vec<String> = base
        .entries
        .keys()
        .filter(|e| profiles.iter().all(|p| p.entries.contains_key(*e)))
        .cloned()
        .collect();
    let transitions: Vec<String> = base
        .transitions
        .keys()
        .filter(|t| profiles.iter().all(|p| p.transitions.contains_key(*t)))
        .cloned()
        .collect();
    let common: BTreeSet<&String> = entries.iter().collect();
    let all: BTreeSet<&String> = profiles.iter().flat_map(|p| p.entries.keys()).collect();

    let mut runs_per_class = vec![0usize; classes];
    for l in labels {
        runs_per_class[*l as usize] += 1;
    }
    let mut outside: Vec<OutsideEntry> = all
        .into_iter()
        .filter(|e| !common.contains(e))
        .map(|name| {
            let per_class = (0..classes)
                .map(|class| {
                    let with: Vec<&EntryStats> = profiles
                        .iter()
                        .zip(labels)
                        .filter(|(_, l)| **l as usize == class)
                        .filter_map(|(p, _)| p.entries.get(name))
                        .collect();
                    let mut means: Vec<(&'static str, f64)> = Vec::new();
                    for s in &with {
                        for (i, (prefix, v)) in s.values().into_iter().enumerate() {
                            match means.get_mut(i) {
                                Some(m) if m.0 == prefix => m.1 += v,
                                _ => means.push((prefix, v)),
                            }
                        }
                    }
                    // `param` may be missing in some runs: divide each sum by
                    // the runs that contributed to it.
                    for m in &mut means {
                        let n = with
                            .iter()
                            .filter(|s| m.0 != "param" || s.param_calls > 0)
                            .count();
                        if n > 0 {
                            m.1 /= n as f64;
                        }
                    }
                    OutsideClass {
                        runs: runs_per_class[class],
                        runs_with: with.len(),
                        means,
                    }
                })
                .collect();
            OutsideEntry {
                name: name.clone(),
                per_class,
            }
        })
        .collect();
    outside.sort_by(|a, b| {
        b.imbalance()
            .total_cmp(&a.imbalance())
            .then_with(|| a.name.cmp(&b.name))
    });
    (
        Common {
            entries,
            transitions,
        },
        outside,
    )
}
