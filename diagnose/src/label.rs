//! Good and bad: labels given (folders, a fact), found by clustering runs
//! on their performance, or read from how each run ended (its outcome).

use agent_core::{Exit, Summary, SyscallId};
use anyhow::bail;

use crate::selection::LeftOut;

/// What performance runs are clustered on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClusterBy {
    /// Run duration (shorter is better).
    Duration,
    /// Bytes received over sockets per second (higher is better).
    Throughput,
    /// How the run ended, not clustered: exited 0 is good; a non-zero exit
    /// or a kill by a signal is bad; a run the agent detached from or one
    /// still running has no known outcome and is left out.
    Outcome,
}

impl ClusterBy {
    /// The name used on the command line and in the reports.
    pub fn name(self) -> &'static str {
        match self {
            ClusterBy::Duration => "duration",
            ClusterBy::Throughput => "throughput",
            ClusterBy::Outcome => "outcome",
        }
    }
}

/// The two performance clusters found.
#[derive(Debug, Clone, PartialEq)]
pub struct Clusters {
    /// What was clustered.
    pub by: ClusterBy,
    /// The unit of the values below (`s`, `B/s`).
    pub unit: &'static str,
    /// Smallest and largest value of the good cluster.
    pub good: (f64, f64),
    /// Smallest and largest value of the bad cluster.
    pub bad: (f64, f64),
    /// The boundary: the geometric midpoint between the clusters.
    pub boundary: f64,
}

/// Labels of the runs.
#[derive(Debug, Clone, PartialEq)]
pub struct Labelling {
    /// How they were found, in words.
    pub method: String,
    /// Class names.
    pub classes: Vec<String>,
    /// Class per run.
    pub labels: Vec<u32>,
    /// The clusters, when labels were found by clustering.
    pub clusters: Option<Clusters>,
}

/// The best split of values into two clusters (1-D 2-means, which for one
/// dimension is Jenks' natural breaks with two classes, solved exactly):
/// the count of the smallest values that form the lower cluster.
pub fn two_means(sorted: &[f64]) -> Option<usize> {
    let n = sorted.len();
    if n < 2 || sorted[0] == sorted[n - 1] {
        return None;
    }
    // Prefix sums give each candidate split's within-cluster sum of squares
    // in O(1). Values are shifted by their mean first for precision.
    let mean = sorted.iter().sum::<f64>() / n as f64;
    let mut s = vec![0.0; n + 1];
    let mut q = vec![0.0; n + 1];
    for (i, v) in sorted.iter().enumerate() {
        let d = v - mean;
        s[i + 1] = s[i] + d;
        q[i + 1] = q[i] + d * d;
    }
    let sse = |a: usize, b: usize| {
        let m = (b - a) as f64;
        let sum = s[b] - s[a];
        (q[b] - q[a]) - sum * sum / m
    };
    let mut best: Option<(usize, f64)> = None;
    for split in 1..n {
        // Equal values stay in one cluster.
        if sorted[split - 1] == sorted[split] {
            continue;
        }
        let cost = sse(0, split) + sse(split, n);
        if best.is_none_or(|(_, c)| cost < c) {
            best = Some((split, cost));
        }
    }
    best.map(|(split, _)| split)
}

/// Bytes received over sockets by successful read-family calls.
fn socket_bytes(summary: &Summary) -> f64 {
    const RECEIVE: [&str; 4] = ["read", "readv", "recvfrom", "recvmsg"];
    summary
        .syscalls
        .iter()
        .filter(|s| s.key.fd_kind.is_socket())
        .filter(|s| {
            RECEIVE
                .iter()
                .any(|n| SyscallId::from_name(n) == Some(s.key.id))
        })
        .map(|s| s.result_sum.max(0) as f64)
        .sum()
}

