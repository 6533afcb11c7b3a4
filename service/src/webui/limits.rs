//! What one web UI analysis (the Diagnosis and Peers pages) may cost: how
//! much it reads ([`WebLimits`]), how many run at once ([`Gate`]: overall
//! and per group, the rest answered 503 "busy"), and its stop when the
//! browser goes away ([`StopOnDrop`] sets the [`Cancel`] flag the read
//! loop checks between chunks). `edge-service diagnose` and `peers` read
//! what they are asked: none of this applies to them.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use diagnose::input::Cancel;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::metrics::Metrics;

/// `serve --web-*`: the web UI's bounds on one analysis.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WebLimits {
    /// `--web-max-runs`: the newest runs one diagnosis reads. Memory grows
    /// with the runs read (summaries, profiles, the attribute table): all
    /// 20 000 runs of `scripts/soak-web` took the server to 1455 MiB, the
    /// default's 2000 from 94 to 291 MiB.
    pub max_runs: usize,
    /// `--web-max-windows`: the window summaries one peers analysis reads.
    pub max_windows: u64,
    /// `--web-max-span`: the training and diagnosis ranges of one peers
    /// analysis together (each 5 minutes of it is one store query, even
    /// where nothing is stored).
    pub max_span: Duration,
    /// `--web-analyses`: analyses running at once, every group together.
    pub analyses: usize,
    /// `--web-analyses-per-group`: analyses one group runs at once.
    pub analyses_per_group: usize,
}

impl Default for WebLimits {
    fn default() -> WebLimits {
        WebLimits {
            max_runs: 2_000,
            max_windows: 200_000,
            max_span: Duration::from_secs(7 * 24 * 3600),
            analyses: 2,
            analyses_per_group: 1,
        }
    }
}

impl WebLimits {
    /// Refuses a bound of zero (nothing could ever be analysed).
    pub fn check(&self) -> anyhow::Result<()> {
        for (name, value) in [
            ("--web-max-runs", self.max_runs as u64),
            ("--web-max-windows", self.max_windows),
            ("--web-max-span", self.max_span.as_secs()),
            ("--web-analyses", self.analyses as u64),
            ("--web-analyses-per-group", self.analyses_per_group as u64),
        ] {
            if value == 0 {
                anyhow::bail!("{name} must be at least 1 (1 s for the span)");
            }
        }
        Ok(())
    }
}

/// The analyses running now: one semaphore for all, one per group.
#[derive(Debug)]
pub(super) struct Gate {
    all: Arc<Semaphore>,
    per_group: usize,
    /// Grows by one entry per group that ever ran an analysis (the groups
    /// of the tokens file).
    groups: Mutex<HashMap<String, Arc<Semaphore>>>,
}

/// Leave to run one analysis; dropped when the analysis' thread ends (not
/// when the client leaves: the work may still be stopping).
#[derive(Debug)]
pub(super) struct Permit {
    _all: OwnedSemaphorePermit,
    _group: OwnedSemaphorePermit,
}

impl Gate {
    pub(super) fn new(limits: &WebLimits) -> Gate {
        Gate {
            all: Arc::new(Semaphore::new(limits.analyses)),
            per_group: limits.analyses_per_group,
            groups: Mutex::new(HashMap::new()),
        }
    }

    /// A permit, or `None` when the group or the server runs as many
    /// analyses as allowed.
    pub(super) fn try_enter(&self, group: &str) -> Option<Permit> {
        let mine = {
            let mut groups = self.groups.lock().ok()?;
            Arc::clone(
                groups
                    .entry(group.to_string())
                    .or_insert_with(|| Arc::new(Semaphore::new(self.per_group))),
            )
        };
        let group = mine.try_acquire_owned().ok()?;
        let all = Arc::clone(&self.all).try_acquire_owned().ok()?;
        Some(Permit {
            _all: all,
            _group: group,
        })
    }
}

/// Sets the flag when dropped: kept in the handler's future, which the
/// server drops when the client disconnects, so the analysis' thread sees
/// the flag at its next chunk.
#[derive(Debug)]
pub(super) struct StopOnDrop(pub(super) Cancel);

impl Drop for StopOnDrop {
    fn drop(&mut self) {
        self.0.cancel();
    }
}

/// What an analysis' thread holds while it runs: its permit, the flag, the
/// counters; counts it running until dropped.
#[derive(Debug)]
pub(super) struct Budget {
    pub(super) limits: WebLimits,
    pub(super) cancel: Cancel,
    metrics: Metrics,
    page: &'static str,
    _permit: Permit,
}

impl Budget {
    pub(super) fn new(
        limits: WebLimits,
        cancel: Cancel,
        metrics: Metrics,
        page: &'static str,
        permit: Permit,
    ) -> Budget {
        metrics.web_analysis_running(true);
        Budget {
            limits,
            cancel,
            metrics,
            page,
            _permit: permit,
        }
    }

    /// Before each store query: stops (an error) once the client is gone,
    /// and counts the query.
    pub(super) fn chunk(&self) -> Result<(), diagnose::input::Cancelled> {
        self.cancel.check()?;
        self.metrics.count_web_chunk(self.page);
        Ok(())
    }

    /// Counts `n` runs or windows read.
    pub(super) fn read(&self, n: u64) {
        self.metrics.count_web_runs(self.page, n);
    }

    /// The error an analysis stopped by its client ends with (nobody sees
    /// it: the response has nowhere to go), counted.
    pub(super) fn cancelled(&self) -> crate::store::StoreError {
        self.metrics.count_web_cancelled();
        crate::store::StoreError::Failed(diagnose::input::Cancelled.to_string())
    }
}

impl Drop for Budget {
    fn drop(&mut self) {
        self.metrics.web_analysis_running(false);
    }
}

/// A duration in words for the pages' messages (`7d`, `36h`, `90m`, `45s`).
pub(super) fn span_text(d: Duration) -> String {
    let s = d.as_secs();
    match s {
        _ if s % 86_400 == 0 => format!("{}d", s / 86_400),
        _ if s % 3_600 == 0 => format!("{}h", s / 3_600),
        _ if s % 60 == 0 => format!("{}m", s / 60),
        _ => format!("{s}s"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_gate_bounds_each_group_and_all() {
        let gate = Gate::new(&WebLimits {
            analyses: 2,
            analyses_per_group: 1,
            ..WebLimits::default()
        });
        let a = gate.try_enter("a").expect("first of a");
        assert!(gate.try_enter("a").is_none(), "a runs one already");
        let b = gate.try_enter("b").expect("first of b");
        assert!(gate.try_enter("c").is_none(), "two run already");
        drop(a);
        assert!(gate.try_enter("c").is_some(), "a's place is free again");
        drop(b);
    }

    #[test]
    fn spans_are_said_in_the_largest_whole_unit() {
        assert_eq!(span_text(Duration::from_secs(7 * 86_400)), "7d");
        assert_eq!(span_text(Duration::from_secs(36 * 3_600)), "36h");
        assert_eq!(span_text(Duration::from_secs(90)), "90s");
    }
}
