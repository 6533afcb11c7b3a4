//! The diagnosis page's work: the group's runs of one program in a time
//! range, labelled as the form asks (clusters of duration or throughput,
//! or a fact), diagnosed by the `diagnose` crate, and turned into what the
//! template shows (counts, the clusters' duration plot, each rule with the
//! HTML report's plots, the syscalls outside the intersection).

use agent_core::Summary;
use diagnose::analysis::{self, Diagnosis, Options};
use diagnose::fmt::format_number;
use diagnose::label::{self, ClusterBy, Labelling};
use diagnose::report::{class_values_svg, rule_plots};
use serde::{Deserialize, Serialize};

use super::limits::Budget;
use crate::store::{RunFilter, Store, StoreError};

/// The form's fields (all optional: an empty form shows only the form).
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
pub struct DiagnosisQuery {
    /// The traced program (required to diagnose).
    #[serde(default)]
    pub program: String,
    /// `--since`-like: Unix seconds, `…ns`, or an age (`2h`, `7d`).
    #[serde(default)]
    pub since: String,
    #[serde(default)]
    pub until: String,
    /// `duration` (default), `throughput` or `fact`.
    #[serde(default)]
    pub label: String,
    /// The fact whose values label the runs, with `label=fact`.
    #[serde(default)]
    pub fact: String,
    /// Merge each stream's windows into one run (else windows are left out).
    #[serde(default)]
    pub merge_windows: Option<String>,
}

/// How the runs are labelled.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Labeller {
    Cluster(ClusterBy),
    Fact(String),
}

/// A rule as the page shows it.
#[derive(Debug, Clone, Serialize)]
pub struct RuleView {
    pub rank: usize,
    pub text: String,
    /// Three decimals, as the text report prints it.
    pub accuracy: String,
    /// (attribute, SVG) of each attribute.
    pub plots: Vec<(String, String)>,
}

/// A syscall outside the intersection: its name and per class "runs with
/// it / runs" and the mean number of calls.
#[derive(Debug, Clone, Serialize)]
pub struct OutsideView {
    pub name: String,
    pub cells: Vec<(String, String)>,
}

/// Everything the diagnosis page shows of one diagnosis.
#[derive(Debug, Clone, Serialize)]
pub struct DiagnosisView {
    pub runs: usize,
    pub method: String,
    /// (class, runs) in class order: good first.
    pub classes: Vec<(String, usize)>,
    /// The clusters in words, when labels came from clustering.
    pub clusters: Option<String>,
    /// Each run's duration by class, with the boundary when clustered by
    /// duration.
    pub duration_plot: String,
    pub attributes: usize,
    pub rules: Vec<RuleView>,
    pub outside: Vec<OutsideView>,
    /// What became of window summaries, in words.
    pub windows_note: Option<String>,
    /// How many matching runs were left out by `--web-max-runs`, in words.
    pub limit_note: Option<String>,
    /// The runs the diagnosis left out and why (late traces, runs observed
    /// another way than most: `diagnose::selection`), in words.
    pub left_note: Option<String>,
}

/// Diagnoses `group`'s runs as `q` asks: the newest `budget.limits.max_runs`
/// of them at most (`serve --web-max-runs`; the page says how many were
/// left out). The outer error is the store's (or the client gone: the
/// budget's flag); the inner one is what the operator should change (no
/// runs, one class, a bad time...), shown on the page.
pub(super) fn run(
    store: &mut dyn Store,
    group: &str,
    q: &DiagnosisQuery,
    now_unix_ns: u64,
    budget: &Budget,
) -> Result<Result<DiagnosisView, String>, StoreError> {
    let (mut filter, labeller) = match parse(group, q, now_unix_ns) {
        Ok(parsed) => parsed,
        Err(e) => return Ok(Err(e)),
    };
    let max_runs = budget.limits.max_runs;
    budget.chunk().map_err(|_| budget.cancelled())?;
    // Windows are left out of the diagnosis unless merged into their
    // runs: then they must not take the limit's places either.
    filter.whole_runs = q.merge_windows.is_none();
    let matching = store.count_runs(&filter)?;
    // The newest runs: what an operator looking at a slow fleet now wants.
    filter.limit = Some(max_runs as u64);
    filter.newest_first = true;
    budget.chunk().map_err(|_| budget.cancelled())?;
    let mut stored = store.load(&filter)?;
    budget.read(stored.len() as u64);
    stored.reverse();
    let mut summaries = Vec::with_capacity(stored.len());
    for run in &stored {
        match Summary::decode(&run.raw) {
            Ok(s) => summaries.push(s),
            Err(e) => {
                return Err(StoreError::Failed(format!(
                    "a stored run no longer decodes: {e}"
                )))
            }
        }
    }
    drop(stored);
    budget.cancel.check().map_err(|_| budget.cancelled())?;
    let read = summaries.len() as u64;
    let limit_note = (matching > read).then(|| {
        format!(
            "diagnosed the newest {read} of {matching} runs (limit {max_runs}, serve --web-max-runs; \
             narrow the time range, or use `edge-service diagnose` for all of them)"
        )
    });
    Ok(
        diagnose_summaries(summaries, &labeller, q.merge_windows.is_some()).map(|mut view| {
            view.limit_note = limit_note;
            view
        }),
    )
}

