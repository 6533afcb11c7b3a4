//! Which runs a diagnosis explains, and how many it left out and why.
//!
//! Light records (`Kind::Light`: a run noticed without tracing it) have no
//! syscalls, so there is nothing in them for rules or the time ranking to
//! compare: they are left out. So, by default, are runs whose trace began
//! late (the agent attached to a process already running: its first calls
//! were missed, so its counts and times are short by an unknown amount);
//! `include_late` keeps them. A run whose coverage is unknown (a summary
//! older than format 3) is kept: most such runs were traced from the start,
//! and leaving out every old run would leave nothing to diagnose.
//!
//! Runs observed in different ways (the coverage's `Source`: every syscall
//! the kernel saw, or the libc calls wrappers inside the process recorded)
//! are not compared: an in-process run lacks, by construction, the calls
//! libc makes itself (malloc's `mmap`/`madvise`, stdio's writes, the
//! loader's `openat`s), so its counts would pass for a difference between
//! good and bad runs. Of the runs left after the rules above, those of the
//! majority source are explained and the others left out and counted
//! (a tie keeps the kernel's, the complete view; every summary older than
//! format 4 is the kernel's), unless the caller names the source to keep
//! (`edge-service diagnose --source`). Rather than refuse the whole
//! diagnosis when one run of the other source is among the ones asked for
//! (the store has no filter by source), the comparable runs are diagnosed
//! and the report says how many of the other source were set aside, as it
//! does for late runs.

use agent_core::{Kind, Source, Summary};

/// Runs left out of a diagnosis, by reason.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LeftOut {
    /// Light records (no syscalls to explain).
    pub light: usize,
    /// Runs whose trace began after the process started (without
    /// `--include-late`).
    pub late: usize,
    /// Runs whose outcome is unknown (detached or still running), with
    /// labels by outcome.
    pub unknown_outcome: usize,
    /// Runs without the label fact, with labels by a fact.
    pub without_label_fact: usize,
    /// Runs observed by another source than the runs explained (not
    /// comparable with them).
    pub other_source: usize,
    /// The source of the runs explained (the majority's, or the one the
    /// caller named), when runs of the other were left out.
    pub kept_source: Source,
}

impl LeftOut {
    /// Runs left out for any reason.
    pub fn total(&self) -> usize {
        self.light + self.late + self.unknown_outcome + self.without_label_fact + self.other_source
    }

    /// Counts one run left out for `reason`.
    pub fn count(&mut self, reason: Reason) {
        match reason {
            Reason::Light => self.light += 1,
            Reason::Late => self.late += 1,
            Reason::OtherSource { kept } => {
                self.other_source += 1;
                self.kept_source = kept;
            }
        }
    }

    /// Adds the counts of `other` (left out at another step).
    pub fn add(&mut self, other: LeftOut) {
        self.light += other.light;
        self.late += other.late;
        self.unknown_outcome += other.unknown_outcome;
        self.without_label_fact += other.without_label_fact;
        if other.other_source > 0 {
            self.other_source += other.other_source;
            self.kept_source = other.kept_source;
        }
    }

    /// One phrase per reason with runs left out
    /// (`2 light records (no syscalls)`), for the reports.
    pub fn phrases(&self) -> Vec<String> {
        let mut out = Vec::new();
        if self.light > 0 {
            out.push(format!(
                "{} light record(s) (no syscalls to compare)",
                self.light
            ));
        }
        if self.late > 0 {
            out.push(format!(
                "{} run(s) whose trace began after the process started (--include-late keeps them)",
                self.late
            ));
        }
        if self.other_source > 0 {
            let kept = self.kept_source;
            let other = match kept {
                Source::Kernel => Source::InProcess,
                Source::InProcess => Source::Kernel,
            };
            out.push(format!(
                "{} run(s) observed {}, not comparable with the runs kept, observed {} \
                 (their counts of mmap, madvise, openat... differ by construction; \
                 --source picks which are kept, the majority's by default)",
                self.other_source,
                observed(other),
                observed(kept)
            ));
        }
        if self.unknown_outcome > 0 {
            out.push(format!(
                "{} run(s) whose outcome is unknown (detached or still running)",
                self.unknown_outcome
            ));
        }
        if self.without_label_fact > 0 {
            out.push(format!(
                "{} run(s) without the label fact",
                self.without_label_fact
            ));
        }
        out
    }
}

/// How runs of `source` were observed, after "observed".
fn observed(source: Source) -> &'static str {
    match source {
        Source::Kernel => "by the kernel (every syscall)",
        Source::InProcess => "in-process (libc calls)",
    }
}

/// Why [`reason_left_out`] leaves a run out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reason {
    /// A light record.
    Light,
    /// Its trace began late.
    Late,
    /// It was observed by another source than the runs kept (`kept`: the
    /// majority's, or the one the caller named).
    OtherSource {
        /// The source of the runs kept.
        kept: Source,
    },
}

/// Whether `summary` is left out of a diagnosis on its own (a light
/// record, a late trace), and why; the source rule needs the other runs
/// too ([`reasons_left_out`]).
pub fn reason_left_out(summary: &Summary, include_late: bool) -> Option<Reason> {
    if summary.kind == Kind::Light {
        return Some(Reason::Light);
    }
    if !include_late && summary.coverage.began_late() == Some(true) {
        return Some(Reason::Late);
    }
    None
}

/// The source most of `runs` were observed by; a tie (or no run) is the
/// kernel's, the complete view.
pub fn majority_source<'a>(runs: impl IntoIterator<Item = &'a Summary>) -> Source {
    let (mut kernel, mut in_process) = (0usize, 0usize);
    for s in runs {
        match s.coverage.source {
            Source::Kernel => kernel += 1,
            Source::InProcess => in_process += 1,
        }
    }
    if in_process > kernel {
        Source::InProcess
    } else {
        Source::Kernel
    }
}

/// Why each of `summaries` is left out (`None`: explained): light records
/// and late traces ([`reason_left_out`]), then, among the rest, the runs
/// of another source than `source`, or without one than the majority's
/// ([`majority_source`]).
pub fn reasons_left_out(
    summaries: &[Summary],
    include_late: bool,
    source: Option<Source>,
) -> Vec<Option<Reason>> {
    let mut reasons: Vec<Option<Reason>> = summaries
        .iter()
        .map(|s| reason_left_out(s, include_late))
        .collect();
    let kept = source.unwrap_or_else(|| {
        majority_source(
            summaries
                .iter()
                .zip(&reasons)
                .filter(|(_, r)| r.is_none())
                .map(|(s, _)| s),
        )
    });
    for (s, r) in summaries.iter().zip(reasons.iter_mut()) {
        if r.is_none() && s.coverage.source != kept {
            *r = Some(Reason::OtherSource { kept });
        }
    }
    reasons
}

/// The runs a diagnosis explains, in their order, and what was left out
/// ([`reasons_left_out`]).
pub fn explained(
    summaries: Vec<Summary>,
    include_late: bool,
    source: Option<Source>,
) -> (Vec<Summary>, LeftOut) {
    let mut left_out = LeftOut::default();
    let reasons = reasons_left_out(&summaries, include_late, source);
    let kept = summaries
        .into_iter()
        .zip(reasons)
        .filter_map(|(s, reason)| match reason {
            Some(reason) => {
                left_out.count(reason);
                None
            }
            None => Some(s),
        })
        .collect();
    (kept, left_out)
}