/// Labels runs by clustering their duration or throughput (on a log
/// scale); the better cluster is `good`. With [`ClusterBy::Outcome`] the
/// labels are the runs' outcomes ([`by_outcome`]); a run without a known
/// outcome is then an error (`by_outcome` leaves such runs out instead).
pub fn by_cluster(summaries: &[Summary], by: ClusterBy) -> anyhow::Result<Labelling> {
    let (values, unit): (Vec<f64>, &'static str) = match by {
        ClusterBy::Outcome => {
            let (labelling, keep, left_out) = by_outcome(summaries)?;
            if !keep.iter().all(|k| *k) {
                bail!(
                    "{} run(s) have no known outcome (detached or still running): leave them out first",
                    left_out.unknown_outcome
                );
            }
            return Ok(labelling);
        }
        ClusterBy::Duration => (
            summaries
                .iter()
                .map(|s| s.run.duration_ns as f64 / 1e9)
                .collect(),
            "s",
        ),
        ClusterBy::Throughput => {
            let v: Vec<f64> = summaries
                .iter()
                .map(|s| socket_bytes(s) / (s.run.duration_ns.max(1) as f64 / 1e9))
                .collect();
            if v.iter().all(|x| *x == 0.0) {
                bail!("no run received bytes over a socket: cluster by duration instead");
            }
            (v, "B/s")
        }
    };
    // Cluster on the logarithm: slowness is relative (twice as slow is the
    // same step at 0.2 s as at 2 s), and a few very slow runs must not pull
    // the boundary into the middle of the others.
    let logs: Vec<f64> = values.iter().map(|v| v.max(1e-12).ln()).collect();
    let mut order: Vec<usize> = (0..values.len()).collect();
    order.sort_by(|&a, &b| logs[a].total_cmp(&logs[b]));
    let sorted_logs: Vec<f64> = order.iter().map(|&i| logs[i]).collect();
    let Some(split) = two_means(&sorted_logs) else {
        bail!(
            "cannot find performance clusters: {} run(s), all with the same {}",
            values.len(),
            by.name()
        );
    };
    let sorted: Vec<f64> = order.iter().map(|&i| values[i]).collect();
    let low = (sorted[0], sorted[split - 1]);
    let high = (sorted[split], sorted[sorted.len() - 1]);
    // The geometric midpoint: the middle of the gap on the log scale.
    let boundary = (low.1.max(1e-12) * high.0).sqrt();
    // Short durations and high throughputs are good.
    let good_is_low = by == ClusterBy::Duration;
    let (good, bad) = if good_is_low {
        (low, high)
    } else {
        (high, low)
    };
    let mut labels = vec![0u32; values.len()];
    for (rank, &i) in order.iter().enumerate() {
        let in_low = rank < split;
        labels[i] = u32::from(in_low != good_is_low);
    }
    Ok(Labelling {
        method: format!(
            "clustered by {} (two clusters, natural breaks on a log scale)",
            by.name()
        ),
        classes: vec!["good".into(), "bad".into()],
        labels,
        clusters: Some(Clusters {
            by,
            unit,
            good,
            bad,
            boundary,
        }),
    })
}

/// Labels runs by the value of free fact `key`; runs without it are
/// reported and left out (the returned mask says which are kept).
pub fn by_fact(summaries: &[Summary], key: &str) -> anyhow::Result<(Labelling, Vec<bool>)> {
    let mut classes: Vec<String> = Vec::new();
    let mut labels = Vec::new();
    let mut keep = Vec::new();
    for s in summaries {
        match s.facts.get(key) {
            Some(v) => {
                let c = match classes.iter().position(|c| c == v) {
                    Some(c) => c,
                    None => {
                        classes.push(v.to_string());
                        classes.len() - 1
                    }
                };
                labels.push(c as u32);
                keep.push(true);
            }
            None => keep.push(false),
        }
    }
    if classes.len() < 2 {
        bail!(
            "fact {key:?} must have at least two values among the runs to label them (found {})",
            match classes.len() {
                0 => "none".to_string(),
                _ => format!("only {:?}", classes[0]),
            }
        );
    }
    // "good" first when present, so rules read the same way as with
    // clustering.
    if let Some(g) = classes.iter().position(|c| c == "good") {
        if g != 0 {
            classes.swap(0, g);
            for l in &mut labels {
                if *l == 0 {
                    *l = g as u32;
                } else if *l == g as u32 {
                    *l = 0;
                }
            }
        }
    }
    Ok((
        Labelling {
            method: format!("by fact {key}"),
            classes,
            labels,
            clusters: None,
        },
        keep,
    ))
}

/// A run's class by its outcome: 0 (good) when it exited 0, 1 (bad) when
/// it exited non-zero or was killed by a signal, `None` when the outcome is
/// unknown: the agent detached (attach ended, or the agent was stopped)
/// before the program ended, or the run is still going (a window of a long
/// run, or merged windows whose last one is not in).
pub fn outcome_class(exit: Exit) -> Option<u32> {
    match exit {
        Exit::Code(0) => Some(0),
        Exit::Code(_) | Exit::Signal(_) => Some(1),
        Exit::Detached | Exit::Running => None,
    }
}

/// Labels runs by outcome ([`outcome_class`]); runs without a known
/// outcome are left out (the mask says which are kept; the count is in
/// `LeftOut::unknown_outcome`).
pub fn by_outcome(summaries: &[Summary]) -> anyhow::Result<(Labelling, Vec<bool>, LeftOut)> {
    let mut labels = Vec::new();
    let mut keep = Vec::with_capacity(summaries.len());
    let mut left_out = LeftOut::default();
    for s in summaries {
        match outcome_class(s.run.exit) {
            Some(class) => {
                labels.push(class);
                keep.push(true);
            }
            None => {
                left_out.unknown_outcome += 1;
                keep.push(false);
            }
        }
    }
    let bad = labels.iter().filter(|l| **l == 1).count();
    let good = labels.len() - bad;
    if good == 0 || bad == 0 {
        bail!(
            "labels by outcome need runs that exited 0 and runs that failed: of {} run(s), {good} exited 0, {bad} exited non-zero or were killed, {} have no known outcome (detached or still running)",
            summaries.len(),
            left_out.unknown_outcome
        );
    }
    Ok((
        Labelling {
            method: "by outcome (good: exited 0; bad: exited non-zero or killed by a signal)"
                .into(),
            classes: vec!["good".into(), "bad".into()],
            labels,
            clusters: None,
        },
        keep,
        left_out,
    ))
}