fn parse(
    group: &str,
    q: &DiagnosisQuery,
    now_unix_ns: u64,
) -> Result<(RunFilter, Labeller), String> {
    let program = q.program.trim();
    if program.is_empty() {
        return Err("pick a program".into());
    }
    let time = |name: &str, text: &str| -> Result<Option<u64>, String> {
        let text = text.trim();
        if text.is_empty() {
            return Ok(None);
        }
        diagnose::time::parse_time(text, now_unix_ns)
            .map(Some)
            .map_err(|e| format!("{name}: {e}"))
    };
    let labeller = match q.label.as_str() {
        "" | "duration" => Labeller::Cluster(ClusterBy::Duration),
        "throughput" => Labeller::Cluster(ClusterBy::Throughput),
        "fact" if !q.fact.trim().is_empty() => Labeller::Fact(q.fact.trim().to_string()),
        "fact" => return Err("labelling by a fact needs the fact's name".into()),
        other => return Err(format!("unknown labelling `{other}`")),
    };
    let filter = RunFilter {
        group: Some(group.to_string()),
        program: Some(program.to_string()),
        since_unix_ns: time("since", &q.since)?,
        until_unix_ns: time("until", &q.until)?,
        // Light records have no syscalls to explain.
        kind: Some(agent_core::Kind::Full),
        ..RunFilter::default()
    };
    Ok((filter, labeller))
}

fn diagnose_summaries(
    summaries: Vec<Summary>,
    labeller: &Labeller,
    merge_windows: bool,
) -> Result<DiagnosisView, String> {
    let (runs, note) = diagnose::windows::whole_runs(summaries, merge_windows);
    if runs.is_empty() {
        return Err(match note {
            Some(n) => format!("no whole runs to diagnose: {n} (tick “merge windows”)"),
            None => "no runs match".into(),
        });
    }
    // Runs the diagnosis would leave out (late traces, runs of the
    // minority source) are left out before the labels are found, as
    // `edge-service diagnose` does, so they take no part in the clusters.
    let (mut runs, left_out) = diagnose::selection::explained(runs, false, None);
    if runs.is_empty() {
        return Err(format!(
            "no run left to explain: left out {}",
            left_out.phrases().join("; ")
        ));
    }
    let err = |e: anyhow::Error| format!("{e:#}");
    let (labelling, skip_fact): (Labelling, Option<String>) = match labeller {
        Labeller::Cluster(by) => (label::by_cluster(&runs, *by).map_err(err)?, None),
        Labeller::Fact(key) => {
            let (labelling, keep) = label::by_fact(&runs, key).map_err(err)?;
            let mut keep = keep.into_iter();
            runs.retain(|_| keep.next().unwrap_or(false));
            (labelling, Some(key.clone()))
        }
    };
    let options = Options {
        skip_fact,
        ..Options::default()
    };
    let durations: Vec<f64> = runs
        .iter()
        .map(|s| s.run.duration_ns as f64 / 1e9)
        .collect();
    let mut d =
        analysis::diagnose(&runs, labelling, &options).map_err(|e| match left_out.total() {
            0 => err(e),
            _ => format!("{}; left out {}", err(e), left_out.phrases().join("; ")),
        })?;
    d.left_out.add(left_out);
    Ok(view(&d, &durations, note.map(|n| n.to_string())))
}

fn view(d: &Diagnosis, durations: &[f64], windows_note: Option<String>) -> DiagnosisView {
    let data = &d.dataset;
    let counts = data.class_counts();
    let clusters = d.labelling.clusters.as_ref();
    let boundary: Vec<f64> = clusters
        .filter(|c| c.by == ClusterBy::Duration)
        .map(|c| c.boundary)
        .into_iter()
        .collect();
    DiagnosisView {
        runs: data.rows(),
        method: d.labelling.method.clone(),
        classes: data.classes.iter().cloned().zip(counts).collect(),
        clusters: clusters.map(|c| {
            format!(
                "good {}–{} {unit}, bad {}–{} {unit}, boundary {} {unit}",
                format_number(c.good.0),
                format_number(c.good.1),
                format_number(c.bad.0),
                format_number(c.bad.1),
                format_number(c.boundary),
                unit = c.unit
            )
        }),
        duration_plot: class_values_svg(d, durations, &boundary),
        attributes: data.attributes.len(),
        rules: d
            .rules
            .iter()
            .map(|r| RuleView {
                rank: r.rank,
                text: r.text.clone(),
                accuracy: format!("{:.3}", r.accuracy),
                plots: rule_plots(d, r)
                    .into_iter()
                    .map(|p| (p.attribute, p.svg))
                    .collect(),
            })
            .collect(),
        outside: d
            .outside
            .iter()
            .map(|e| OutsideView {
                name: e.name.clone(),
                cells: e
                    .per_class
                    .iter()
                    .map(|pc| {
                        let num = pc
                            .means
                            .iter()
                            .find(|(n, _)| *n == "num")
                            .map_or(0.0, |(_, v)| *v);
                        (format!("{}/{}", pc.runs_with, pc.runs), format_number(num))
                    })
                    .collect(),
            })
            .collect(),
        windows_note,
        limit_note: None,
        left_note: (d.left_out.total() > 0)
            .then(|| format!("Left out: {}.", d.left_out.phrases().join("; "))),
    }
}
