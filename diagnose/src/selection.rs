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

use agent_core::{Kind, Summary};

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
}

impl LeftOut {
    /// Runs left out for any reason.
    pub fn total(&self) -> usize {
        self.light + self.late + self.unknown_outcome + self.without_label_fact
    }

    /// Counts one run left out for `reason`.
    pub fn count(&mut self, reason: Reason) {
        match reason {
            Reason::Light => self.light += 1,
            Reason::Late => self.late += 1,
        }
    }

    /// Adds the counts of `other` (left out at another step).
    pub fn add(&mut self, other: LeftOut) {
        self.light += other.light;
        self.late += other.late;
        self.unknown_outcome += other.unknown_outcome;
        self.without_label_fact += other.without_label_fact;
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

/// Why [`reason_left_out`] leaves a run out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reason {
    /// A light record.
    Light,
    /// Its trace began late.
    Late,
}

/// Whether `summary` is left out of a diagnosis, and why.
pub fn reason_left_out(summary: &Summary, include_late: bool) -> Option<Reason> {
    if summary.kind == Kind::Light {
        return Some(Reason::Light);
    }
    if !include_late && summary.coverage.began_late() == Some(true) {
        return Some(Reason::Late);
    }
    None
}

/// The runs a diagnosis explains, in their order, and what was left out.
pub fn explained(summaries: Vec<Summary>, include_late: bool) -> (Vec<Summary>, LeftOut) {
    let mut left_out = LeftOut::default();
    let kept = summaries
        .into_iter()
        .filter(|s| match reason_left_out(s, include_late) {
            Some(reason) => {
                left_out.count(reason);
                false
            }
            None => true,
        })
        .collect();
    (kept, left_out)
}
