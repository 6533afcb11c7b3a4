//! The Peers page's work: the peers analysis (`edge-service peers`,
//! `diagnose::peers`) on the session's group's stored windows, read as the
//! CLI reads them (`source::for_each_stored`, a chunk of start time at a
//! time), and turned into what the template shows: the findings and the
//! per-metric time series `peers --html` draws.

use diagnose::input::RunFilter as DiagnoseFilter;
use diagnose::peers::fleet::{Fleet, Range};
use diagnose::peers::request::Methods;
use diagnose::peers::{self, report, Options};
use std::cell::Cell;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use summary_view::observe::time_text;

use super::limits::{span_text, Budget};
use crate::source::for_each_stored;
use crate::store::{Store, StoreError};

/// Windows per histogram slice (`peers --slice`'s default).
const SLICE_WINDOWS: u64 = 10;

/// The form's fields (all optional: an empty form shows only the form).
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
pub struct PeersQuery {
    /// Only windows of this program (else every peer set of the group).
    #[serde(default)]
    pub program: String,
    /// The fault-free training range (`peers --train-since/--train-until`).
    #[serde(default)]
    pub train_since: String,
    #[serde(default)]
    pub train_until: String,
    /// The range to diagnose (`--since/--until`; until defaults to now).
    #[serde(default)]
    pub since: String,
    #[serde(default)]
    pub until: String,
    /// `median`, `histogram`, `link`, `errno`, `hang`, `semantic`, `wait` or `all`
    /// (default).
    #[serde(default)]
    pub method: String,
    /// histogram and semantic as Khadke et al. write them (`--strict-paper`):
    /// any value but empty.
    #[serde(default)]
    pub strict_paper: String,
}

impl PeersQuery {
    /// Whether the form was sent (else the page shows only the form).
    pub fn asked(&self) -> bool {
        !(self.train_since.trim().is_empty()
            && self.train_until.trim().is_empty()
            && self.since.trim().is_empty())
    }
}

/// A finding as the page shows it.
#[derive(Debug, Clone, Serialize)]
pub struct FindingView {
    pub device: String,
    pub program: String,
    pub method: String,
    pub cause: String,
    pub metric: String,
    pub first: String,
    pub last: String,
    /// Two decimals, as the text report prints it.
    pub score: String,
    pub evidence: String,
    /// For a symptom set apart: the flagged server's device that explains
    /// it (empty for a finding).
    pub explained_by: String,
}

/// One metric's time series: its title and SVG.
#[derive(Debug, Clone, Serialize)]
pub struct PlotView {
    pub program: String,
    pub metric: String,
    pub devices: usize,
    pub svg: String,
}

/// Everything the page shows of one analysis.
#[derive(Debug, Clone, Serialize)]
pub struct PeersView {
    pub devices: usize,
    /// (program, devices) of each peer set judged.
    pub sets: Vec<(String, usize)>,
    pub findings: Vec<FindingView>,
    /// Clients' findings set apart as a flagged server's symptoms.
    pub explained: Vec<FindingView>,
    pub plots: Vec<PlotView>,
    pub notes: Vec<String>,
    /// What was read and left out, in words.
    pub tally: String,
}

/// Runs the analysis for `group`, within `budget`: ranges spanning more
/// than `--web-max-span` and more than `--web-max-windows` windows are
/// refused with a message naming the limit. The outer error is the
/// store's (or the client gone: the budget's flag); the inner one a
/// message for the form (a bad time, an empty or overlapping range, no
/// windows, too few devices, a limit).
pub(super) fn run(
    store: &mut dyn Store,
    group: &str,
    q: &PeersQuery,
    now_unix_ns: u64,
    budget: &Budget,
) -> Result<Result<PeersView, String>, StoreError> {
    let options = match options(&q.method, !q.strict_paper.trim().is_empty()) {
        Ok(o) => o,
        Err(e) => return Ok(Err(e)),
    };
    let until = Some(q.until.trim()).filter(|u| !u.is_empty());
    let (training, diagnosis) = match diagnose::time::parse_ranges(
        q.train_since.trim(),
        q.train_until.trim(),
        q.since.trim(),
        until,
        now_unix_ns,
    ) {
        Ok(r) => r,
        Err(e) => return Ok(Err(format!("{e:#}"))),
    };
    let limits = budget.limits;
    let span = Duration::from_nanos(
        (training.until.saturating_sub(training.since))
            .saturating_add(diagnosis.until.saturating_sub(diagnosis.since)),
    );
    if span > limits.max_span {
        return Ok(Err(format!(
            "the training and diagnosis ranges span {} together; the web UI reads at most {} \
             (serve --web-max-span): narrow the ranges, or use `edge-service peers`",
            span_text(Duration::from_secs(span.as_secs())),
            span_text(limits.max_span)
        )));
    }
    let program = Some(q.program.trim().to_string()).filter(|p| !p.is_empty());
    let mut fleet = Fleet::new(training, diagnosis, SLICE_WINDOWS);
    // Both closures look at these: the reader stops at the next chunk once
    // a window was refused.
    let read = Cell::new(0u64);
    let over = Cell::new(false);
    for range in [training, diagnosis] {
        let mut before_chunk = || -> anyhow::Result<()> {
            budget.chunk()?;
            if over.get() {
                anyhow::bail!("over --web-max-windows");
            }
            Ok(())
        };
        let mut each = |s: &agent_core::Summary| {
            if read.get() >= limits.max_windows {
                over.set(true);
                return;
            }
            read.set(read.get() + 1);
            budget.read(1);
            fleet.add(s);
        };
        let outcome = for_each_stored(
            store,
            &filter(group, &program, range),
            &mut before_chunk,
            &mut each,
        );
        if over.get() {
            return Ok(Err(format!(
                "more than {} window summaries in the ranges; the web UI reads at most {} \
                 (serve --web-max-windows): narrow the ranges or pick a program, or use \
                 `edge-service peers`",
                limits.max_windows, limits.max_windows
            )));
        }
        if budget.cancel.is_cancelled() {
            return Err(budget.cancelled());
        }
        outcome.map_err(|e| StoreError::Failed(format!("{e:#}")))?;
    }
    if fleet.devices.is_empty() {
        return Ok(Err(format!(
            "no window summaries of group {group:?}{} with a device id in the ranges ({})",
            program
                .as_ref()
                .map(|p| format!(" and program {p:?}"))
                .unwrap_or_default(),
            peers::tally_text(&fleet.tally)
        )));
    }
    let d = match peers::analyse(&fleet, &options) {
        Ok(d) => d,
        Err(e) => return Ok(Err(format!("{e:#}"))),
    };
    Ok(Ok(view(&d)))
}

fn options(method: &str, strict_paper: bool) -> Result<Options, String> {
    let methods: Methods = method.parse().map_err(|e| format!("{e:#}"))?;
    Ok(methods.options().strict_paper(strict_paper))
}

fn filter(group: &str, program: &Option<String>, r: Range) -> DiagnoseFilter {
    DiagnoseFilter {
        group: Some(group.to_string()),
        program: program.clone(),
        since_unix_ns: Some(r.since),
        until_unix_ns: Some(r.until),
    }
}

fn finding_view(d: &peers::PeerDiagnosis, f: &peers::Finding, by: Option<usize>) -> FindingView {
    FindingView {
        device: d.devices[f.device].id.to_string(),
        program: d.devices[f.device].program().to_string(),
        method: f.method.name().to_string(),
        cause: f.cause.name().to_string(),
        metric: f.metric.clone(),
        first: time_text(f.first_window_unix_ns),
        last: time_text(f.last_window_unix_ns),
        score: format!("{:.2}", f.score),
        evidence: f.evidence.clone(),
        explained_by: by.map(|b| d.devices[b].id.to_string()).unwrap_or_default(),
    }
}

fn view(d: &peers::PeerDiagnosis) -> PeersView {
    PeersView {
        devices: d.devices.len(),
        sets: d.sets.iter().map(|s| (s.name(), s.devices.len())).collect(),
        findings: d
            .findings
            .iter()
            .map(|f| finding_view(d, f, None))
            .collect(),
        explained: d
            .explained
            .iter()
            .map(|e| finding_view(d, &e.finding, Some(e.by)))
            .collect(),
        plots: d
            .series
            .iter()
            .map(|s| PlotView {
                program: s.program.clone(),
                metric: s.metric.clone(),
                devices: s.devices.len(),
                svg: report::series_svg(d, s),
            })
            .collect(),
        notes: d.notes.clone(),
        tally: peers::tally_text(&d.tally),
    }
}

#[cfg(test)]
mod tests {
    use super::options;

    #[test]
    fn the_form_picks_the_semantic_method_and_the_papers_rules() {
        let o = options("semantic", true).unwrap();
        assert!(
            o.semantic && !o.median && !o.histogram && !o.link && !o.errno && !o.hang && !o.wait
        );
        assert!(o.semantic_params.strict_paper && o.histogram_params.strict_paper);
        let o = options("all", false).unwrap();
        assert!(o.semantic && o.histogram);
        assert!(!o.semantic_params.strict_paper && !o.histogram_params.strict_paper);
        let err = options("nope", false).unwrap_err();
        assert!(err.contains("semantic"), "{err}");
    }
}
